//! Typed errors: per-claim failures (with their gRPC status code) and serve-level ones.

use std::path::PathBuf;

use tonic::Code;
use topoalign_atomic::AtomicWriteError;
use topoalign_dra::{AllocationError, prepare::VendorCdiError};

use crate::claims::ClaimSourceError;

/// Why one claim could not be prepared or unprepared. [`ClaimError::code`] is the gRPC
/// status code the plugin answers with.
#[derive(Debug, thiserror::Error)]
pub enum ClaimError {
    /// The kubelet's request is malformed (empty or unsafe namespace, name or UID).
    #[error("claim {index} of the request: {what}")]
    BadRequest {
        /// Position of the claim in the request.
        index: usize,
        /// What is wrong and what was expected.
        what: String,
    },
    /// The kubelet's request carries a claim UID that is unsafe in a file name.
    #[error("claim {index} of the request: {source}")]
    BadUid {
        /// Position of the claim in the request.
        index: usize,
        /// What is wrong with the UID.
        #[source]
        source: UidError,
    },
    /// The claim could not be read from the API server.
    #[error("ResourceClaim {namespace}/{name} (uid {uid}): {source}")]
    Source {
        /// Namespace.
        namespace: String,
        /// Name.
        name: String,
        /// UID the kubelet asked for.
        uid: String,
        /// What the claim source said.
        #[source]
        source: ClaimSourceError,
    },
    /// The allocation names devices this node cannot give (foreign, unknown, taken).
    #[error("ResourceClaim {namespace}/{name} (uid {uid}): {source}")]
    Allocation {
        /// Namespace.
        namespace: String,
        /// Name.
        name: String,
        /// UID.
        uid: String,
        /// What the check found (boxed: it is large and rare).
        #[source]
        source: Box<AllocationError>,
    },
    /// The GPU vendor's CDI spec cannot be composed with (malformed, stale, ambiguous);
    /// nothing of the claim was written.
    #[error("ResourceClaim {namespace}/{name} (uid {uid}): {source}")]
    VendorCdi {
        /// Namespace.
        namespace: String,
        /// Name.
        name: String,
        /// UID.
        uid: String,
        /// What is wrong with the vendor's spec (boxed: large and rare).
        #[source]
        source: Box<VendorCdiError>,
    },
    /// Writing the CDI spec or the checkpoint failed (read-only directory, full disk, …);
    /// nothing of the claim was left behind.
    #[error("claim uid {uid}: {source}")]
    Write {
        /// UID.
        uid: String,
        /// The failed write, naming the file.
        #[source]
        source: AtomicWriteError,
    },
    /// Removing a CDI spec failed.
    #[error("claim uid {uid}: removing {}: {source}", path.display())]
    Remove {
        /// UID.
        uid: String,
        /// The file.
        path: PathBuf,
        /// The operating system's error.
        #[source]
        source: std::io::Error,
    },
    /// Dynamic MIG: an instance could not be created (nothing of the claim is left) or
    /// destroyed (the claim stays prepared; unprepare is retried).
    #[error("ResourceClaim {namespace}/{name} (uid {uid}): {source}")]
    Mig {
        /// Namespace.
        namespace: String,
        /// Name.
        name: String,
        /// UID.
        uid: String,
        /// The GPU, profile, placement, command and what it printed.
        #[source]
        source: Box<crate::mig_dynamic::MigToolError>,
    },
    /// Something that should not happen: a worker that died, a value that would not
    /// serialize.
    #[error("claim uid {uid}: internal error: {what}")]
    Internal {
        /// UID.
        uid: String,
        /// What happened.
        what: String,
    },
}

impl ClaimError {
    /// The gRPC status code for this failure.
    pub fn code(&self) -> Code {
        match self {
            ClaimError::BadRequest { .. } | ClaimError::BadUid { .. } => Code::InvalidArgument,
            ClaimError::Source { source, .. } => source.code(),
            ClaimError::Allocation { source, .. } => match **source {
                AllocationError::GpuTaken { .. }
                | AllocationError::NicExhausted { .. }
                | AllocationError::DeviceTaken { .. } => Code::ResourceExhausted,
                _ => Code::FailedPrecondition,
            },
            ClaimError::VendorCdi { .. } | ClaimError::Mig { .. } => Code::FailedPrecondition,
            ClaimError::Write { .. } | ClaimError::Remove { .. } | ClaimError::Internal { .. } => {
                Code::Internal
            }
        }
    }
}

/// Why the plugin could not start or keep serving.
#[derive(Debug, thiserror::Error)]
pub enum PluginError {
    /// A crash point name (`--crash-at`) that does not exist.
    #[error("unknown crash point {given:?}: expected one of {known}")]
    UnknownFaultPoint {
        /// The name given.
        given: String,
        /// The names there are.
        known: String,
    },
    /// A directory the plugin needs could not be created or read.
    #[error("{op} {}: {source}", path.display())]
    Io {
        /// What was being done.
        op: &'static str,
        /// The path.
        path: PathBuf,
        /// The operating system's error.
        #[source]
        source: std::io::Error,
    },
    /// The checkpoint exists but cannot be read as one.
    #[error("checkpoint {}: {what}", path.display())]
    Checkpoint {
        /// The checkpoint file.
        path: PathBuf,
        /// What is wrong, and what was expected.
        what: String,
    },
    /// Startup reconciliation could not rewrite a CDI spec or the checkpoint.
    #[error("reconciling: {0}")]
    Write(#[from] AtomicWriteError),
    /// A socket could not be bound.
    #[error("binding {}: {source}", path.display())]
    Bind {
        /// The socket path.
        path: PathBuf,
        /// The operating system's error.
        #[source]
        source: std::io::Error,
    },
    /// A gRPC server failed.
    #[error("serving {what}: {source}")]
    Serve {
        /// Which server.
        what: &'static str,
        /// tonic's error.
        #[source]
        source: tonic::transport::Error,
    },
}

/// Why a claim UID is refused as a file name part (Kubernetes UIDs are UUIDs).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UidError {
    /// The UID is empty.
    #[error("the uid is empty")]
    Empty,
    /// The UID has other characters than letters, digits and `-`, or is too long.
    #[error("uid {0:?} is not a Kubernetes UID (expected letters, digits and '-', at most 128)")]
    NotUid(String),
}
