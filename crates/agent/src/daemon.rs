//! The agent's loop: every `--interval` it reads the kubelet, publishes the
//! NodeResourceTopology object when its content changed or the heartbeat is due, and
//! labels the node (the pair and fabric labels with hysteresis, the domain labels as soon
//! as they change); every `--rescan-interval` it reads the NICs' neighbours again
//! (`crate::rescan`) and publishes at once when they changed.

use std::collections::BTreeMap;
use std::time::Instant;

use topoalign_fabric::{DomainLabels, NicRails};
use topoalign_node_facts::ManagedLabels;

use crate::labels::{Debouncer, wanted};
use crate::metrics::Metrics;
use crate::podresources::PodResourcesClient;
use crate::publish::{FIELD_MANAGER, apply_labels, apply_nrt};
use crate::report::Report;
use crate::run::{AgentError, Config, now_rfc3339, output, unknown_summary};

/// The node's domain labels, once the API server answers: its labels now, less those
/// this agent owns, against the facts now. Notes are logged each time.
async fn node_domains(cfg: &Config, client: &kube::Client) -> Option<DomainLabels> {
    let api: kube::Api<k8s_openapi::api::core::v1::Node> = kube::Api::all(client.clone());
    match api.get(&cfg.node).await {
        Ok(node) => {
            let seen = ManagedLabels::of(&node, FIELD_MANAGER);
            let d = cfg.facts.labels(&seen.labels, &seen.owned);
            for n in &d.notes {
                tracing::info!(node = %cfg.node, "{n}");
            }
            Some(d)
        }
        Err(e) => {
            tracing::warn!(error = %e, node = %cfg.node, "node not read; domain labels wait");
            None
        }
    }
}

/// `run` with `/healthz`, `/readyz` and `/metrics` served on `metrics_addr` until
/// `shutdown` resolves.
pub async fn run_serving(
    cfg: Config,
    client: kube::Client,
    metrics_addr: std::net::SocketAddr,
    shutdown: impl std::future::Future<Output = ()>,
) -> Result<(), AgentError> {
    let serve_error = |source| AgentError::Serve {
        addr: metrics_addr,
        source,
    };
    let listener = tokio::net::TcpListener::bind(metrics_addr)
        .await
        .map_err(serve_error)?;
    let metrics = std::sync::Arc::new(Metrics::new());
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(crate::metrics::serve(listener, metrics.clone(), async {
        let _ = stopped.await;
    }));
    let result = run(cfg, client, metrics, shutdown).await;
    let _ = stop.send(());
    match server.await {
        Ok(Err(e)) => return Err(serve_error(e)),
        Err(e) => return Err(serve_error(std::io::Error::other(e))),
        Ok(Ok(())) => {}
    }
    result
}

/// What the last NodeResourceTopology write held, and when it was written.
struct Published {
    report: Report,
    rails: Option<NicRails>,
    domains: BTreeMap<String, String>,
    at: Instant,
}

/// What woke the loop.
enum Wake {
    /// The kubelet's interval.
    Round,
    /// The neighbours' interval.
    Rescan,
}

/// The next tick of `rescan`; never without one.
async fn next(rescan: &mut Option<tokio::time::Interval>) {
    match rescan {
        Some(i) => {
            i.tick().await;
        }
        None => std::future::pending().await,
    }
}

/// Runs until `shutdown` resolves: read, publish on change or heartbeat, label; the
/// NICs' neighbours read again every `cfg.rescan_interval`. Kubelet and API errors are
/// logged and retried next interval. Every round is counted in `metrics`, which also
/// says whether the agent is ready (the last round read the kubelet and the API server
/// holds its report).
pub(crate) async fn run(
    mut cfg: Config,
    client: kube::Client,
    metrics: std::sync::Arc<Metrics>,
    shutdown: impl std::future::Future<Output = ()>,
) -> Result<(), AgentError> {
    let mut shutdown = std::pin::pin!(shutdown);
    let mut debounce = Debouncer::new(cfg.label_hold);
    let mut last: Option<Published> = None;
    let mut last_unknown: Option<(usize, Option<String>, Option<String>)> = None;
    let mut kubelet: Option<PodResourcesClient> = None;
    let mut tick = tokio::time::interval(cfg.interval);
    // The neighbours were read at start: the first read again is one interval later.
    let mut rescan = cfg.follower.rereads().then(|| {
        let start = tokio::time::Instant::now() + cfg.rescan_interval;
        let mut i = tokio::time::interval_at(start, cfg.rescan_interval);
        i.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        i
    });
    let mut domains: Option<DomainLabels> = None;
    // The facts changed since `domains` was worked out (the node is read again).
    let mut domains_stale = false;
    // The pair and fabric labels past their hold, and the labels last applied.
    let mut held: Option<BTreeMap<String, String>> = None;
    let mut applied: Option<BTreeMap<String, String>> = None;
    loop {
        let wake = tokio::select! {
            _ = &mut shutdown => return Ok(()),
            _ = tick.tick() => Wake::Round,
            _ = next(&mut rescan) => Wake::Rescan,
        };
        if let Wake::Rescan = wake {
            // Unchanged neighbours (or a failed read) wait for the next interval; new ones
            // are published now.
            match crate::rescan::rescan(&cfg.follower, &cfg.facts, &cfg.topology, &metrics).await {
                Some(facts) => {
                    cfg.facts = facts;
                    domains_stale = true;
                }
                None => continue,
            }
        }
        if domains.is_none() || domains_stale {
            // Until the node is read, the domain labels worked out before stay.
            if let Some(d) = node_domains(&cfg, &client).await {
                domains = Some(d);
                domains_stale = false;
            }
        }
        if kubelet.is_none() {
            match PodResourcesClient::connect(&cfg.socket, cfg.timeout).await {
                Ok(c) => kubelet = Some(c),
                Err(e) => {
                    tracing::warn!(error = %e, "kubelet not reachable; retrying");
                    metrics.kubelet_read(None);
                    continue;
                }
            }
        }
        let Some(k) = kubelet.as_mut() else { continue };
        let view = match k.snapshot().await {
            Ok(v) => v,
            Err(e) => {
                tracing::warn!(error = %e, "kubelet read failed; reconnecting");
                metrics.kubelet_read(None);
                kubelet = None;
                continue;
            }
        };
        // Until the node is read, no domain label is written (none is known to be free).
        let none = DomainLabels::default();
        let now_domains = domains.as_ref().unwrap_or(&none);
        let out = output(&cfg, view, now_domains, &now_rfc3339());
        metrics.kubelet_read(Some(&out.report));
        let unknown = &out.report.unknown_ids;
        let seen = (
            unknown.len(),
            unknown.first().cloned(),
            unknown.last().cloned(),
        );
        if !unknown.is_empty() {
            let summary = unknown_summary(unknown);
            // Said once per change at warn; every read at debug.
            if last_unknown.as_ref() != Some(&seen) {
                tracing::warn!(count = unknown.len(), ids = %summary, "device IDs not on this node's topology; not counted");
            } else {
                tracing::debug!(count = unknown.len(), ids = %summary, "device IDs not on this node's topology; not counted");
            }
        }
        last_unknown = Some(seen);
        let changed = last.as_ref().is_none_or(|p| {
            p.report != out.report
                || p.rails != cfg.facts.rails
                || p.domains != now_domains.write
                || p.at.elapsed() >= cfg.heartbeat
        });
        if changed {
            match apply_nrt(&client, &cfg.node, &out.node_resource_topology).await {
                Ok(()) => {
                    metrics.wrote("nrt", true);
                    metrics.set_ready();
                    last = Some(Published {
                        report: out.report.clone(),
                        rails: cfg.facts.rails.clone(),
                        domains: now_domains.write.clone(),
                        at: Instant::now(),
                    });
                }
                Err(e) => {
                    tracing::warn!(error = %e, "NodeResourceTopology not written; retrying");
                    metrics.wrote("nrt", false);
                    metrics.set_not_ready(&format!("NodeResourceTopology not written: {e}"));
                }
            }
        } else {
            metrics.set_ready();
        }
        // The pair and fabric labels change only once held (no flapping); the domain
        // labels follow the facts at once. Nothing is written when the labels are those
        // applied last.
        if let Some(labels) = debounce.observe(wanted(&out.report), Instant::now()) {
            held = Some(labels);
        }
        let Some(held) = &held else { continue };
        let mut labels = held.clone();
        labels.extend(now_domains.write.clone());
        if applied.as_ref() != Some(&labels) {
            let written = apply_labels(&client, &cfg.node, &labels).await;
            metrics.wrote("labels", written.is_ok());
            match written {
                Ok(()) => applied = Some(labels),
                Err(e) => tracing::warn!(error = %e, "labels not written; retrying"),
            }
        }
    }
}
