//! Typed errors of the node agent.

use std::net::SocketAddr;

use thiserror::Error;

/// Everything that can stop the driver or fail one publishing round.
#[derive(Debug, Error)]
pub enum DriverError {
    /// Discovery of the node's topology failed.
    #[error("discovering the node topology: {0}")]
    Discover(#[from] topoalign_discover::DiscoverError),
    /// The topology could not be turned into DRA objects.
    #[error("building the node's ResourceSlices: {0}")]
    Dra(#[from] topoalign_dra::DraError),
    /// `--rails`, `--fabric-from`, `--domains` or a neighbour source could not be read or
    /// does not fit (the message names the flag, the file and the field, as the
    /// device-plugin agent's do).
    #[error(transparent)]
    Facts(Box<topoalign_node_facts::FactsError>),
    /// The node's MIG instances cannot be had (`--mig-state`, `--mig-from-host`,
    /// `--mig-want`, `--mig-dynamic`, a profile's geometry).
    #[error(transparent)]
    Mig(#[from] topoalign_node_facts::MigSourceError),
    /// A Kubernetes API call failed.
    #[error("{what}: {source}")]
    Api {
        /// The call, e.g. `applying ResourceSlice n1-gpu-topoalign-dev-devices-0`.
        what: String,
        /// The client error.
        source: kube::Error,
    },
    /// The metrics/health address could not be bound.
    #[error("listening on {addr} for /metrics and /healthz: {source}")]
    Listen {
        /// The address given with `--listen`.
        addr: SocketAddr,
        /// The OS error.
        source: std::io::Error,
    },
    /// The HTTP server failed while serving.
    #[error("serving /metrics and /healthz: {0}")]
    Serve(std::io::Error),
    /// The kubelet plugin failed.
    #[error("kubelet plugin: {0}")]
    Plugin(#[from] topoalign_kubelet_plugin::PluginError),
    /// Shutdown could not delete this node's slices in time.
    #[error("could not remove this node's ResourceSlices within {after:?}: {last}")]
    Removal {
        /// The time allowed (`--shutdown-timeout`).
        after: std::time::Duration,
        /// The last error.
        last: Box<DriverError>,
    },
    /// A background task panicked or was cancelled.
    #[error("driver task {task} ended unexpectedly: {source}")]
    Join {
        /// Which task.
        task: &'static str,
        /// What the runtime said.
        #[source]
        source: tokio::task::JoinError,
    },
    /// A background task ended on its own where it should not.
    #[error("driver task {task} ended unexpectedly: {why}")]
    Task {
        /// Which task.
        task: &'static str,
        /// Why.
        why: String,
    },
}

impl DriverError {
    /// Wraps a kube client error with the call it came from.
    pub fn api(what: impl Into<String>, source: kube::Error) -> Self {
        DriverError::Api {
            what: what.into(),
            source,
        }
    }
}

/// A fact that could not be read, boxed (the variant would size every error).
impl From<topoalign_node_facts::FactsError> for DriverError {
    fn from(e: topoalign_node_facts::FactsError) -> Self {
        DriverError::Facts(Box::new(e))
    }
}
