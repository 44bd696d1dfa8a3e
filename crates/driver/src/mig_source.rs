//! Where the driver's MIG instances come from (`--mig-state DIR`, `--mig-want MIX`), and
//! their layout on the node's topology ([`NodeMig`]).
//!
//! `--mig-state DIR` reads the saved outputs of this node's `nvidia-smi` (any may be
//! absent, at least one present): [`LIST_FILE`] (`nvidia-smi -L`), [`LGI_FILE`]
//! (`nvidia-smi mig -lgi`), [`LCI_FILE`] (`nvidia-smi mig -lci`), [`LGIPP_FILE`]
//! (`nvidia-smi mig -lgipp`). `--mig-want 1g.10gb=14,3g.40gb=2` places the instances as
//! `topoalign mig plan` would on the node's GPUs and publishes them as if they had been
//! created so (a node without hardware: `--profile dgx-h100`).

use std::path::{Path, PathBuf};

use topoalign_dra::{MigJoinError, NodeMig};
use topoalign_mig::{
    GeometryError, MigOutputs, MixError, Model, PlanError, ReadError, Request, SavedOutput, plan,
    read_state, state_from_plan,
};
use topoalign_topology::{GpuVendor, Topology};

/// `nvidia-smi -L` in a `--mig-state` directory.
pub const LIST_FILE: &str = "list.txt";
/// `nvidia-smi mig -lgi` in a `--mig-state` directory.
pub const LGI_FILE: &str = "lgi.txt";
/// `nvidia-smi mig -lci` in a `--mig-state` directory.
pub const LCI_FILE: &str = "lci.txt";
/// `nvidia-smi mig -lgipp` in a `--mig-state` directory.
pub const LGIPP_FILE: &str = "lgipp.txt";

/// Where the MIG instances come from.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum MigSource {
    /// No MIG.
    #[default]
    None,
    /// Saved `nvidia-smi` outputs in a directory.
    State(PathBuf),
    /// A `PROFILE=COUNT,…` mix placed by the planner.
    Want(String),
}

/// Why the MIG instances cannot be had.
#[derive(Debug, thiserror::Error)]
pub enum MigSourceError {
    /// A saved output could not be read.
    #[error("--mig-state: reading {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// The directory holds none of the outputs.
    #[error(
        "--mig-state {dir}: none of {LIST_FILE}, {LGI_FILE}, {LCI_FILE}, {LGIPP_FILE} is there: expected at least {LGI_FILE}"
    )]
    Empty {
        /// The directory.
        dir: PathBuf,
    },
    /// A saved output that does not read.
    #[error("--mig-state: {0}")]
    Read(#[from] ReadError),
    /// The node's GPUs have no single MIG model.
    #[error("--mig-want: {0}")]
    Model(String),
    /// The mix does not parse.
    #[error("--mig-want: {0}")]
    Mix(#[from] MixError),
    /// The planner refused the request.
    #[error("--mig-want: {0}")]
    Plan(#[from] PlanError),
    /// Not everything fits.
    #[error("--mig-want: {0}")]
    Unplaced(String),
    /// A planned geometry that breaks the rules (a planner bug, reported not hidden).
    #[error("--mig-want: {0}")]
    Geometry(#[from] GeometryError),
    /// The state does not fit the topology.
    #[error(transparent)]
    Join(#[from] MigJoinError),
}

impl MigSource {
    /// The node's MIG layout on `topo`.
    pub fn layout(&self, topo: &Topology) -> Result<NodeMig, MigSourceError> {
        match self {
            MigSource::None => Ok(NodeMig::default()),
            MigSource::State(dir) => {
                let read = |f: &str| -> Result<Option<(String, String)>, MigSourceError> {
                    let path = dir.join(f);
                    match std::fs::read_to_string(&path) {
                        Ok(text) => Ok(Some((path.display().to_string(), text))),
                        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
                        Err(source) => Err(MigSourceError::Io { path, source }),
                    }
                };
                let files = [
                    read(LIST_FILE)?,
                    read(LGI_FILE)?,
                    read(LCI_FILE)?,
                    read(LGIPP_FILE)?,
                ];
                if files.iter().all(Option::is_none) {
                    return Err(MigSourceError::Empty { dir: dir.clone() });
                }
                let saved = |i: usize| {
                    files[i].as_ref().map(|(name, text)| SavedOutput {
                        name: name.as_str(),
                        text: text.as_str(),
                    })
                };
                let state = read_state(&MigOutputs {
                    list: saved(0),
                    lgi: saved(1),
                    lci: saved(2),
                    lgipp: saved(3),
                    model: node_model(topo).ok(),
                })?;
                Ok(NodeMig::join(topo, &state)?)
            }
            MigSource::Want(text) => {
                let model = node_model(topo).map_err(MigSourceError::Model)?;
                let gpus = nvidia_count(topo);
                let want = topoalign_mig::parse_mix(model, text)?;
                let p = plan(&Request {
                    model,
                    gpus,
                    nodes: None,
                    want,
                })?;
                if !p.complete() {
                    return Err(MigSourceError::Unplaced(format!(
                        "not everything fits on this node's {gpus} {} GPUs: {}",
                        model.name,
                        p.reasons.join("; ")
                    )));
                }
                Ok(NodeMig::join(topo, &state_from_plan(&p)?)?)
            }
        }
    }
}

fn nvidia_count(topo: &Topology) -> u32 {
    let n = topo
        .gpus
        .iter()
        .filter(|g| g.vendor == GpuVendor::Nvidia)
        .count();
    u32::try_from(n).unwrap_or(u32::MAX)
}

/// The one MIG model of the node's NVIDIA GPUs, or why there is none.
fn node_model(topo: &Topology) -> Result<&'static Model, String> {
    let mut found: Option<&'static Model> = None;
    for g in topo.gpus.iter().filter(|g| g.vendor == GpuVendor::Nvidia) {
        let name = g.model.as_deref().unwrap_or("an unnamed GPU");
        let m = topoalign_mig::model_for_name(name).ok_or_else(|| {
            format!(
                "the node's GPU model {name:?} has no MIG profile table: expected one of {}",
                topoalign_mig::model::known_models()
            )
        })?;
        match found {
            Some(f) if f.name != m.name => {
                return Err(format!(
                    "the node mixes GPU models {} and {}: expected one",
                    f.name, m.name
                ));
            }
            _ => found = Some(m),
        }
    }
    found.ok_or_else(|| "the node has no NVIDIA GPU".to_string())
}

/// The directory of a `--mig-state` flag, as given.
pub fn state_dir(dir: &Path) -> MigSource {
    MigSource::State(dir.to_path_buf())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn a_wanted_mix_is_planned_on_the_node() {
        let topo = topoalign_profiles::get("dgx-h100").unwrap();
        let mig = MigSource::Want("1g.10gb=14,3g.40gb=2".into())
            .layout(&topo)
            .unwrap();
        let instances: usize = mig.gpus.iter().map(|g| g.instances.len()).sum();
        assert_eq!(instances, 16);
        let e = MigSource::Want("1g.10gb=57".into())
            .layout(&topo)
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("--mig-want: not everything fits"), "{e}");
        let e = MigSource::Want("1g.5gb=1".into())
            .layout(&topo)
            .unwrap_err()
            .to_string();
        assert!(e.contains("1g.5gb"), "{e}");
        let l40s = topoalign_profiles::get("pcie-2socket").unwrap();
        let e = MigSource::Want("1g.10gb=1".into())
            .layout(&l40s)
            .unwrap_err()
            .to_string();
        assert!(e.contains("no MIG profile table"), "{e}");
    }

    #[test]
    fn a_state_directory_is_read_and_joined() {
        let topo = topoalign_profiles::get("dgx-h100").unwrap();
        let dir = std::env::temp_dir().join(format!("topoalign-mig-state-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let e = state_dir(&dir).layout(&topo).unwrap_err().to_string();
        assert!(e.contains("expected at least lgi.txt"), "{e}");
        let lgi = "\
+-------------------------------------------------------+
| GPU instances:                                        |
| GPU   Name             Profile  Instance   Placement  |
|                          ID       ID       Start:Size |
|=======================================================|
|   1  MIG 3g.40gb          9        2          4:4     |
+-------------------------------------------------------+
|   1  MIG 4g.40gb          5        1          0:4     |
+-------------------------------------------------------+
";
        std::fs::write(dir.join(LGI_FILE), lgi).unwrap();
        let mig = state_dir(&dir).layout(&topo).unwrap();
        assert_eq!(mig.gpus.len(), 1);
        assert_eq!(
            mig.gpus[0].bdf,
            topo.gpu_bdf(1),
            "index 1 = second GPU by address"
        );
        assert_eq!(mig.gpus[0].instances.len(), 2);
        std::fs::write(dir.join(LGI_FILE), lgi.replace("   1  MIG", "   9  MIG")).unwrap();
        let e = state_dir(&dir).layout(&topo).unwrap_err().to_string();
        assert!(e.contains("GPU index 9 is not in the topology"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
        // The mig crate's saved H100 outputs name GPUs by UUIDs this node lacks.
        let saved = Path::new(env!("CARGO_MANIFEST_DIR")).join("../mig/tests/data/h100-mixed");
        let e = state_dir(&saved).layout(&topo).unwrap_err().to_string();
        assert!(
            e.contains("is not in the topology: expected one of its GPU UUIDs"),
            "{e}"
        );
    }
}
