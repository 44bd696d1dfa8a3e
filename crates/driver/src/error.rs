//! Typed errors of the node agent.

use std::net::SocketAddr;
use std::path::PathBuf;

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
    /// The rail source does not fit this node's NICs on a discovered topology (the
    /// message names the file and the field, as at start).
    #[error("--rails {0}")]
    Rails(#[from] topoalign_fabric::FabricError),
    /// `--rails`, `--fabric-from`, `--domains` or a neighbour source could not be read or
    /// does not fit (the message names the flag, the file and the field, as the
    /// device-plugin agent's do).
    #[error(transparent)]
    Facts(Box<topoalign_node_facts::FactsError>),
    /// The kubeconfig could not be read or used.
    #[error("kubeconfig {path}: {why}")]
    Kubeconfig {
        /// The file given with `--kubeconfig`.
        path: PathBuf,
        /// What went wrong (its text already carries the OS error: not chained again).
        why: kube::config::KubeconfigError,
    },
    /// No kubeconfig was given and none could be inferred (in-cluster or `KUBECONFIG`).
    #[error(
        "no cluster configuration: pass --kubeconfig FILE, set KUBECONFIG, or run in a pod ({0})"
    )]
    InferConfig(#[from] kube::config::InferConfigError),
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
        /// The address given with `--metrics-addr`.
        addr: SocketAddr,
        /// The OS error.
        source: std::io::Error,
    },
    /// The HTTP server failed while serving.
    #[error("serving /metrics and /healthz: {0}")]
    Serve(std::io::Error),
    /// The async runtime could not start.
    #[error("starting the async runtime: {0}")]
    Runtime(std::io::Error),
    /// Installing the signal handlers failed.
    #[error("installing the SIGTERM/SIGINT handlers: {0}")]
    Signal(std::io::Error),
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

/// The process kit's client errors, each in the driver's own words.
impl From<topoalign_probes::ClientError> for DriverError {
    fn from(e: topoalign_probes::ClientError) -> Self {
        use topoalign_probes::ClientError;
        match e {
            ClientError::Kubeconfig { path, source } => {
                DriverError::Kubeconfig { path, why: source }
            }
            ClientError::Infer(e) => DriverError::InferConfig(e),
            ClientError::Client(e) => DriverError::api("creating the API client", e),
        }
    }
}
