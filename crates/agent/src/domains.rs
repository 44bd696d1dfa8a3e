//! The node's place in the fabric, read once at start: its NVLink clique (from
//! `nvidia-smi -q`, run or saved: `--fabric-from`), the operator's domain file
//! (`--domains`) and each NIC's rail (`--rails`). The domain labels are written only
//! where no other tool labelled the level ([`topoalign_gang::domain_labels`]); the rails
//! go into the NodeResourceTopology object.

use std::collections::{BTreeMap, BTreeSet};
#[cfg(any(feature = "clap", test))]
use std::path::Path;
use std::path::PathBuf;

use serde::Serialize;
use serde_json::Value;
use topoalign_gang::{DomainInputs, DomainLabels, NicRails, domain_labels};
use topoalign_mig::NodeClique;
#[cfg(any(feature = "clap", test))]
use topoalign_mig::{SavedOutput, node_clique, read_query};

#[cfg(any(feature = "clap", test))]
/// The `--fabric-from` value that runs the tool instead of reading a file.
pub(crate) const RUN_TOOL: &str = "nvidia-smi";

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

#[cfg(any(feature = "clap", test))]
fn read(flag: &'static str, path: &Path) -> Result<String, FactsError> {
    std::fs::read_to_string(path).map_err(|source| FactsError::File {
        flag,
        path: path.to_path_buf(),
        source,
    })
}

#[cfg(any(feature = "clap", test))]
/// The clique from `--fabric-from`: `nvidia-smi` runs `<program> -q` (`program`:
/// `$TOPOALIGN_NVIDIA_SMI` or `nvidia-smi`), anything else is a saved output's path.
pub(crate) fn read_clique(from: &str, program: &str) -> Result<(NodeClique, String), FactsError> {
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

#[cfg(feature = "clap")]
/// The operator's labels for `node` from the domain file at `path`.
pub(crate) fn read_domains(
    path: &Path,
    node: &str,
) -> Result<(BTreeMap<String, String>, String), FactsError> {
    let name = path.display().to_string();
    let file = topoalign_gang::parse_domain_file(&read("--domains", path)?, &name)?;
    Ok((file.for_node(node), name))
}

#[cfg(feature = "clap")]
/// The rails of the NICs of `topo` from the rail source at `path`.
pub(crate) fn read_rails(
    path: &Path,
    topo: &topoalign_topology::Topology,
) -> Result<NicRails, FactsError> {
    let name = path.display().to_string();
    let src = topoalign_gang::parse_rail_source(&read("--rails", path)?, &name)?;
    Ok(topoalign_gang::nic_rails(topo, &src)?)
}

impl NodeFacts {
    /// The domain labels to write on a node whose labels are `existing`, of which this
    /// agent wrote `owned` before; with no facts, none.
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
}

/// The rails as the NodeResourceTopology annotation holds them: each physical NIC's PCI
/// address to its rail, and how they were found.
pub(crate) fn rails_json(rails: &NicRails) -> Value {
    #[derive(Serialize)]
    struct Rails<'a> {
        rails: u32,
        source: &'a str,
        nics: BTreeMap<String, u32>,
    }
    serde_json::to_value(Rails {
        rails: rails.rails,
        source: &rails.source,
        nics: rails
            .by_nic
            .iter()
            .map(|(b, r)| (b.to_string(), *r))
            .collect(),
    })
    .unwrap_or(Value::Null)
}

/// The keys among a Node's labels that `manager` owns, from its `managedFields`
/// (`fieldsV1` `f:metadata` → `f:labels` → `f:<key>`).
pub(crate) fn owned_labels(
    node: &k8s_openapi::api::core::v1::Node,
    manager: &str,
) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for entry in node.metadata.managed_fields.iter().flatten() {
        if entry.manager.as_deref() != Some(manager) {
            continue;
        }
        let Some(fields) = &entry.fields_v1 else {
            continue;
        };
        if let Some(labels) = fields
            .0
            .pointer("/f:metadata/f:labels")
            .and_then(Value::as_object)
        {
            out.extend(
                labels
                    .keys()
                    .filter_map(|k| k.strip_prefix("f:"))
                    .map(str::to_string),
            );
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::Node;

    #[test]
    fn owned_labels_come_from_the_managers_fields() {
        let node: Node = serde_json::from_value(serde_json::json!({
            "metadata": {
                "name": "n1",
                "labels": {"a.io/x": "1", "fabric.topograph.run/tier-0": "leaf-1"},
                "managedFields": [
                    {"manager": "topoalign-agent", "operation": "Apply", "fieldsType": "FieldsV1",
                     "fieldsV1": {"f:metadata": {"f:labels": {"f:fabric.topograph.run/tier-0": {}}}}},
                    {"manager": "kubelet", "operation": "Update", "fieldsType": "FieldsV1",
                     "fieldsV1": {"f:metadata": {"f:labels": {"f:a.io/x": {}}}}}
                ]
            }
        }))
        .unwrap();
        assert_eq!(
            owned_labels(&node, "topoalign-agent"),
            BTreeSet::from(["fabric.topograph.run/tier-0".to_string()])
        );
    }

    #[test]
    fn a_saved_query_gives_the_clique_and_bad_input_names_the_file() {
        let dir = std::env::temp_dir().join(format!("ta-facts-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let good = dir.join("q.txt");
        std::fs::write(
            &good,
            "Attached GPUs : 1\nGPU 00000008:01:00.0\n    Fabric\n        State : Completed\n        CliqueId : 3\n        ClusterUUID : abc\n",
        )
        .unwrap();
        let (c, name) = read_clique(good.to_str().unwrap(), "unused").unwrap();
        assert_eq!(c.value(), Some("abc.3"));
        assert_eq!(name, good.display().to_string());
        let cut = dir.join("cut.txt");
        std::fs::write(&cut, "Attached GPUs : 2\nGPU 00000008:01:00.0\n").unwrap();
        let e = read_clique(cut.to_str().unwrap(), "unused")
            .unwrap_err()
            .to_string();
        assert!(e.contains("cut.txt"), "{e}");
        let e = read_clique(dir.join("absent").to_str().unwrap(), "unused")
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
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
