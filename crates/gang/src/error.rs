//! Typed errors of the gang model. Each names the file (or what stands for it) and the
//! field, and says what was expected.

use thiserror::Error;

use topoalign_fabric::{DocumentError, KeyError};

/// Everything that can go wrong reading a job description or a node list, or turning a
/// job into manifests.
#[derive(Debug, Error)]
pub enum GangError {
    /// A job or node file that cannot be read.
    #[error("reading {file}")]
    Read {
        /// The file.
        file: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
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
    /// `class` is not a PCIe class.
    #[error("{file}: class: {source}")]
    Class {
        /// The file.
        file: String,
        /// Why.
        #[source]
        source: topoalign_topology::ParseError,
    },
    /// `domain.level` is not a domain level.
    #[error("{file}: domain.level: {source}")]
    Level {
        /// The file.
        file: String,
        /// Why.
        #[source]
        source: topoalign_fabric::LevelError,
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
    /// The gang needs more nodes than any domain has.
    #[error(
        "gang {job:?} needs {needed} nodes ({pods} pods, {per_node} per node) in one {level} domain, but the largest ({largest}) has {largest_size} nodes"
    )]
    TooLarge {
        /// The job.
        job: String,
        /// Nodes the gang needs.
        needed: u32,
        /// Pods of the gang.
        pods: u32,
        /// Pods per node.
        per_node: u32,
        /// The domain level.
        level: String,
        /// The largest domain's name (label value).
        largest: String,
        /// Its size in nodes.
        largest_size: u32,
    },
    /// No node of the fleet carries a label for the domain level.
    #[error("{file}: no node carries a label for domain level {level} (looked for {keys})")]
    NoDomainLabel {
        /// The node list file.
        file: String,
        /// The level.
        level: String,
        /// The keys looked for.
        keys: String,
    },
    /// The claim could not be built.
    #[error("claim for job {job:?}: {source}")]
    Claim {
        /// The job.
        job: String,
        /// The DRA model's error.
        #[source]
        source: topoalign_dra::DraError,
    },
}
