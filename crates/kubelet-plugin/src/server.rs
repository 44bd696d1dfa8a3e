//! The gRPC services (registration, DRA, device health) and [`Plugin::serve`], which binds
//! `<plugin-registry-dir>/<driver>-reg.sock` and `<plugin-dir>/<driver>/dra.sock` and
//! puts the `:authority` shim (`topoalign_h2_authority`) in front of both.

use std::future::Future;
use std::path::Path;
use std::pin::Pin;

use tokio::net::UnixListener;
use tokio_stream::StreamExt;
use tokio_stream::wrappers::{UnixListenerStream, WatchStream};
use tonic::transport::Server;
use tonic::{Request, Response, Status};
use topoalign_dra::DRIVER_NAME;

use crate::error::PluginError;
use crate::health::{DeviceHealthEntry, Health};
use crate::pb::dra_v1 as dra;
use crate::pb::pluginregistration as reg;
use crate::plugin::{Plugin, RegistrationStatus};

/// The plugin type the kubelet's plugin watcher routes to its DRA manager.
pub(crate) const PLUGIN_TYPE: &str = "DRAPlugin";
/// The DRA service versions served on the DRA socket.
pub(crate) const SUPPORTED_VERSIONS: [&str; 1] = ["v1.DRAPlugin"];

/// How long [`Plugin::serve`] lets open connections drain after shutdown.
pub(crate) const SHUTDOWN_GRACE: std::time::Duration = std::time::Duration::from_secs(5);

/// The registration service.
#[derive(Debug, Clone)]
pub struct RegistrationService(pub Plugin);

#[tonic::async_trait]
impl reg::registration_server::Registration for RegistrationService {
    async fn get_info(
        &self,
        _: Request<reg::InfoRequest>,
    ) -> Result<Response<reg::PluginInfo>, Status> {
        Ok(Response::new(reg::PluginInfo {
            r#type: PLUGIN_TYPE.to_string(),
            name: DRIVER_NAME.to_string(),
            endpoint: self.0.config().dra_socket().to_string_lossy().into_owned(),
            supported_versions: SUPPORTED_VERSIONS.iter().map(|s| s.to_string()).collect(),
        }))
    }

    async fn notify_registration_status(
        &self,
        request: Request<reg::RegistrationStatus>,
    ) -> Result<Response<reg::RegistrationStatusResponse>, Status> {
        let s = request.into_inner();
        if s.plugin_registered {
            tracing::info!("the kubelet registered the plugin");
        } else {
            tracing::error!(error = %s.error, "the kubelet refused the plugin");
        }
        self.0
            .inner
            .registration
            .send_replace(Some(RegistrationStatus {
                registered: s.plugin_registered,
                error: s.error,
            }));
        Ok(Response::new(reg::RegistrationStatusResponse {}))
    }
}

/// The DRA service.
#[derive(Debug, Clone)]
pub(crate) struct DraService(pub Plugin);

#[tonic::async_trait]
impl dra::dra_plugin_server::DraPlugin for DraService {
    async fn node_prepare_resources(
        &self,
        request: Request<dra::NodePrepareResourcesRequest>,
    ) -> Result<Response<dra::NodePrepareResourcesResponse>, Status> {
        self.0
            .node_prepare(request.into_inner().claims)
            .await
            .map(Response::new)
    }

    async fn node_unprepare_resources(
        &self,
        request: Request<dra::NodeUnprepareResourcesRequest>,
    ) -> Result<Response<dra::NodeUnprepareResourcesResponse>, Status> {
        self.0
            .node_unprepare(request.into_inner().claims)
            .await
            .map(Response::new)
    }
}

/// The health service of one API version.
#[derive(Debug, Clone)]
pub(crate) struct HealthService(pub Plugin);

type HealthStream<T> = Pin<Box<dyn tokio_stream::Stream<Item = Result<T, Status>> + Send>>;

macro_rules! health_version {
    ($m:ident, $($extra:tt)*) => {
        #[tonic::async_trait]
        impl crate::pb::$m::dra_resource_health_server::DraResourceHealth for HealthService {
            type NodeWatchResourcesStream = HealthStream<crate::pb::$m::NodeWatchResourcesResponse>;

            async fn node_watch_resources(
                &self,
                _: Request<crate::pb::$m::NodeWatchResourcesRequest>,
            ) -> Result<Response<Self::NodeWatchResourcesStream>, Status> {
                use crate::pb::$m as h;
                let rx = self
                    .0
                    .health()
                    .ok_or_else(|| Status::internal("the health board lock is poisoned"))?;
                let to_msg = |list: Vec<DeviceHealthEntry>| -> Result<h::NodeWatchResourcesResponse, Status> {
                    Ok(h::NodeWatchResourcesResponse {
                        devices: list
                            .into_iter()
                            .map(|e| h::DeviceHealth {
                                device: Some(h::DeviceIdentifier {
                                    pool_name: e.pool,
                                    device_name: e.device,
                                }),
                                health: match e.health {
                                    Health::Healthy => h::HealthStatus::Healthy,
                                    Health::Unhealthy => h::HealthStatus::Unhealthy,
                                    Health::Unknown => h::HealthStatus::Unknown,
                                } as i32,
                                last_updated_time: e.last_updated,
                                $($extra)*
                            })
                            .collect(),
                    })
                };
                let mut stopping = self.0.inner.stopping.subscribe();
                let stop = async move {
                    let _ = stopping.wait_for(|s| *s).await;
                };
                let stream = futures::StreamExt::take_until(WatchStream::new(rx).map(to_msg), stop);
                Ok(Response::new(Box::pin(stream)))
            }
        }
    };
}

health_version!(health_v1alpha1,);
health_version!(health_v1beta1, ..Default::default());
health_version!(health_v1, ..Default::default());

/// Binds a unix socket, replacing a stale socket file (anything else there is an error).
pub(crate) fn bind(path: &Path) -> Result<UnixListener, PluginError> {
    let bind_err = |source| PluginError::Bind {
        path: path.to_path_buf(),
        source,
    };
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(bind_err)?;
    }
    match std::fs::symlink_metadata(path) {
        Ok(m) => {
            use std::os::unix::fs::FileTypeExt;
            if !m.file_type().is_socket() {
                return Err(bind_err(std::io::Error::other(
                    "exists and is not a socket; refusing to replace it",
                )));
            }
            std::fs::remove_file(path).map_err(bind_err)?;
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(bind_err(e)),
    }
    UnixListener::bind(path).map_err(bind_err)
}

impl Plugin {
    /// Serves the DRA and health services on the DRA socket, then registration on the
    /// registration socket (so the kubelet never finds a registration whose endpoint is
    /// not up), until `shutdown` completes; then removes both socket files.
    pub async fn serve(self, shutdown: impl Future<Output = ()> + Send) -> Result<(), PluginError> {
        let dra_path = self.config().dra_socket();
        let reg_path = self.config().registration_socket();
        let dra_listener = bind(&dra_path)?;
        let reg_listener = bind(&reg_path)?;
        let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
        let stopped = |mut rx: tokio::sync::watch::Receiver<bool>| async move {
            let _ = rx.wait_for(|s| *s).await;
        };
        // The h2 `:authority` workaround (see `topoalign_h2_authority`): drop the
        // `.map(…)` to remove it.
        let incoming = |l: UnixListener| {
            UnixListenerStream::new(l).map(|conn| conn.map(topoalign_h2_authority::wrap))
        };
        let dra_server = Server::builder()
            .add_service(dra::dra_plugin_server::DraPluginServer::new(DraService(self.clone())))
            .add_service(
                crate::pb::health_v1alpha1::dra_resource_health_server::DraResourceHealthServer::new(
                    HealthService(self.clone()),
                ),
            )
            .add_service(
                crate::pb::health_v1beta1::dra_resource_health_server::DraResourceHealthServer::new(
                    HealthService(self.clone()),
                ),
            )
            .add_service(
                crate::pb::health_v1::dra_resource_health_server::DraResourceHealthServer::new(
                    HealthService(self.clone()),
                ),
            )
            .serve_with_incoming_shutdown(incoming(dra_listener), stopped(stop_rx.clone()));
        let reg_server = Server::builder()
            .add_service(reg::registration_server::RegistrationServer::new(
                RegistrationService(self.clone()),
            ))
            .serve_with_incoming_shutdown(incoming(reg_listener), stopped(stop_rx));
        tracing::info!(
            registration = %reg_path.display(),
            dra = %dra_path.display(),
            "kubelet plugin serving"
        );
        let servers = async {
            tokio::try_join!(
                async {
                    dra_server.await.map_err(|source| PluginError::Serve {
                        what: "the DRA service",
                        source,
                    })
                },
                async {
                    reg_server.await.map_err(|source| PluginError::Serve {
                        what: "the registration service",
                        source,
                    })
                },
            )
            .map(|_| ())
        };
        tokio::pin!(servers);
        let result = tokio::select! {
            r = &mut servers => r,
            () = shutdown => {
                // Health streams never end by themselves; end them so the servers drain.
                self.inner.stopping.send_replace(true);
                let _ = stop_tx.send(true);
                // A client that never answers h2's shutdown PING would hold the drain
                // forever; after the grace period the connections are dropped.
                match tokio::time::timeout(SHUTDOWN_GRACE, &mut servers).await {
                    Ok(r) => r,
                    Err(_) => {
                        tracing::warn!("clients did not close within the grace period; dropping them");
                        Ok(())
                    }
                }
            }
        };
        for p in [&reg_path, &dra_path] {
            let _ = std::fs::remove_file(p);
        }
        result
    }
}
