//! The serving process: the watchers, the HTTP server and graceful shutdown, on the API
//! client and shutdown signal of the process kit (`topoalign_probes::process`).

use std::future::Future;
use std::net::SocketAddr;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use topoalign_tm::ResourceMap;

use crate::gate::CallLimits;
use crate::plugin::shared::Decider;
use crate::plugin::state::ClusterState;
use crate::plugin::watch::WatchError;
use crate::server::{App, serve};

/// Serving settings.
#[derive(Debug, Clone)]
pub struct ServeConfig {
    /// Address to serve on.
    pub listen: SocketAddr,
    /// Agent data older than this is stale.
    pub stale_after: Duration,
    /// Assumed allocations on agent-reported nodes last this long.
    pub assume_ttl: Duration,
    /// Verdict cache entries (0: none).
    pub cache_size: usize,
    /// Resource names → devices.
    pub resources: ResourceMap,
    /// DRA path: the weight of the capacity a placement uses up
    /// (`capacity_penalty`).
    pub dra_keep_room: bool,
    /// DRA path: the drivers whose slices are kept besides topoalign.dev's (`None`:
    /// every driver).
    pub dra_drivers: Option<std::collections::BTreeSet<String>>,
    /// Limits of the scheduler calls and the server (bodies, calls in flight, work
    /// budget, timeouts, connection cap, shutdown grace).
    pub calls: CallLimits,
    /// Answer Kueue's AdmissionChecks whose `spec.controllerName` is this (`None`: the
    /// Kueue wing does not run).
    pub kueue_check: Option<String>,
}

/// Why the extender stopped with an error.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// The listen address cannot be bound.
    #[error("--listen {addr}: cannot bind: {source}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// Why.
        source: std::io::Error,
    },
    /// The watchers failed.
    #[error("watching the API server: {0}")]
    Watch(#[from] WatchError),
    /// A task failed.
    #[error("{0} task failed")]
    Task(&'static str),
    /// Serving failed.
    #[error("serving: {0}")]
    Serve(#[source] std::io::Error),
}

/// Beyond the server's own shutdown grace, how long the stop may take before it is
/// given up (the server kit already bounds it; this only guards against a bug).
pub(crate) const DRAIN_SLACK: Duration = Duration::from_secs(1);

/// Serves until `shutdown` resolves (or the watchers fail): binds, calls `listening`
/// with the address, runs the watchers, the background warmer and the server, then
/// lets calls in flight finish for up to the shutdown grace
/// (`cfg.calls.server.shutdown_grace`). Returns whether the drain finished in time.
pub async fn run(
    client: kube::Client,
    cfg: ServeConfig,
    shutdown: impl Future<Output = ()>,
    listening: impl FnOnce(SocketAddr),
) -> Result<bool, RunError> {
    let mut cluster = ClusterState::new(cfg.stale_after, cfg.assume_ttl);
    cluster.set_resources(cfg.resources.clone());
    let state = Arc::new(RwLock::new(cluster));
    let app = Arc::new(App::with_limits(
        state,
        Decider::new(cfg.resources, cfg.cache_size),
        cfg.calls,
    ));
    let listener = tokio::net::TcpListener::bind(cfg.listen)
        .await
        .map_err(|source| RunError::Bind {
            addr: cfg.listen,
            source,
        })?;
    listening(listener.local_addr().unwrap_or(cfg.listen));
    {
        let mut dra = app.dra.write();
        dra.keep_room = cfg.dra_keep_room;
        dra.keep_drivers(cfg.dra_drivers.clone());
    }
    app.dra.expect_lists();
    let dra_watch = tokio::spawn(crate::dra::watch::run(client.clone(), app.dra.clone()));
    let alignment = tokio::spawn(crate::alignment::run(
        client.clone(),
        app.dra.clone(),
        app.metrics.clone(),
    ));
    let kueue = cfg.kueue_check.clone().map(|name| {
        tokio::spawn(crate::kueue::controller::run(
            client.clone(),
            app.dra.clone(),
            name,
        ))
    });
    let watch = tokio::spawn(crate::plugin::watch::run(client, app.feed()));
    let warmer = tokio::spawn(app.clone().warmer());
    let (stop_tx, mut stop_rx) = tokio::sync::watch::channel(false);
    let server = tokio::spawn(serve(listener, app, async move {
        let _ = stop_rx.changed().await;
    }));
    let outcome: Result<(), RunError> = tokio::select! {
        _ = shutdown => Ok(()),
        w = watch => match w {
            Ok(r) => r.map_err(RunError::from),
            Err(_) => Err(RunError::Task("watcher")),
        },
    };
    dra_watch.abort();
    alignment.abort();
    warmer.abort();
    if let Some(k) = kueue {
        k.abort();
    }
    let _ = stop_tx.send(true);
    let drain = cfg.calls.server.shutdown_grace + DRAIN_SLACK;
    let drained = match tokio::time::timeout(drain, server).await {
        Ok(Ok(Ok(()))) => true,
        Ok(Ok(Err(e))) => return Err(RunError::Serve(e)),
        Ok(Err(_)) => return Err(RunError::Task("server")),
        Err(_) => false,
    };
    outcome?;
    Ok(drained)
}
