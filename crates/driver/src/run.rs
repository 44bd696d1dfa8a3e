//! The whole node agent on a running tokio runtime, as read at start ([`Start`]): the
//! follower (rediscovery, the NICs' neighbours, the rails), the slice controller, the
//! kubelet plugin, the labelling task and the HTTP endpoints, stopped cleanly when the
//! shutdown future resolves (the plugin stops serving, the slice controller deletes this
//! node's slices, then the HTTP server stops). The caller brings the runtime, the API
//! client and the shutdown future (the process kit's, as for the agent and the
//! extender).

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use kube::Client;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use topoalign_kubelet_plugin::{FaultHook, FaultPoint, Plugin};

use crate::claims::KubeClaims;
use crate::error::DriverError;
use crate::follower::NodeFollower;
use crate::http::{AppState, Health};
use crate::inventory::NodePool;
use crate::metrics::Metrics;
use crate::slices::SliceController;
use crate::start::Start;

/// The threads of the driver's runtime: it shares its node with the workloads.
pub const THREADS: topoalign_probes::Threads = topoalign_probes::Threads::Fixed {
    workers: 2,
    blocking: 4,
};

async fn stopped(mut rx: watch::Receiver<bool>) {
    let _ = rx.wait_for(|s| *s).await;
}

async fn joined(
    task: &'static str,
    h: JoinHandle<Result<(), DriverError>>,
) -> Result<(), DriverError> {
    h.await
        .map_err(|source| DriverError::Join { task, source })?
}

/// Runs the driver read at start until `shutdown` resolves (with the signal's name) or a
/// part fails on its own, talking to the API server through `client`.
pub async fn run(
    start: Start,
    client: Client,
    shutdown: impl Future<Output = &'static str>,
) -> Result<(), DriverError> {
    let Start {
        config: cfg,
        topology,
        facts,
        follower,
        ..
    } = start;
    // The first pool, shared by the slice controller and the kubelet plugin.
    let pool = NodePool::new(topology.clone(), cfg.options.clone(), facts.rails.clone());
    let slices = topoalign_dra::publish::slices_for(
        &pool.inventory,
        &cfg.node_name,
        cfg.options.generation,
    )?;
    tracing::info!(
        node = %cfg.node_name,
        gpus = topology.gpus.len(),
        nics = topology.nics.len(),
        slices = slices.len(),
        "discovered the node"
    );
    let health = Arc::new(Health::new(cfg.plugin.is_some()));
    let (stop_tx, stop_rx) = watch::channel(false);
    let (http_stop_tx, http_stop_rx) = watch::channel(false);

    // Bound first: a taken port fails the start before any socket or slice exists.
    let listener = TcpListener::bind(cfg.listen)
        .await
        .map_err(|source| DriverError::Listen {
            addr: cfg.listen,
            source,
        })?;

    let mut metrics = Metrics::new();
    let mut plugin_task: Option<JoinHandle<Result<(), DriverError>>> = None;
    let mut plugin_follows: Option<Plugin> = None;
    if let Some(pcfg) = cfg.plugin.clone() {
        let claims = Arc::new(KubeClaims::new(client.clone()));
        let crash = cfg.crash_at.map(|at| -> FaultHook {
            Arc::new(move |point: FaultPoint| {
                if point == at {
                    tracing::error!(point = %point, "crash requested (--crash-at): aborting");
                    std::process::abort();
                }
                Ok(())
            })
        });
        let plugin = Plugin::with_fault_hook(pcfg, pool.inventory.clone(), claims, crash)?;
        plugin_follows = Some(plugin.clone());
        metrics = metrics.with_plugin(plugin.metrics());
        let socket = plugin.config().dra_socket();
        let shutdown = stopped(stop_rx.clone());
        let h = health.clone();
        plugin_task = Some(tokio::spawn(async move {
            let serving = plugin.serve(shutdown);
            tokio::pin!(serving);
            // Ready once the DRA socket is bound (serve binds before its first await).
            loop {
                tokio::select! {
                    r = &mut serving => { h.set_plugin_serving(false); return r.map_err(DriverError::from); }
                    _ = tokio::time::sleep(Duration::from_millis(50)) => {
                        if socket.exists() { h.set_plugin_serving(true); break; }
                    }
                }
            }
            let r = serving.await;
            h.set_plugin_serving(false);
            r.map_err(DriverError::from)
        }));
    }
    let metrics = Arc::new(metrics);

    let addr = listener.local_addr().unwrap_or(cfg.listen);
    tracing::info!(%addr, "serving /healthz, /readyz and /metrics");
    let http_task = tokio::spawn(crate::http::serve(
        listener,
        AppState {
            health: health.clone(),
            metrics: metrics.clone(),
        },
        stopped(http_stop_rx),
    ));

    // The follower hands every new node to the slice controller, the kubelet plugin and
    // the labelling task, each on its watch channel.
    let node = NodeFollower::new(&cfg, follower, topology, facts, pool, metrics.clone());
    let following = plugin_follows.map(|p| tokio::spawn(p.follow(node.inventories())));
    let controller = SliceController::new(
        client.clone(),
        cfg.node_name.clone(),
        node.pools(),
        cfg.rescan_interval,
        cfg.removal_timeout,
        metrics.clone(),
        health.clone(),
    );
    let mut controller_task = tokio::spawn(controller.run(stop_rx.clone()));
    // The domain labels: one round once the API server answers (retried), and one more
    // whenever the NICs' neighbours change the facts; apart from the slices so that a
    // refused Node write never holds them up.
    let labels_task = cfg.write_domain_labels.then(|| {
        tokio::spawn(crate::domain_labels::run(
            client,
            cfg.node_name.clone(),
            node.domain_facts(),
            metrics.clone(),
            stop_rx.clone(),
        ))
    });
    let follower_task = tokio::spawn(node.run(cfg.rescan_interval, stop_rx.clone()));

    // Run until a signal, or until a part fails on its own.
    let mut first_error: Option<DriverError> = None;
    let mut controller_done = false;
    tokio::select! {
        which = shutdown => tracing::info!(signal = which, "shutting down"),
        r = &mut controller_task => {
            controller_done = true;
            if let Err(e) = flatten("slice controller", r) { first_error = Some(e); }
        }
        r = async { match plugin_task.as_mut() { Some(t) => t.await, None => std::future::pending().await } } => {
            plugin_task = None;
            if let Err(e) = flatten("kubelet plugin", r) {
                metrics.error("plugin");
                first_error = Some(e);
            }
        }
    }
    let _ = stop_tx.send(true);
    let _ = follower_task.await;
    if let Some(t) = following {
        let _ = t.await;
    }
    if let Some(t) = plugin_task
        && let Err(e) = joined("kubelet plugin", t).await
    {
        first_error.get_or_insert(e);
    }
    if !controller_done && let Err(e) = joined("slice controller", controller_task).await {
        first_error.get_or_insert(e);
    }
    if let Some(t) = labels_task {
        let _ = t.await;
    }
    let _ = http_stop_tx.send(true);
    if let Err(e) = joined("http", http_task).await {
        first_error.get_or_insert(e);
    }
    match first_error {
        Some(e) => Err(e),
        None => {
            tracing::info!("stopped cleanly");
            Ok(())
        }
    }
}

fn flatten(
    task: &'static str,
    r: Result<Result<(), DriverError>, tokio::task::JoinError>,
) -> Result<(), DriverError> {
    r.map_err(|source| DriverError::Join { task, source })?
}
