//! The whole node agent: discovery, the publisher, the kubelet plugin and the HTTP
//! endpoints on one tokio runtime, stopped cleanly by SIGTERM or SIGINT (the plugin stops
//! serving, the publisher deletes this node's slices, then the HTTP server stops).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use topoalign_discover::Source;
use topoalign_dra::{Inventory, PublishOptions};
use topoalign_kubelet_plugin::{FaultHook, FaultPoint, Plugin, PluginConfig};
use topoalign_node_facts::{NodeFacts, WiringFlags};
use topoalign_probes::{Threads, kube_client, runtime, shutdown_signals};
use topoalign_topology::Topology;

use crate::claims::KubeClaims;
use crate::error::DriverError;
use crate::http::{AppState, Health};
use crate::metrics::Metrics;
use crate::publisher::{Publisher, PublisherConfig, TopologyHook};
use crate::rewire::Rewire;

/// Everything `topoalign driver` was told.
#[derive(Debug, Clone)]
pub struct DriverConfig {
    /// A kubeconfig file; `None`: `KUBECONFIG`, `~/.kube/config` or the pod's service
    /// account.
    pub kubeconfig: Option<PathBuf>,
    /// This node's name (`spec.nodeName` and pool name).
    pub node_name: String,
    /// Where the topology is read from.
    pub source: Source,
    /// Which devices are published.
    pub options: PublishOptions,
    /// The node's rail source (`--rails`) and the NICs' neighbours read at start; `None`
    /// publishes no rail.
    pub rails: Option<crate::Rails>,
    /// The node's domain facts (`--fabric-from`, `--domains`, the NICs' neighbours), read
    /// at start, when its domain labels are to be written (`--write-domain-labels`);
    /// `None` writes no label.
    pub domain_labels: Option<NodeFacts>,
    /// Where the NICs' neighbours are read (`--lldp-from`, `--ib-sysfs`,
    /// `--ibnetdiscover`): again on every rediscovery, so the rails and the leaf follow
    /// a recabled NIC.
    pub wiring: WiringFlags,
    /// How often the topology is rediscovered.
    pub rescan_interval: Duration,
    /// How long shutdown keeps trying to delete this node's slices.
    pub removal_timeout: Duration,
    /// The kubelet plugin's sockets and directories; `None` runs the publisher only.
    pub plugin: Option<PluginConfig>,
    /// Where `/healthz`, `/readyz` and `/metrics` are served.
    pub metrics_addr: SocketAddr,
    /// Fault testing: abort the process when the kubelet plugin reaches this write step
    /// (the e2e suite's "driver killed mid-prepare"). `None` in production.
    pub crash_at: Option<FaultPoint>,
}

/// Discovers the node, then runs the agent until SIGTERM/SIGINT, logging through the
/// process's global `tracing` subscriber. Bad input (unknown
/// profile, unreadable sysfs, invalid node name) fails before any connection is made.
pub fn run_blocking(cfg: DriverConfig) -> Result<(), DriverError> {
    let found = topoalign_discover::load(&cfg.source)?;
    for w in &found.warnings {
        tracing::warn!(warning = %w, "discovery");
    }
    // The node's inventory, built once for this discovery and shared by the publisher and
    // the kubelet plugin. The node name and the limits are checked here, once, before
    // anything starts.
    let inventory = Arc::new(crate::rails::inventory(
        &found.topology,
        &cfg.options,
        cfg.rails.as_ref(),
    )?);
    let slices = topoalign_dra::slices_for(&inventory, &cfg.node_name, cfg.options.generation)?;
    tracing::info!(
        node = %cfg.node_name,
        gpus = found.topology.gpus.len(),
        nics = found.topology.nics.len(),
        slices = slices.len(),
        "discovered the node"
    );

    let rt = runtime(Threads::Fixed {
        workers: 2,
        blocking: 4,
    })
    .map_err(DriverError::Runtime)?;
    rt.block_on(run(cfg, found.topology, inventory))
}

async fn stopped(mut rx: watch::Receiver<bool>) {
    let _ = rx.wait_for(|s| *s).await;
}

async fn joined(
    task: &'static str,
    h: JoinHandle<Result<(), DriverError>>,
) -> Result<(), DriverError> {
    h.await.map_err(|e| DriverError::Task {
        task,
        why: e.to_string(),
    })?
}

/// The agent on a running tokio runtime, for `topology` and its `inventory` under
/// `cfg.options` (with `cfg.rails` applied: [`crate::rails::inventory`]).
pub(crate) async fn run(
    cfg: DriverConfig,
    topology: Topology,
    inventory: Arc<Inventory>,
) -> Result<(), DriverError> {
    let signalled = shutdown_signals().map_err(DriverError::Signal)?;
    let client = kube_client(cfg.kubeconfig.as_deref()).await?;
    let health = Arc::new(Health::new(cfg.plugin.is_some()));
    let (stop_tx, stop_rx) = watch::channel(false);
    let (http_stop_tx, http_stop_rx) = watch::channel(false);

    // Bound first: a taken port fails the start before any socket or slice exists.
    let listener = TcpListener::bind(cfg.metrics_addr)
        .await
        .map_err(|source| DriverError::Listen {
            addr: cfg.metrics_addr,
            source,
        })?;

    let mut metrics = Metrics::new();
    let mut plugin_task: Option<JoinHandle<Result<(), DriverError>>> = None;
    let mut hot_plug: Option<TopologyHook> = None;
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
        let plugin = Plugin::with_fault_hook(pcfg, inventory.clone(), claims, crash)?;
        let hooked = plugin.clone();
        hot_plug = Some(Box::new(move |inv: &Arc<Inventory>| {
            hooked.set_inventory(inv.clone());
        }));
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

    let addr = listener.local_addr().unwrap_or(cfg.metrics_addr);
    tracing::info!(%addr, "serving /healthz, /readyz and /metrics");
    let http_task = tokio::spawn(crate::http::serve(
        listener,
        AppState {
            health: health.clone(),
            metrics: metrics.clone(),
        },
        stopped(http_stop_rx),
    ));

    let client_for_labels = client.clone();
    // The domain facts reach the labelling task through a watch: the publisher derives
    // them again when a rediscovery finds the NICs recabled.
    let (labels_tx, labels_rx) = match cfg.domain_labels.clone() {
        Some(facts) => {
            let (tx, rx) = watch::channel(facts);
            (Some(tx), Some(rx))
        }
        None => (None, None),
    };
    // The neighbours matter for the rails and the leaf only.
    let rewire = if cfg.rails.is_some() || labels_tx.is_some() {
        let start = (cfg.rails.as_ref().map(|r| r.neighbours.clone()))
            .or_else(|| {
                (cfg.domain_labels.as_ref())
                    .and_then(|f| f.wiring.as_ref())
                    .map(|w| w.neighbours.clone())
            })
            .unwrap_or_default();
        Rewire::new(cfg.wiring.clone(), start, labels_tx)
    } else {
        None
    };
    let publisher = Publisher::new(
        client,
        PublisherConfig {
            node_name: cfg.node_name.clone(),
            source: cfg.source.clone(),
            rails: cfg.rails.clone(),
            options: cfg.options.clone(),
            rescan_interval: cfg.rescan_interval,
            removal_timeout: cfg.removal_timeout,
        },
        topology,
        inventory,
        metrics.clone(),
        health.clone(),
    );
    let publisher = match hot_plug {
        Some(hook) => publisher.on_topology_change(hook),
        None => publisher,
    }
    .following(rewire);
    let mut publisher_task = tokio::spawn(publisher.run(stop_rx.clone()));
    // The domain labels: one round once the API server answers (retried), and one more
    // whenever the NICs' neighbours change the facts; apart from the publisher so that a
    // refused Node write never holds up the slices.
    let labels_task = labels_rx.map(|facts| {
        tokio::spawn(crate::domain_labels::run(
            client_for_labels,
            cfg.node_name.clone(),
            facts,
            metrics.clone(),
            stop_rx.clone(),
        ))
    });

    // Run until a signal, or until a part fails on its own.
    let mut first_error: Option<DriverError> = None;
    let mut publisher_done = false;
    tokio::select! {
        which = signalled => tracing::info!(signal = which, "shutting down"),
        r = &mut publisher_task => {
            publisher_done = true;
            if let Err(e) = flatten("publisher", r) { first_error = Some(e); }
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
    if let Some(t) = plugin_task
        && let Err(e) = joined("kubelet plugin", t).await
    {
        first_error.get_or_insert(e);
    }
    if !publisher_done && let Err(e) = joined("publisher", publisher_task).await {
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
    r.map_err(|e| DriverError::Task {
        task,
        why: e.to_string(),
    })?
}
