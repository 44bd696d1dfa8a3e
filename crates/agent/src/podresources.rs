//! The pod-resources gRPC client: `GetAllocatableResources` and `List` on the kubelet's
//! unix socket (default [`DEFAULT_SOCKET`]).

use std::path::{Path, PathBuf};
use std::time::Duration;

use hyper_util::rt::TokioIo;
use tonic::transport::{Channel, Endpoint, Uri};

/// Generated from `proto/podresources.proto` (package `v1`).
#[allow(missing_docs, clippy::all)]
pub mod v1 {
    tonic::include_proto!("v1");
}

use v1::pod_resources_lister_client::PodResourcesListerClient;

/// The kubelet's pod-resources socket.
#[cfg(feature = "clap")]
pub(crate) const DEFAULT_SOCKET: &str = "/var/lib/kubelet/pod-resources/kubelet.sock";

/// Why the kubelet could not be read.
#[derive(Debug, thiserror::Error)]
pub enum PodResourcesError {
    /// Nothing at the socket path.
    #[error(
        "kubelet pod-resources socket {path}: no such file (is the kubelet running, and its pod-resources directory mounted into this pod?)"
    )]
    Missing {
        /// The path.
        path: PathBuf,
    },
    /// Something else than a socket at the path.
    #[error("kubelet pod-resources socket {path}: {what}, not a socket (check --socket)")]
    NotASocket {
        /// The path.
        path: PathBuf,
        /// What is there (`a regular file`, `a directory` …).
        what: &'static str,
    },
    /// The path cannot be looked at.
    #[error("kubelet pod-resources socket {path}: {source}")]
    Inspect {
        /// The path.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The socket could not be reached.
    #[error("connecting to the kubelet pod-resources socket {path}: {source}")]
    Connect {
        /// The socket.
        path: PathBuf,
        /// The error.
        source: tonic::transport::Error,
    },
    /// A call failed.
    #[error("pod-resources {call} on {path}: {status}")]
    Call {
        /// `List` or `GetAllocatableResources`.
        call: &'static str,
        /// The socket.
        path: PathBuf,
        /// The gRPC status.
        status: Box<tonic::Status>,
    },
}

/// One device group: a resource's device IDs with their NUMA nodes.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Devices {
    /// Extended resource name (`amd.com/gpu`).
    pub resource: String,
    /// Device IDs.
    pub ids: Vec<String>,
    /// NUMA node ids of these devices (empty: no topology).
    pub numa: Vec<i64>,
}

/// One pod's exclusive resources.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PodDevices {
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
    /// Devices over all its containers.
    pub devices: Vec<Devices>,
    /// Exclusive CPUs over all its containers.
    pub cpus: Vec<i64>,
}

/// What the kubelet reported at one moment.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct KubeletView {
    /// `GetAllocatableResources`: every device the kubelet can hand out.
    pub allocatable: Vec<Devices>,
    /// `GetAllocatableResources`: CPUs the kubelet can hand out exclusively.
    pub allocatable_cpus: Vec<i64>,
    /// `List`: pods and what they hold.
    pub pods: Vec<PodDevices>,
}

fn devices(d: v1::ContainerDevices) -> Devices {
    Devices {
        resource: d.resource_name,
        ids: d.device_ids,
        numa: d
            .topology
            .map(|t| t.nodes.into_iter().map(|n| n.id).collect())
            .unwrap_or_default(),
    }
}

/// Checks that `path` is a socket, saying what it is otherwise (a gRPC dial of a
/// regular file only says "connection refused").
pub(crate) async fn check_socket(path: &Path) -> Result<(), PodResourcesError> {
    let meta = match tokio::fs::metadata(path).await {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(PodResourcesError::Missing {
                path: path.to_path_buf(),
            });
        }
        Err(source) => {
            return Err(PodResourcesError::Inspect {
                path: path.to_path_buf(),
                source,
            });
        }
    };
    let kind = meta.file_type();
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        if kind.is_socket() {
            return Ok(());
        }
        let what = if kind.is_file() {
            "a regular file"
        } else if kind.is_dir() {
            "a directory"
        } else if kind.is_fifo() {
            "a named pipe"
        } else if kind.is_block_device() || kind.is_char_device() {
            "a device"
        } else {
            "not a socket"
        };
        Err(PodResourcesError::NotASocket {
            path: path.to_path_buf(),
            what,
        })
    }
    #[cfg(not(unix))]
    {
        let _ = kind;
        Ok(())
    }
}

/// A connected client.
#[derive(Debug, Clone)]
pub(crate) struct PodResourcesClient {
    path: PathBuf,
    inner: PodResourcesListerClient<Channel>,
}

impl PodResourcesClient {
    /// Connects to the socket at `path` (HTTP/2 over the unix socket, as the kubelet's
    /// own clients do), failing after `timeout`.
    pub(crate) async fn connect(path: &Path, timeout: Duration) -> Result<Self, PodResourcesError> {
        check_socket(path).await?;
        let socket = path.to_path_buf();
        // The URI is required by the API but unused: the connector dials the socket.
        let endpoint = Endpoint::from_static("http://localhost")
            .connect_timeout(timeout)
            .timeout(timeout);
        let channel = endpoint
            .connect_with_connector(tower::service_fn(move |_: Uri| {
                let socket = socket.clone();
                async move {
                    let stream = tokio::net::UnixStream::connect(socket).await?;
                    Ok::<_, std::io::Error>(TokioIo::new(stream))
                }
            }))
            .await
            .map_err(|source| PodResourcesError::Connect {
                path: path.to_path_buf(),
                source,
            })?;
        Ok(PodResourcesClient {
            path: path.to_path_buf(),
            inner: PodResourcesListerClient::new(channel),
        })
    }

    /// Calls `GetAllocatableResources` then `List`.
    pub(crate) async fn snapshot(&mut self) -> Result<KubeletView, PodResourcesError> {
        let alloc = self
            .inner
            .get_allocatable_resources(v1::AllocatableResourcesRequest {})
            .await
            .map_err(|s| self.err("GetAllocatableResources", s))?
            .into_inner();
        let list = self
            .inner
            .list(v1::ListPodResourcesRequest {})
            .await
            .map_err(|s| self.err("List", s))?
            .into_inner();
        let pods = list
            .pod_resources
            .into_iter()
            .map(|p| {
                let mut devs = Vec::new();
                let mut cpus = p.cpu_ids;
                for c in p.containers {
                    devs.extend(c.devices.into_iter().map(devices));
                    cpus.extend(c.cpu_ids);
                }
                cpus.sort_unstable();
                cpus.dedup();
                PodDevices {
                    namespace: p.namespace,
                    name: p.name,
                    devices: devs,
                    cpus,
                }
            })
            .collect();
        Ok(KubeletView {
            allocatable: alloc.devices.into_iter().map(devices).collect(),
            allocatable_cpus: alloc.cpu_ids,
            pods,
        })
    }

    fn err(&self, call: &'static str, status: tonic::Status) -> PodResourcesError {
        PodResourcesError::Call {
            call,
            path: self.path.clone(),
            status: Box::new(status),
        }
    }
}
