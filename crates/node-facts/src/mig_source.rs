//! Where a node's MIG instances come from (`--mig-state DIR`, `--mig-from-host`,
//! `--mig-want MIX`, `--mig-dynamic`; with none, the geometry a built-in profile
//! carries), and their layout on the node's topology ([`NodeMig`]): what the driver
//! publishes, and what `discover`, `matrix`, `draw` and `profile show` lay over it.
//!
//! `--mig-state DIR` reads the saved outputs of this node's `nvidia-smi` (any may be
//! absent, at least one present): [`LIST_FILE`] (`nvidia-smi -L`), [`LGI_FILE`]
//! (`nvidia-smi mig -lgi`), [`LCI_FILE`] (`nvidia-smi mig -lci`), [`LGIPP_FILE`]
//! (`nvidia-smi mig -lgipp`). `--mig-want 1g.10gb=14,3g.40gb=2` places the instances as
//! `topoalign mig plan` would on the node's GPUs and publishes them as if they had been
//! created so (a node without hardware: `--profile dgx-h100`).

use std::path::{Path, PathBuf};

use topoalign_discover::sysfs::nvcaps::{MIG_MINORS, read_mig_minors};
use topoalign_dra::publish::NodeMig;
use topoalign_mig::{
    GeometryRequest, MigOutputs, Model, SavedOutput, plan, read_state, state_from_plan,
};
use topoalign_topology::{GpuVendor, Topology};

use topoalign_dra::publish::{MigGeometryError, MigJoinError};
use topoalign_mig::{GeometryError, GeometryPlanError, MixError, ReadError};

use crate::mig_modes::{ModeError, ModeSource, enabled};

/// `nvidia-smi -L` in a `--mig-state` directory.
pub(crate) const LIST_FILE: &str = "list.txt";
/// `nvidia-smi mig -lgi` in a `--mig-state` directory.
pub(crate) const LGI_FILE: &str = "lgi.txt";
/// `nvidia-smi mig -lci` in a `--mig-state` directory.
pub(crate) const LCI_FILE: &str = "lci.txt";
/// `nvidia-smi mig -lgipp` in a `--mig-state` directory.
pub(crate) const LGIPP_FILE: &str = "lgipp.txt";

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
    /// This host's live `nvidia-smi` (`crate::mig_live`).
    Host,
    /// Dynamic MIG (`--mig-dynamic`): every placement of the GPUs
    /// in MIG mode, as the mode source says.
    Dynamic(ModeSource),
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
    Plan(#[from] GeometryPlanError),
    /// Not everything fits.
    #[error("--mig-want: {0}")]
    Unplaced(String),
    /// A planned geometry that breaks the rules (a planner bug, reported not hidden).
    #[error("--mig-want: {0}")]
    Geometry(#[from] GeometryError),
    /// The state does not fit the topology.
    #[error(transparent)]
    Join(#[from] MigJoinError),
    /// The live tool could not be run or failed.
    #[error(transparent)]
    Live(#[from] crate::mig_live::LiveError),
    /// Dynamic MIG has no GPU to publish.
    #[error("--mig-dynamic: {0}")]
    Dynamic(String),
    /// The MIG geometry of a built-in profile does not publish.
    #[error("MIG geometry of profile `{profile}`: {source}")]
    Profile {
        /// The profile (the topology's name).
        profile: String,
        /// Why.
        #[source]
        source: MigGeometryError,
    },
    /// Which GPUs are in MIG mode cannot be told (boxed: the variant would size every
    /// error).
    #[error(transparent)]
    Modes(Box<ModeError>),
}

impl From<ModeError> for MigSourceError {
    fn from(e: ModeError) -> Self {
        MigSourceError::Modes(Box::new(e))
    }
}

impl MigSource {
    /// The node's MIG layout on `topo` and warnings about it: GPUs whose MIG mode
    /// change waits for a reset (`crate::mig_modes`, from `query.txt` in a state
    /// directory or the live `nvidia-smi -q`).
    pub fn layout_checked(
        &self,
        topo: &Topology,
    ) -> Result<(NodeMig, Vec<String>), MigSourceError> {
        if let MigSource::Dynamic(modes) = self {
            return dynamic_layout(topo, modes);
        }
        let mig = self.layout(topo)?;
        let warnings = match self {
            MigSource::State(dir) => crate::mig_modes::from_dir(dir)?,
            MigSource::Host => crate::mig_modes::from_tool(&topoalign_discover::program_from_env()),
            MigSource::None | MigSource::Want(_) | MigSource::Dynamic(_) => Vec::new(),
        };
        Ok((mig, warnings))
    }

    /// [`Self::layout_checked`], or, with no source ([`MigSource::None`]), the MIG
    /// geometry of the built-in profile `profile` where it carries one
    /// ([`NodeMig::from_geometry`]): what a node of that profile publishes.
    pub fn layout_on(
        &self,
        topo: &Topology,
        profile: Option<&str>,
    ) -> Result<(NodeMig, Vec<String>), MigSourceError> {
        match profile.and_then(topoalign_profiles::mig_geometry) {
            Some(geo) if *self == MigSource::None => {
                let mig = NodeMig::from_geometry(topo, geo.model, geo.gpus).map_err(|source| {
                    MigSourceError::Profile {
                        profile: topo.name.clone(),
                        source,
                    }
                })?;
                Ok((mig, Vec::new()))
            }
            _ => self.layout_checked(topo),
        }
    }

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
            MigSource::Host => live_layout(topo, None),
            MigSource::Dynamic(modes) => Ok(dynamic_layout(topo, modes)?.0),
            MigSource::Want(text) => {
                let model = node_model(topo).map_err(MigSourceError::Model)?;
                let gpus = nvidia_count(topo);
                let want = topoalign_mig::parse_mix(model, text)?;
                let p = plan(&GeometryRequest {
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

/// The node's MIG layout from the live tool (`program`, default `$TOPOALIGN_NVIDIA_SMI`
/// or `nvidia-smi`).
pub(crate) fn live_layout(
    topo: &Topology,
    program: Option<&str>,
) -> Result<NodeMig, MigSourceError> {
    let live = crate::mig_live::run_live(program)?;
    fn saved((name, text): &(String, String)) -> Option<SavedOutput<'_>> {
        Some(SavedOutput {
            name: name.as_str(),
            text: text.as_str(),
        })
    }
    let state = read_state(&MigOutputs {
        list: saved(&live.list),
        lgi: saved(&live.lgi),
        lci: saved(&live.lci),
        lgipp: None,
        model: node_model(topo).ok(),
    })?;
    Ok(NodeMig::join(topo, &state)?)
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
                topoalign_mig::known_models()
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

/// The dynamic layout of the node's GPUs in MIG mode, and warnings.
fn dynamic_layout(
    topo: &Topology,
    modes: &ModeSource,
) -> Result<(NodeMig, Vec<String>), MigSourceError> {
    match enabled(modes)? {
        None => Ok((NodeMig::dynamic(topo, None)?, Vec::new())),
        Some((on, warnings)) if on.is_empty() => Err(MigSourceError::Dynamic(format!(
            "no GPU is in MIG mode{}: enable it first (`nvidia-smi -i <gpu> -mig 1`)",
            if warnings.is_empty() {
                String::new()
            } else {
                format!(" ({})", warnings.join("; "))
            }
        ))),
        Some((on, warnings)) => Ok((NodeMig::dynamic(topo, Some(&on))?, warnings)),
    }
}

/// Gives every instance of `mig` with known GPU-instance (and compute-instance) IDs its
/// `/dev/nvidia-caps` access nodes, from the host's `mig-minors` table under `root` (the
/// GPU named by its parent's device minor). Returns warnings: one when the table cannot
/// be read (the instances keep their parent's nodes only), one per malformed line, and
/// one per instance the table lacks.
pub fn attach_caps(mig: &mut NodeMig, topo: &Topology, root: &Path) -> Vec<String> {
    let mut warnings = Vec::new();
    // Dynamic placements get their nodes when the plugin creates them.
    if mig.is_empty() || mig.gpus.iter().all(|g| g.dynamic) {
        return warnings;
    }
    let Some(table) = read_mig_minors(root, &mut warnings) else {
        return warnings;
    };
    let file = root.join(MIG_MINORS);
    for g in &mut mig.gpus {
        let minor = topo
            .gpus
            .iter()
            .find(|t| topo.pci.get(t.pci).is_some_and(|p| p.bdf == g.bdf))
            .and_then(|t| t.nvidia_minor);
        for i in &mut g.instances {
            let (Some(minor), Some(gi)) = (minor, i.gi) else {
                continue;
            };
            match table.instance_nodes(minor, gi, i.ci) {
                Some(nodes) => i.device_nodes = nodes,
                None => warnings.push(format!(
                    "{}: no access capability for GPU {} (gpu{minor}) instance gi{gi}{}: MIG instance {}@{} gets its parent's device nodes only",
                    file.display(),
                    g.bdf,
                    i.ci.map(|c| format!("/ci{c}")).unwrap_or_default(),
                    i.profile,
                    i.start
                )),
            }
        }
    }
    warnings
}

/// The directory of a `--mig-state` flag, as given.
#[cfg(test)]
pub(crate) fn state_dir(dir: &Path) -> MigSource {
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

    #[test]
    fn instances_get_their_caps_nodes_from_mig_minors() {
        let mut topo = topoalign_profiles::get("dgx-h100").unwrap();
        for (i, g) in topo.gpus.iter_mut().enumerate() {
            g.nvidia_minor = Some(u32::try_from(i).unwrap());
        }
        let mut mig = MigSource::Want("4g.40gb=1,3g.40gb=1".into())
            .layout(&topo)
            .unwrap();
        let root = std::env::temp_dir().join(format!("topoalign-nvcaps-{}", std::process::id()));
        // No table: one warning, parent's nodes only.
        let w = attach_caps(&mut mig, &topo, &root);
        assert_eq!(w.len(), 1, "{w:?}");
        assert!(
            mig.gpus[0]
                .instances
                .iter()
                .all(|i| i.device_nodes.is_empty())
        );
        let file = root.join(MIG_MINORS);
        std::fs::create_dir_all(file.parent().unwrap()).unwrap();
        let (gi0, gi1) = (
            mig.gpus[0].instances[0].gi.unwrap(),
            mig.gpus[0].instances[1].gi.unwrap(),
        );
        let mut table = String::from("config 1\nmonitor 2\n");
        table.push_str(&format!(
            "gpu0/gi{gi0}/access 30\ngpu0/gi{gi0}/ci0/access 31\n"
        ));
        table.push_str(&format!("gpu0/gi{gi1}/access 40\nbroken line here\n"));
        std::fs::write(&file, table).unwrap();
        let w = attach_caps(&mut mig, &topo, &root);
        std::fs::remove_dir_all(&root).unwrap();
        let inst = &mig.gpus[0].instances;
        assert_eq!(
            inst[0].device_nodes,
            [
                "/dev/nvidia-caps/nvidia-cap30",
                "/dev/nvidia-caps/nvidia-cap31"
            ]
        );
        // The second instance's compute-instance cap is missing: a warning, no nodes.
        assert!(inst[1].device_nodes.is_empty());
        assert_eq!(w.len(), 2, "{w:?}");
        assert!(w[0].contains("mig-minors line 6"), "{w:?}");
        assert!(w[1].contains(&format!("instance gi{gi1}/ci0")), "{w:?}");
    }

    /// A stand-in `nvidia-smi` that answers the three commands from `dir`'s files and
    /// insists on the real tool's arguments.
    fn fake_tool(dir: &Path, list: &str, lgi: &str, lci: &str, no_mig_exit: bool) -> String {
        use std::os::unix::fs::PermissionsExt;
        std::fs::write(dir.join("list.txt"), list).unwrap();
        std::fs::write(dir.join("lgi.txt"), lgi).unwrap();
        std::fs::write(dir.join("lci.txt"), lci).unwrap();
        let code = if no_mig_exit { 6 } else { 0 };
        let body = format!(
            "#!/bin/sh\ncase \"$*\" in\n  \"-L\") cat '{d}/list.txt' ;;\n  \"mig -lgi\") cat '{d}/lgi.txt'; exit {code} ;;\n  \"mig -lci\") cat '{d}/lci.txt'; exit {code} ;;\n  *) echo \"bad args $*\" >&2; exit 9 ;;\nesac\n",
            d = dir.display()
        );
        let path = dir.join("nvidia-smi");
        std::fs::write(&path, body).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        path.display().to_string()
    }

    #[test]
    fn the_live_tool_is_read_like_saved_outputs() {
        let topo = topoalign_profiles::get("dgx-h100").unwrap();
        let dir = std::env::temp_dir().join(format!("topoalign-mig-live-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let saved = Path::new(env!("CARGO_MANIFEST_DIR")).join("../mig/tests/data/h100-mixed");
        let mut list = std::fs::read_to_string(saved.join(LIST_FILE)).unwrap();
        // The saved GPUs become this node's first three.
        for (i, old) in [
            "GPU-3b1f6c2e-8d4a-4f7b-9e21-5c0d7a9b4e10",
            "GPU-4c207d3f-9e5b-4a8c-8f32-6d1e8b0c5f21",
            "GPU-5d318e40-af6c-4b9d-9043-7e2f9c1d6032",
        ]
        .iter()
        .enumerate()
        {
            list = list.replace(old, topo.gpus[i].uuid.as_deref().unwrap());
        }
        let lgi = std::fs::read_to_string(saved.join(LGI_FILE)).unwrap();
        let lci = std::fs::read_to_string(saved.join(LCI_FILE)).unwrap();
        let tool = fake_tool(&dir, &list, &lgi, &lci, false);
        let live = live_layout(&topo, Some(&tool)).unwrap();
        let from_files = {
            let d = dir.join("state");
            std::fs::create_dir_all(&d).unwrap();
            std::fs::write(d.join(LIST_FILE), &list).unwrap();
            std::fs::write(d.join(LGI_FILE), &lgi).unwrap();
            std::fs::write(d.join(LCI_FILE), &lci).unwrap();
            state_dir(&d).layout(&topo).unwrap()
        };
        assert!(!live.is_empty());
        assert_eq!(live, from_files);
        // A node without MIG: the tool says so with a non-zero exit; no instances.
        let gpus_only: String = list
            .lines()
            .filter(|l| l.starts_with("GPU"))
            .map(|l| format!("{l}\n"))
            .collect();
        let tool = fake_tool(
            &dir,
            &gpus_only,
            "No MIG-enabled devices found.\n",
            "No MIG-enabled devices found.\n",
            true,
        );
        assert!(live_layout(&topo, Some(&tool)).unwrap().is_empty());
        // Any other failure is an error naming the command and what it said.
        let tool = fake_tool(
            &dir,
            &list,
            "Failed to initialize NVML: Unknown Error\n",
            "",
            true,
        );
        let e = live_layout(&topo, Some(&tool)).unwrap_err().to_string();
        assert!(
            e.contains("mig -lgi` exited with") && e.contains("Failed to initialize NVML"),
            "{e}"
        );
        let e = live_layout(&topo, Some("/nonexistent/nvidia-smi"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("cannot run `/nonexistent/nvidia-smi`"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn the_gpus_in_mig_mode_publish_their_placements() {
        let topo = topoalign_profiles::get("dgx-h100").unwrap();
        let (all, w) = dynamic_layout(&topo, &ModeSource::All).unwrap();
        assert_eq!((all.gpus.len(), w.len()), (8, 0));
        let dir = std::env::temp_dir().join(format!("topoalign-mig-dyn-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let state = ModeSource::State(dir.clone());
        assert_eq!(
            dynamic_layout(&topo, &state).unwrap().0.gpus.len(),
            8,
            "no query.txt"
        );
        let gpu = |b: topoalign_topology::Bdf, cur: &str, pend: &str| {
            format!(
                "GPU 0000{}\n    MIG Mode\n        Current : {cur}\n        Pending : {pend}\n",
                b.to_string().to_uppercase()
            )
        };
        let (a, b) = (topo.gpu_bdf(0), topo.gpu_bdf(1));
        let text = format!(
            "{}{}",
            gpu(a, "Enabled", "Enabled"),
            gpu(b, "Disabled", "Enabled")
        );
        std::fs::write(dir.join("query.txt"), text).unwrap();
        let (mig, w) = dynamic_layout(&topo, &state).unwrap();
        assert_eq!(mig.gpus.iter().map(|g| g.bdf).collect::<Vec<_>>(), [a]);
        assert_eq!(w.len(), 1, "{w:?}");
        std::fs::write(dir.join("query.txt"), gpu(a, "Disabled", "Disabled")).unwrap();
        let e = dynamic_layout(&topo, &state)
            .map(|_| ())
            .unwrap_err()
            .to_string();
        assert!(e.contains("no GPU is in MIG mode"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
