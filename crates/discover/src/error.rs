//! Errors of discovery.

use std::path::PathBuf;

use thiserror::Error;

/// Why a topology could not be discovered.
#[derive(Debug, Error)]
pub enum DiscoverError {
    /// `--profile` named a profile that does not exist (the profiles crate's one message).
    #[error(transparent)]
    UnknownProfile(#[from] topoalign_profiles::UnknownProfile),
    /// A file could not be read.
    #[error("cannot read {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// Input did not have the expected shape.
    #[error("{path}:{line}: {message}")]
    Malformed {
        /// The file (or `<input>`).
        path: PathBuf,
        /// 1-based line number (0 when not tied to a line).
        line: usize,
        /// What was found and what was expected.
        message: String,
    },
    /// `--sysfs-root` names a directory that is not a sysfs tree.
    #[error(
        "{root} is not a sysfs tree: it has no sys/bus/pci/devices (expected `/` on a host, or a directory written by `topoalign profile write`)"
    )]
    NotSysfs {
        /// The directory given.
        root: PathBuf,
    },
    /// The resulting model broke an invariant.
    #[error("inconsistent topology: {0}")]
    Model(#[from] topoalign_topology::ModelError),
    /// Placeholder for sources not wired yet.
    #[error("source not supported yet: {0}")]
    Unsupported(String),
}
