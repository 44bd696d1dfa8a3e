//! Errors of verification.

use thiserror::Error;

/// Why the visible devices could not be worked out.
#[derive(Debug, Error)]
pub enum VerifyError {
    /// An environment variable had a value that is not what its producer writes.
    #[error("environment variable {var}=`{value}`: {why}")]
    Env {
        /// The variable name.
        var: String,
        /// Its value (shortened).
        value: String,
        /// What was expected.
        why: String,
    },
    /// The device directory does not exist (or is not a directory): nothing can be visible.
    #[error("--dev-root {}: {why}; expected the directory holding the pod's device nodes (usually /dev)", path.display())]
    DevRoot {
        /// The directory given.
        path: std::path::PathBuf,
        /// What is wrong with it.
        why: String,
    },
    /// The sysfs tree could not be read.
    #[error(transparent)]
    Discover(#[from] topoalign_discover::DiscoverError),
}
