//! Errors of the KubeletConfiguration editor.

use std::path::PathBuf;

/// Why a KubeletConfiguration file could not be read, changed or written.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// `set` without a setting to change.
    #[error(
        "nothing to set: give --topology-manager-policy, --topology-manager-scope, --topology-manager-option, --cpu-manager-policy or --reserved-cpus"
    )]
    NothingToSet,
    /// The file could not be read or written.
    #[error("{action} {path}: {error}")]
    Io {
        /// What was being done (`reading`, `writing`, ...).
        action: &'static str,
        /// The file concerned.
        path: PathBuf,
        /// The operating system's error (shown in the message, not repeated as a cause).
        error: std::io::Error,
    },
    /// An atomic write failed (the target is left as it was, or holds the whole new text).
    #[error("{0}")]
    Write(topoalign_atomic::AtomicWriteError),
    /// The file is not valid JSON.
    #[error("{path}: not valid JSON (line {line}, column {column}): {message}")]
    Json {
        /// The file.
        path: PathBuf,
        /// 1-based line of the problem.
        line: usize,
        /// 1-based column of the problem.
        column: usize,
        /// The parser's message.
        message: String,
    },
    /// The file is not valid YAML.
    #[error("{path}: not valid YAML: {message}")]
    Yaml {
        /// The file.
        path: PathBuf,
        /// The parser's message (it names the line and column).
        message: String,
    },
    /// The file parses but is not a KubeletConfiguration.
    #[error("{path}: not a KubeletConfiguration: {why}")]
    NotKubeletConfig {
        /// The file.
        path: PathBuf,
        /// What is wrong (field and expected value).
        why: String,
    },
    /// The file's Topology Manager settings are ones the kubelet refuses.
    #[error("{path}: {why}")]
    TmSettings {
        /// The file.
        path: PathBuf,
        /// What the Topology Manager rejects.
        why: topoalign_kube_types::kubelet_settings::ConfigError,
    },
    /// A requested or resulting setting is invalid; nothing was written.
    #[error("{path}: refusing to write: {}", problems.join("; "))]
    Invalid {
        /// The file.
        path: PathBuf,
        /// Every problem found, each naming the field and what was expected.
        problems: Vec<String>,
    },
    /// The YAML layout is one this editor cannot change without losing comments or order.
    #[error("{path}: cannot edit this YAML safely: {why}")]
    UnsupportedLayout {
        /// The file.
        path: PathBuf,
        /// What makes it unsafe.
        why: String,
    },
    /// The edited text did not re-parse to the intended configuration (an internal check).
    #[error("{path}: the edited file did not verify, nothing written: {why}")]
    VerifyFailed {
        /// The file.
        path: PathBuf,
        /// The difference found.
        why: String,
    },
    /// No backup exists to roll back to.
    #[error("no backup {pattern} found")]
    NoBackup {
        /// The backup name pattern searched.
        pattern: String,
    },
    /// The newest backup is the copy a rollback made of the file it replaced: restoring it
    /// would undo that rollback.
    #[error(
        "the newest backup {} is the copy the last rollback made of the file it replaced; restoring it would undo that rollback. Pass --backup {} (or --force) to restore it anyway{}",
        backup.display(), backup.display(),
        older.as_ref().map(|o| format!(", or --backup {} for the one before", o.display())).unwrap_or_default()
    )]
    WouldUndoRollback {
        /// The pre-rollback backup.
        backup: PathBuf,
        /// The newest backup made by `set`, when there is one.
        older: Option<PathBuf>,
    },
}

impl ConfigError {
    /// Builds an [`ConfigError::Io`].
    pub fn io(action: &'static str, path: &std::path::Path, source: std::io::Error) -> Self {
        ConfigError::Io {
            action,
            path: path.to_path_buf(),
            error: source,
        }
    }
}

impl From<topoalign_atomic::AtomicWriteError> for ConfigError {
    fn from(e: topoalign_atomic::AtomicWriteError) -> Self {
        ConfigError::Write(e)
    }
}
