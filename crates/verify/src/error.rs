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
    /// The sysfs tree could not be read.
    #[error(transparent)]
    Discover(#[from] topoalign_discover::DiscoverError),
}
