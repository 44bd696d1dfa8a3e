//! The GPUs' MIG mode, from `nvidia-smi -q` (`query.txt` in a `--mig-state` directory,
//! or the live tool with `--mig-from-host`): which GPUs are in MIG mode (dynamic MIG
//! publishes their placements), and pending mode changes: a GPU whose pending mode
//! differs from its current one needs a GPU reset or a reboot before the change takes
//! effect, and until then it publishes as its current mode says.

use std::path::{Path, PathBuf};

use topoalign_discover::{ToolError, run_checked};
use topoalign_mig::ReadError;
use topoalign_mig::SavedOutput;
use topoalign_mig::{MigMode, QueryGpu, read_query};
use topoalign_topology::Bdf;

use crate::mig_live::LiveError;

/// Why the GPUs' MIG mode cannot be told (dynamic MIG publishes the GPUs in MIG mode).
#[derive(Debug, thiserror::Error)]
pub enum ModeError {
    /// `query.txt` of a `--mig-state` directory could not be read.
    #[error("--mig-state: reading {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// The live `nvidia-smi -q` could not be run or failed.
    #[error(transparent)]
    Live(#[from] LiveError),
    /// The `nvidia-smi -q` output does not read.
    #[error("--mig-state: {0}")]
    Read(#[from] ReadError),
    /// A GPU's address in the output is not a PCI address.
    #[error("--mig-dynamic: {file}:{line}: GPU address {bus_id:?} is not a PCI address ({source})")]
    BusId {
        /// The output read.
        file: String,
        /// Its line.
        line: usize,
        /// The address as written.
        bus_id: String,
        /// The parser's complaint.
        #[source]
        source: topoalign_topology::ParseError,
    },
}

/// `nvidia-smi -q` in a `--mig-state` directory (optional).
pub(crate) const QUERY_FILE: &str = "query.txt";

fn mode(m: MigMode) -> &'static str {
    match m {
        MigMode::Enabled => "Enabled",
        MigMode::Disabled => "Disabled",
        MigMode::NotAvailable => "N/A",
    }
}

/// One warning per GPU whose pending MIG mode differs from its current one.
pub(crate) fn mode_warnings(gpus: &[QueryGpu], input: &str) -> Vec<String> {
    gpus.iter()
        .filter(|g| g.mig_change_pending())
        .filter_map(|g| {
            let (c, p) = (g.mig_current?, g.mig_pending?);
            Some(format!(
                "{input}:{}: GPU {}: MIG mode is {} but {} is pending: reset the GPU (`nvidia-smi -r -i {}`) or reboot the node before its MIG devices change; until then it is published as {}",
                g.line,
                g.bus_id,
                mode(c),
                mode(p),
                g.bus_id,
                mode(c)
            ))
        })
        .collect()
}

/// The warnings of a saved `query.txt` in `dir`, none when it is absent; a file that
/// does not read is an error naming it and the line.
pub(crate) fn from_dir(dir: &Path) -> Result<Vec<String>, ReadError> {
    let path = dir.join(QUERY_FILE);
    let Ok(text) = std::fs::read_to_string(&path) else {
        return Ok(Vec::new());
    };
    let name = path.display().to_string();
    let gpus = read_query(SavedOutput::new(&name, &text))?;
    Ok(mode_warnings(&gpus, &name))
}

/// The warnings of the live `<program> -q`; a tool that fails or output that does not
/// read is one warning (the MIG state itself came from the other commands).
pub(crate) fn from_tool(program: &str) -> Vec<String> {
    let name = format!("`{program} -q`");
    let text = match run_checked(program, &["-q"]) {
        Ok(text) => text,
        Err(why) => return vec![format!("{why}: pending MIG mode changes not checked")],
    };
    match read_query(SavedOutput::new(&name, &text)) {
        Ok(gpus) => mode_warnings(&gpus, &name),
        Err(e) => vec![format!("{e}: pending MIG mode changes not checked")],
    }
}

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
pub(crate) fn enabled(modes: &ModeSource) -> Result<Option<Enabled>, ModeError> {
    let (name, text) = match modes {
        ModeSource::All => return Ok(None),
        ModeSource::State(dir) => {
            let path = dir.join(QUERY_FILE);
            match std::fs::read_to_string(&path) {
                Ok(text) => (path.display().to_string(), text),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
                Err(source) => return Err(ModeError::Io { path, source }),
            }
        }
        ModeSource::Host => {
            let program = topoalign_discover::program_from_env();
            let shown = format!("`{program} -q`");
            let text = run_checked(&program, &["-q"]).map_err(|e| match e {
                failed @ ToolError::Failed { .. } => {
                    LiveError::Failed(format!("{failed}: cannot tell which GPUs are in MIG mode"))
                }
                other => LiveError::Tool(other),
            })?;
            (shown, text)
        }
    };
    let gpus = read_query(SavedOutput::new(&name, &text))?;
    let warnings = mode_warnings(&gpus, &name);
    let mut on = Vec::new();
    for g in gpus
        .iter()
        .filter(|g| g.mig_current == Some(MigMode::Enabled))
    {
        on.push(bus_id(g, &name)?);
    }
    Ok(Some((on, warnings)))
}

fn bus_id(g: &QueryGpu, name: &str) -> Result<Bdf, ModeError> {
    g.bus_id.parse().map_err(|source| ModeError::BusId {
        file: name.to_string(),
        line: g.line,
        bus_id: g.bus_id.clone(),
        source,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pending_change_is_one_warning_per_gpu() {
        let text = "Attached GPUs : 2\nGPU 00000000:1B:00.0\n    MIG Mode\n        Current : Disabled\n        Pending : Enabled\nGPU 00000000:43:00.0\n    MIG Mode\n        Current : Enabled\n        Pending : Enabled\n";
        let dir = std::env::temp_dir().join(format!("topoalign-mig-mode-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap_or_default();
        assert_eq!(from_dir(&dir).ok(), Some(Vec::new()), "no query.txt");
        std::fs::write(dir.join(QUERY_FILE), text).unwrap_or_default();
        let w = from_dir(&dir).unwrap_or_default();
        assert_eq!(w.len(), 1, "{w:?}");
        assert!(
            w[0].contains(
                "query.txt:2: GPU 00000000:1B:00.0: MIG mode is Disabled but Enabled is pending"
            ),
            "{w:?}"
        );
        std::fs::write(dir.join(QUERY_FILE), "GPU 00000000:1B:00.0\n    MIG Mode\n")
            .unwrap_or_default();
        let e = from_dir(&dir).map(|_| ()).unwrap_err().to_string();
        assert!(e.contains("MIG Mode"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap_or_default();
        let w = from_tool("/nonexistent/nvidia-smi");
        assert_eq!(w.len(), 1);
        assert!(
            w[0].contains("cannot run") && w[0].contains("not checked"),
            "{w:?}"
        );
    }
}
