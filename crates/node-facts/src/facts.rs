//! The node's place in the fabric, read once at start: its NVLink clique (from
//! `nvidia-smi -q`, run or saved: `--fabric-from`), the operator's domain file
//! (`--domains`) and each NIC's rail (`--rails`). The domain labels are written only
//! where no other tool labelled the level ([`topoalign_gang::domain_labels`]).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use topoalign_gang::{DomainInputs, DomainLabels, NicRails, domain_labels};
use topoalign_mig::{NodeClique, SavedOutput, node_clique, read_query};

/// The `--fabric-from` value that runs the tool instead of reading a file.
pub const RUN_TOOL: &str = "nvidia-smi";

/// What the node says about its place in the fabric.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NodeFacts {
    /// The clique the GPUs report, and where it was read; `None` without `--fabric-from`.
    pub clique: Option<(NodeClique, String)>,
    /// The operator's domain labels for this node, and the file's name.
    pub operator: Option<(BTreeMap<String, String>, String)>,
    /// Each physical NIC's rail, when a rail source is given.
    pub rails: Option<NicRails>,
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
    /// The domain file or the rail source is malformed or does not fit the node.
    #[error(transparent)]
    Gang(#[from] topoalign_gang::GangError),
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
    let file = topoalign_gang::parse_domain_file(&read("--domains", path)?, &name)?;
    Ok((file.for_node(node), name))
}

/// The rails of the NICs of `topo` from the rail source at `path` (`--rails`).
pub fn read_rails(
    path: &Path,
    topo: &topoalign_topology::Topology,
) -> Result<NicRails, FactsError> {
    let name = path.display().to_string();
    let src = topoalign_gang::parse_rail_source(&read("--rails", path)?, &name)?;
    Ok(topoalign_gang::nic_rails(topo, &src)?)
}

impl NodeFacts {
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
        let mut out = domain_labels(
            DomainInputs {
                existing,
                owned,
                clique,
                operator,
            },
            file,
        );
        if let Some((c, source)) = &self.clique
            && let Some(why) = c.why_none()
        {
            out.notes
                .push(format!("no NVLink clique from {source}: {why}"));
        }
        out
    }

    /// Whether any domain fact was given (`--fabric-from` or `--domains`).
    pub fn has_domains(&self) -> bool {
        self.clique.is_some() || self.operator.is_some()
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
            rails: None,
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
}
