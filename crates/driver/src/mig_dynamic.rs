//! `--mig-dynamic`: which GPUs publish every MIG placement (`topoalign_dra`'s
//! [`NodeMig::dynamic`]), the kubelet plugin creating the instance at prepare.
//!
//! The GPUs in MIG mode, as `nvidia-smi -q` says (`query.txt` of a `--mig-state`
//! directory, or the live tool with `--mig-from-host`); without either, every NVIDIA
//! GPU whose model has a MIG profile table (a node without hardware: `--profile`).

use std::path::PathBuf;

use topoalign_discover::{ToolError, run_checked};
use topoalign_dra::NodeMig;
use topoalign_mig::{MigMode, QueryGpu, SavedOutput, read_query};
use topoalign_topology::{Bdf, Topology};

use crate::mig_source::MigSourceError;

/// Where the GPUs' MIG mode comes from.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum ModeSource {
    /// Not known: every GPU with a MIG profile table.
    #[default]
    All,
    /// `query.txt` in a `--mig-state` directory (every GPU when it is absent).
    State(PathBuf),
    /// The live `nvidia-smi -q` (`$TOPOALIGN_NVIDIA_SMI`).
    Host,
}

/// The GPUs whose current MIG mode is enabled, and the pending-change warnings.
type Enabled = (Vec<Bdf>, Vec<String>);

/// The GPUs in MIG mode; `None` when the source does not say.
fn enabled(modes: &ModeSource) -> Result<Option<Enabled>, MigSourceError> {
    let (name, text) = match modes {
        ModeSource::All => return Ok(None),
        ModeSource::State(dir) => {
            let path = dir.join(crate::mig_mode::QUERY_FILE);
            match std::fs::read_to_string(&path) {
                Ok(text) => (path.display().to_string(), text),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
                Err(source) => return Err(MigSourceError::Io { path, source }),
            }
        }
        ModeSource::Host => {
            let program = topoalign_discover::program_from_env();
            let shown = format!("`{program} -q`");
            let text = run_checked(&program, &["-q"]).map_err(|e| match e {
                failed @ ToolError::Failed { .. } => crate::mig_live::LiveError::Failed(format!(
                    "{failed}: cannot tell which GPUs are in MIG mode"
                )),
                other => crate::mig_live::LiveError::Tool(other),
            })?;
            (shown, text)
        }
    };
    let gpus = read_query(SavedOutput::new(&name, &text))?;
    let warnings = crate::mig_mode::mode_warnings(&gpus, &name);
    let mut on = Vec::new();
    for g in gpus
        .iter()
        .filter(|g| g.mig_current == Some(MigMode::Enabled))
    {
        on.push(bus_id(g, &name)?);
    }
    Ok(Some((on, warnings)))
}

fn bus_id(g: &QueryGpu, name: &str) -> Result<Bdf, MigSourceError> {
    g.bus_id.parse().map_err(|e| {
        MigSourceError::Dynamic(format!(
            "{name}:{}: GPU address {:?} is not a PCI address ({e})",
            g.line, g.bus_id
        ))
    })
}

/// The dynamic layout of the node's GPUs in MIG mode, and warnings.
pub(crate) fn layout(
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

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn the_gpus_in_mig_mode_publish_their_placements() {
        let topo = topoalign_profiles::get("dgx-h100").unwrap();
        let (all, w) = layout(&topo, &ModeSource::All).unwrap();
        assert_eq!((all.gpus.len(), w.len()), (8, 0));
        let dir = std::env::temp_dir().join(format!("topoalign-mig-dyn-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let state = ModeSource::State(dir.clone());
        assert_eq!(
            layout(&topo, &state).unwrap().0.gpus.len(),
            8,
            "no query.txt"
        );
        let gpu = |b: Bdf, cur: &str, pend: &str| {
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
        let (mig, w) = layout(&topo, &state).unwrap();
        assert_eq!(mig.gpus.iter().map(|g| g.bdf).collect::<Vec<_>>(), [a]);
        assert_eq!(w.len(), 1, "{w:?}");
        std::fs::write(dir.join("query.txt"), gpu(a, "Disabled", "Disabled")).unwrap();
        let e = layout(&topo, &state).map(|_| ()).unwrap_err().to_string();
        assert!(e.contains("no GPU is in MIG mode"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
