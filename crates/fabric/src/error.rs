//! Typed errors of a node's fabric facts. Each names the file and the field, and says
//! what was expected.

use thiserror::Error;

use crate::document::DocumentError;
use crate::domain_keys::KeyError;

/// Everything that can go wrong reading a rail file or a domain file, or resolving a
/// rail file against a node.
#[derive(Debug, Error)]
pub enum FabricError {
    /// The file is not YAML or JSON, or a field does not read.
    #[error(transparent)]
    Document(#[from] DocumentError),
    /// A field that reads but whose value cannot be used.
    #[error("{file}: {field}: {why}")]
    Field {
        /// The file.
        file: String,
        /// The field path.
        field: String,
        /// What is wrong and what was expected.
        why: String,
    },
    /// A domain label key that no known source writes.
    #[error("{file}: {field}: unknown domain label key {key:?}; known keys: {source}")]
    UnknownKey {
        /// The file.
        file: String,
        /// The field path.
        field: String,
        /// The key given.
        key: String,
        /// Why it is refused: the known keys (for the level, when one is given).
        #[source]
        source: KeyError,
    },
    /// A rail source that does not fit the node's NICs.
    #[error("{file}: {field}: {why}")]
    Rails {
        /// The rail source file.
        file: String,
        /// The field path (`nics.mlx5_0`, `rule`).
        field: String,
        /// What conflicts.
        why: String,
    },
}
