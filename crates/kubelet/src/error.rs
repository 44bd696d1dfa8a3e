//! Errors of the KubeletConfiguration editor.

use std::path::PathBuf;

/// Why a KubeletConfiguration file could not be read, changed or written.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file could not be read or written.
    #[error("{action} {path}: {source}")]
    Io {
        /// What was being done (`reading`, `writing`, ...).
        action: &'static str,
        /// The file concerned.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
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
}

impl ConfigError {
    /// Builds an [`ConfigError::Io`].
    pub fn io(action: &'static str, path: &std::path::Path, source: std::io::Error) -> Self {
        ConfigError::Io {
            action,
            path: path.to_path_buf(),
            source,
        }
    }
}
