//! The node's place in the fabric, read at start: its NVLink clique (from
//! `nvidia-smi -q`, run or saved: `--fabric-from`), what its NICs are cabled to (LLDP:
//! `--lldp-from`; InfiniBand ports: `--ib-sysfs`, `--ibnetdiscover`), the operator's
//! domain file (`--domains`) and each NIC's rail (`--rails`). The leaf is derived from
//! the neighbours; the domain labels are written only where no other tool labelled the
//! level ([`topoalign_fabric::domain_labels_with`]). The driver reads the neighbours again
//! on every rediscovery, the agent every `--rescan-interval`, and both derive the rails and
//! the leaf anew ([`NodeFacts::with_wiring`]).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use topoalign_discover::neighbours::{LldpFrom, NeighbourSources, read_neighbours};
use topoalign_fabric::{
    DomainInputs, DomainLabels, LeafDecision, NicRails, RailSource, domain_labels_with,
};
use topoalign_mig::{NodeClique, SavedOutput, node_clique, read_query};
use topoalign_topology::{Neighbours, Topology};

/// The `--fabric-from` value that runs the tool instead of reading a file.
pub const RUN_TOOL: &str = "nvidia-smi";
/// The `--lldp-from` value that runs lldpd's client instead of reading a file.
pub const RUN_LLDPCTL: &str = "lldpctl";

/// Where the NICs' neighbours are read (`--lldp-from`, `--ib-sysfs`, `--ibnetdiscover`);
/// all optional.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[cfg_attr(feature = "clap", derive(clap::Args))]
pub struct WiringFlags {
    /// The NICs' LLDP neighbours (lldpd): `lldpctl` runs `lldpctl -f json`, a path reads
    /// its saved output. They give the leaf (fabric.topograph.run/tier-0, written where no
    /// other tool labels that level; over the --domains file) and the rails of a rail
    /// file's `rule: switch`.
    #[cfg_attr(feature = "clap", arg(long, value_name = "lldpctl|FILE"))]
    pub lldp_from: Option<String>,
    /// A root whose `sys/class/infiniband` holds the node's InfiniBand ports (`/` on the
    /// host): their subnet prefixes give the rails of `rule: ib-subnet`.
    #[cfg_attr(feature = "clap", arg(long, value_name = "DIR"))]
    pub ib_sysfs: Option<PathBuf>,
    /// A saved `ibnetdiscover` scan naming the switch of each host port (with
    /// `--ib-sysfs`): the leaf and the rails of `rule: switch` on InfiniBand.
    #[cfg_attr(feature = "clap", arg(long, value_name = "FILE"))]
    pub ibnetdiscover: Option<PathBuf>,
}

impl WiringFlags {
    /// Whether any neighbour source is given.
    pub fn any(&self) -> bool {
        self.lldp_from.is_some() || self.ib_sysfs.is_some() || self.ibnetdiscover.is_some()
    }
}

/// What the NICs are cabled to, as read at start.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Wiring {
    /// Each NIC's neighbours.
    pub neighbours: Neighbours,
    /// What could not be matched to a NIC, in words.
    pub warnings: Vec<String>,
}

/// The NICs' neighbours of `topo` from the sources `flags` name (`None` when none is).
pub fn read_wiring(flags: &WiringFlags, topo: &Topology) -> Result<Option<Wiring>, FactsError> {
    if !flags.any() {
        return Ok(None);
    }
    let sources = NeighbourSources {
        lldp: flags.lldp_from.as_ref().map(|f| {
            if f == RUN_LLDPCTL {
                LldpFrom::Run(RUN_LLDPCTL.into())
            } else {
                LldpFrom::File(PathBuf::from(f))
            }
        }),
        ib_root: flags.ib_sysfs.clone(),
        ibnetdiscover: flags.ibnetdiscover.clone(),
    };
    let (neighbours, warnings) =
        read_neighbours(topo, &sources).map_err(|e| FactsError::Neighbours(Box::new(e)))?;
    Ok(Some(Wiring {
        neighbours,
        warnings,
    }))
}

/// What the node says about its place in the fabric.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NodeFacts {
    /// The clique the GPUs report, and where it was read; `None` without `--fabric-from`.
    pub clique: Option<(NodeClique, String)>,
    /// The operator's domain labels for this node, and the file's name.
    pub operator: Option<(BTreeMap<String, String>, String)>,
    /// Each physical NIC's rail, when a rail source is given.
    pub rails: Option<NicRails>,
    /// The NICs' neighbours, when a source was given.
    pub wiring: Option<Wiring>,
    /// The leaf derived from the neighbours, when any was read.
    pub leaf: Option<LeafDecision>,
}

/// Why the node's facts could not be read.
#[derive(Debug, thiserror::Error)]
pub enum FactsError {
    /// A file that cannot be read.
    #[error("{flag} {path}: {source}")]
    File {
        /// The flag that named it.
        flag: &'static str,
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// `nvidia-smi -q` could not be run.
    #[error("--fabric-from nvidia-smi: {0}")]
    Tool(#[from] topoalign_discover::ToolError),
    /// `nvidia-smi -q` exited non-zero.
    #[error("--fabric-from nvidia-smi: `{command}` exited with {status}: {stderr}")]
    ToolFailed {
        /// The command line as run.
        command: String,
        /// The exit status.
        status: String,
        /// What it printed on stderr.
        stderr: String,
    },
    /// The `nvidia-smi -q` output does not read.
    #[error("--fabric-from: {0}")]
    Query(#[from] topoalign_mig::ReadError),
    /// The domain file is malformed.
    #[error(transparent)]
    Domains(#[from] topoalign_fabric::FabricError),
    /// The rail source (`--rails`) is malformed or does not fit the node's NICs (the
    /// message names the file and the field).
    #[error("--rails {0}")]
    Rails(#[source] topoalign_fabric::FabricError),
    /// The NICs' neighbours (`--lldp-from`, `--ib-sysfs`, `--ibnetdiscover`) did not read.
    #[error(transparent)]
    Neighbours(Box<topoalign_discover::neighbours::NeighbourError>),
}

fn read(flag: &'static str, path: &Path) -> Result<String, FactsError> {
    std::fs::read_to_string(path).map_err(|source| FactsError::File {
        flag,
        path: path.to_path_buf(),
        source,
    })
}

/// The clique from `--fabric-from`: [`RUN_TOOL`] runs `<program> -q` (`program`:
/// `$TOPOALIGN_NVIDIA_SMI` or `nvidia-smi`), anything else is a saved output's path.
/// Returns the clique and where it was read.
pub fn read_clique(from: &str, program: &str) -> Result<(NodeClique, String), FactsError> {
    let (name, text) = if from == RUN_TOOL {
        let out = topoalign_discover::run_tool(program, &["-q"])?;
        if !out.success {
            return Err(FactsError::ToolFailed {
                command: format!("{program} -q"),
                status: out.status,
                stderr: out.stderr.trim().to_string(),
            });
        }
        (format!("<output of `{program} -q`>"), out.stdout)
    } else {
        (from.to_string(), read("--fabric-from", Path::new(from))?)
    };
    let gpus = read_query(SavedOutput::new(&name, &text))?;
    Ok((node_clique(&gpus), name))
}

/// The operator's labels for `node` from the domain file at `path` (`--domains`), and the
/// file's name.
pub fn read_domains(
    path: &Path,
    node: &str,
) -> Result<(BTreeMap<String, String>, String), FactsError> {
    let name = path.display().to_string();
    let file = topoalign_fabric::parse_domain_file(&read("--domains", path)?, &name)?;
    Ok((file.for_node(node), name))
}

/// The rail source at `path` (`--rails`, YAML or JSON), read and checked as far as the
/// file alone allows: the one reader of the rail file, for the agent, the driver and
/// `topoalign rails`. Errors name the flag, the file and the field.
pub fn read_rail_source(path: &Path) -> Result<RailSource, FactsError> {
    let name = path.display().to_string();
    topoalign_fabric::parse_rail_source(&read("--rails", path)?, &name).map_err(FactsError::Rails)
}

/// The rails `source` gives the NICs of `topo`; the rules by switch or InfiniBand subnet
/// read the NICs' neighbours in `wiring`.
pub fn resolve_rails(
    source: &RailSource,
    topo: &Topology,
    wiring: Option<&Wiring>,
) -> Result<NicRails, FactsError> {
    let none = Neighbours::default();
    let neighbours = wiring.map_or(&none, |w| &w.neighbours);
    topoalign_fabric::nic_rails_with(topo, source, neighbours).map_err(FactsError::Rails)
}

/// The rails of the NICs of `topo` from the rail source at `path` (`--rails`):
/// [`read_rail_source`], then [`resolve_rails`] with the neighbours in `wiring`.
pub fn read_rails(
    path: &Path,
    topo: &Topology,
    wiring: Option<&Wiring>,
) -> Result<NicRails, FactsError> {
    resolve_rails(&read_rail_source(path)?, topo, wiring)
}

/// Where a node's facts come from: the flags of the agent and of the driver.
#[derive(Debug, Clone, Copy)]
pub struct FactSources<'a> {
    /// `--fabric-from`.
    pub fabric_from: Option<&'a str>,
    /// `--domains`.
    pub domains: Option<&'a Path>,
    /// The rail source of `--rails`, already read ([`read_rail_source`]): the caller
    /// keeps it (the driver resolves it again on every rediscovery), so the file is read
    /// once.
    pub rails: Option<&'a RailSource>,
    /// `--lldp-from`, `--ib-sysfs`, `--ibnetdiscover`.
    pub wiring: &'a WiringFlags,
    /// The `nvidia-smi` binary `--fabric-from nvidia-smi` runs.
    pub program: &'a str,
}

/// Every fact of node `node` (topology `topo`) the sources name: the clique, the
/// operator's labels, the rails (resolved with the neighbours) and the leaf derived from
/// the neighbours (on the railed NICs where rails are known).
pub fn read_facts(
    node: &str,
    topo: &Topology,
    from: FactSources<'_>,
) -> Result<NodeFacts, FactsError> {
    let wiring = read_wiring(from.wiring, topo)?;
    let wired = NodeFacts::default().with_wiring(topo, wiring, from.rails)?;
    Ok(NodeFacts {
        clique: from
            .fabric_from
            .map(|f| read_clique(f, from.program))
            .transpose()?,
        operator: from.domains.map(|p| read_domains(p, node)).transpose()?,
        ..wired
    })
}

impl NodeFacts {
    /// These facts with the NICs' neighbours `wiring` (read on `topo`; `None`: no
    /// neighbour source): the rails of `rails` resolved on them and the leaf derived
    /// again; the clique and the operator's labels are kept. How a recabled NIC's new
    /// neighbours reach the facts read at start.
    pub fn with_wiring(
        self,
        topo: &Topology,
        wiring: Option<Wiring>,
        rails: Option<&RailSource>,
    ) -> Result<NodeFacts, FactsError> {
        let rails = rails
            .map(|src| resolve_rails(src, topo, wiring.as_ref()))
            .transpose()?;
        Ok(NodeFacts {
            leaf: wiring
                .as_ref()
                .map(|w| topoalign_fabric::derive_leaf(topo, &w.neighbours, rails.as_ref())),
            wiring,
            rails,
            ..self
        })
    }

    /// The domain labels to write on a node whose labels are `existing`, of which this
    /// writer wrote `owned` before; with no facts, none.
    pub fn labels(
        &self,
        existing: &BTreeMap<String, String>,
        owned: &BTreeSet<String>,
    ) -> DomainLabels {
        let none = BTreeMap::new();
        let (operator, file) = match &self.operator {
            Some((l, f)) => (l, f.as_str()),
            None => (&none, ""),
        };
        let clique = self.clique.as_ref().and_then(|(c, _)| c.value());
        let derived: Vec<_> = self.leaf.iter().filter_map(LeafDecision::label).collect();
        let mut out = domain_labels_with(
            DomainInputs {
                existing,
                owned,
                clique,
                operator,
            },
            file,
            &derived,
        );
        if let Some(leaf) = &self.leaf
            && leaf.value.is_none()
        {
            out.notes
                .push(format!("no leaf from the NICs' neighbours: {}", leaf.why));
        }
        out.notes
            .extend(self.wiring.iter().flat_map(|w| w.warnings.iter().cloned()));
        if let Some((c, source)) = &self.clique
            && let Some(why) = c.why_none()
        {
            out.notes
                .push(format!("no NVLink clique from {source}: {why}"));
        }
        out
    }

    /// Whether any domain fact was given (`--fabric-from`, `--domains`, or a neighbour
    /// source the leaf is derived from).
    pub fn has_domains(&self) -> bool {
        self.clique.is_some() || self.operator.is_some() || self.leaf.is_some()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    const QUERY: &str = "Attached GPUs : 1\nGPU 00000008:01:00.0\n    Fabric\n        State : Completed\n        CliqueId : 3\n        ClusterUUID : abc\n";

    #[test]
    fn a_saved_query_gives_the_clique_and_bad_input_names_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let good = dir.path().join("q.txt");
        std::fs::write(&good, QUERY).unwrap();
        let (c, name) = read_clique(good.to_str().unwrap(), "unused").unwrap();
        assert_eq!(c.value(), Some("abc.3"));
        assert_eq!(name, good.display().to_string());
        let cut = dir.path().join("cut.txt");
        std::fs::write(&cut, "Attached GPUs : 2\nGPU 00000008:01:00.0\n").unwrap();
        let e = read_clique(cut.to_str().unwrap(), "unused")
            .unwrap_err()
            .to_string();
        assert!(e.contains("cut.txt"), "{e}");
        let e = read_clique(dir.path().join("absent").to_str().unwrap(), "unused")
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("--fabric-from"), "{e}");
        let e = read_clique(RUN_TOOL, "/nonexistent/nvidia-smi")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("--fabric-from nvidia-smi") && e.contains("/nonexistent/nvidia-smi"),
            "{e}"
        );
        // A tool that runs but fails (`false` exits 1 whatever its arguments).
        let e = read_clique(RUN_TOOL, "false").unwrap_err().to_string();
        assert!(
            e.starts_with("--fabric-from nvidia-smi: `false -q` exited with"),
            "{e}"
        );
    }

    #[test]
    fn the_domain_file_is_read_for_the_node_and_errors_name_flag_file_and_field() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("d.yaml");
        std::fs::write(
            &file,
            "labels: {fabric.topograph.run/tier-1: spine-1}\nnodes:\n  n1: {fabric.topograph.run/tier-0: leaf-7}\n",
        )
        .unwrap();
        let (labels, name) = read_domains(&file, "n1").unwrap();
        assert_eq!(name, file.display().to_string());
        assert_eq!(labels.len(), 2);
        assert_eq!(labels["fabric.topograph.run/tier-0"], "leaf-7");
        let (labels, _) = read_domains(&file, "n2").unwrap();
        assert_eq!(labels.len(), 1, "{labels:?}");
        std::fs::write(&file, "labels: {example.com/rack: r1}\n").unwrap();
        let e = read_domains(&file, "n1").unwrap_err().to_string();
        assert!(e.contains("d.yaml: labels.\"example.com/rack\""), "{e}");
        let e = read_domains(&dir.path().join("absent.yaml"), "n1")
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("--domains ") && e.contains("absent.yaml"),
            "{e}"
        );
    }

    #[test]
    fn the_rail_file_is_read_into_one_source_and_errors_name_flag_file_and_field() {
        let topo = topoalign_profiles::get("dgx-h100").unwrap();
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("r.yaml");
        let name = file.display().to_string();
        std::fs::write(&file, "rule: nearest-gpu\n").unwrap();
        let src = read_rail_source(&file).unwrap();
        assert_eq!(src.file, name);
        let rails = resolve_rails(&src, &topo, None).unwrap();
        assert_eq!(rails, read_rails(&file, &topo, None).unwrap());
        assert_eq!(rails.rails, 8);
        // A map naming no NIC of the node reads, and fails on the node.
        std::fs::write(&file, "rails: 2\nnics: {mlx5_99: 0}\n").unwrap();
        let src = read_rail_source(&file).unwrap();
        let e = resolve_rails(&src, &topo, None).unwrap_err().to_string();
        assert!(
            e.starts_with(&format!("--rails {name}: nics.mlx5_99: no such NIC")),
            "{e}"
        );
        std::fs::write(&file, "rails: 0\nrule: nearest-gpu\n").unwrap();
        let e = read_rail_source(&file).unwrap_err().to_string();
        assert_eq!(
            e,
            format!("--rails {name}: rails: the number of rails must be at least 1")
        );
        let absent = dir.path().join("absent.yaml");
        let e = read_rail_source(&absent).unwrap_err().to_string();
        assert!(
            e.starts_with(&format!("--rails {}: ", absent.display())),
            "{e}"
        );
    }

    #[test]
    fn facts_become_labels_only_where_the_level_is_free() {
        let dir = tempfile::tempdir().unwrap();
        let q = dir.path().join("q.txt");
        std::fs::write(&q, QUERY).unwrap();
        let facts = NodeFacts {
            clique: Some(read_clique(q.to_str().unwrap(), "unused").unwrap()),
            operator: Some((
                BTreeMap::from([("fabric.topograph.run/tier-0".into(), "leaf-7".into())]),
                "d.yaml".into(),
            )),
            ..NodeFacts::default()
        };
        assert!(facts.has_domains());
        let out = facts.labels(&BTreeMap::new(), &BTreeSet::new());
        assert_eq!(out.write["nvidia.com/gpu.clique"], "abc.3");
        assert_eq!(out.write["fabric.topograph.run/tier-0"], "leaf-7");
        let existing = BTreeMap::from([(
            "network.topology.nvidia.com/leaf".to_string(),
            "leaf-1".to_string(),
        )]);
        let out = facts.labels(&existing, &BTreeSet::new());
        assert!(!out.write.contains_key("fabric.topograph.run/tier-0"));
        assert!(out.notes[0].contains("already has network.topology.nvidia.com/leaf=leaf-1"));
        assert!(!NodeFacts::default().has_domains());
    }

    #[test]
    fn neighbours_give_the_rails_and_the_leaf_over_the_operators_file() {
        let topo = topoalign_profiles::get("mi300x-8").unwrap();
        let gang = concat!(env!("CARGO_MANIFEST_DIR"), "/../../deploy/gang");
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path().join("d.yaml");
        std::fs::write(&d, "labels: {fabric.topograph.run/tier-0: leaf-x}\n").unwrap();
        let wiring = WiringFlags {
            lldp_from: Some(format!("{gang}/lldp-mi300x.json")),
            ..WiringFlags::default()
        };
        let rails = read_rail_source(Path::new(&format!("{gang}/rails-switch.yaml"))).unwrap();
        let from = FactSources {
            fabric_from: None,
            domains: Some(&d),
            rails: Some(&rails),
            wiring: &wiring,
            program: "unused",
        };
        let facts = read_facts("n1", &topo, from).unwrap();
        let r = facts.rails.as_ref().unwrap();
        let on: BTreeSet<u32> = (0..topo.nics.len())
            .filter_map(|i| r.rail_of(topo.nic_bdf(i)))
            .collect();
        assert_eq!(on, (0..8).collect(), "8 NICs on the leaves r0..r7");
        let leaf = facts.leaf.as_ref().unwrap();
        let value = leaf.value.clone().unwrap();
        let out = facts.labels(&BTreeMap::new(), &BTreeSet::new());
        assert_eq!(out.write["fabric.topograph.run/tier-0"], value);
        assert!(
            out.notes
                .iter()
                .any(|n| n.starts_with("fabric.topograph.run/tier-0=leaf-x (")
                    && n.contains("not written")),
            "{:?}",
            out.notes
        );
        // No neighbour source: nothing read, the file's leaf is written.
        let plain = FactSources {
            rails: None,
            wiring: &WiringFlags::default(),
            ..from
        };
        let facts = read_facts("n1", &topo, plain).unwrap();
        assert!(facts.wiring.is_none() && facts.leaf.is_none());
        let out = facts.labels(&BTreeMap::new(), &BTreeSet::new());
        assert_eq!(out.write["fabric.topograph.run/tier-0"], "leaf-x");
        // A missing LLDP file names the flag's file.
        let bad = WiringFlags {
            lldp_from: Some("/nonexistent/lldp.json".into()),
            ..WiringFlags::default()
        };
        let e = read_facts(
            "n1",
            &topo,
            FactSources {
                wiring: &bad,
                ..from
            },
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("/nonexistent/lldp.json"), "{e}");
    }
}
