//! The agent loop and its one-shot form.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use serde::Serialize;
use serde_json::Value;
use topoalign_tm::Settings;
use topoalign_topology::Topology;

use crate::labels::{Debouncer, wanted};
use crate::nrt::nrt_object;
use crate::podresources::{PodResourcesClient, PodResourcesError};
use crate::publish::{PublishError, apply_labels, apply_nrt};
use crate::report::{Report, build};

/// How the agent runs.
#[derive(Debug, Clone)]
pub struct Config {
    /// The node's name (the NRT object's name).
    pub node: String,
    /// The node's topology.
    pub topology: Topology,
    /// The kubelet's Topology Manager settings.
    pub settings: Settings,
    /// The pod-resources socket.
    pub socket: PathBuf,
    /// Seconds between kubelet reads.
    pub interval: Duration,
    /// Publish at least this often even without change (the extender's staleness clock).
    pub heartbeat: Duration,
    /// How long a label change must hold before it is written.
    pub label_hold: Duration,
    /// Timeout of each kubelet call.
    pub timeout: Duration,
}

/// Errors of the agent.
#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    /// Reading the kubelet failed.
    #[error(transparent)]
    Kubelet(#[from] PodResourcesError),
    /// Writing to the API server failed.
    #[error(transparent)]
    Publish(#[from] PublishError),
}

/// What one round would publish (the `--once` output).
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Output {
    /// The kubelet's answers.
    pub kubelet: crate::podresources::KubeletView,
    /// The derived report.
    pub report: Report,
    /// The NodeResourceTopology object.
    pub node_resource_topology: Value,
    /// The node labels.
    pub labels: BTreeMap<String, String>,
}

fn now_rfc3339() -> String {
    jiff::Timestamp::now()
        .round(jiff::Unit::Second)
        .map_or_else(|_| jiff::Timestamp::now().to_string(), |t| t.to_string())
}

/// Reads the kubelet once and builds what would be published.
pub async fn once(cfg: &Config) -> Result<Output, AgentError> {
    let mut client = PodResourcesClient::connect(&cfg.socket, cfg.timeout).await?;
    let view = client.snapshot().await?;
    Ok(output(cfg, view, &now_rfc3339()))
}

/// Builds the output for a kubelet view at a time.
pub fn output(cfg: &Config, view: crate::podresources::KubeletView, at: &str) -> Output {
    let report = build(&cfg.topology, &view);
    let object = nrt_object(&cfg.node, &cfg.topology, &report, &cfg.settings, at);
    let labels = wanted(&report);
    Output {
        kubelet: view,
        report,
        node_resource_topology: object,
        labels,
    }
}

/// Runs until `shutdown` resolves: read, publish on change or heartbeat, label with
/// hysteresis. Kubelet and API errors are logged and retried next interval.
pub async fn run(
    cfg: Config,
    client: kube::Client,
    shutdown: impl std::future::Future<Output = ()>,
) -> Result<(), AgentError> {
    let mut shutdown = std::pin::pin!(shutdown);
    let mut debounce = Debouncer::new(cfg.label_hold);
    let mut last: Option<(Report, Instant)> = None;
    let mut kubelet: Option<PodResourcesClient> = None;
    let mut tick = tokio::time::interval(cfg.interval);
    loop {
        tokio::select! {
            _ = &mut shutdown => return Ok(()),
            _ = tick.tick() => {}
        }
        if kubelet.is_none() {
            match PodResourcesClient::connect(&cfg.socket, cfg.timeout).await {
                Ok(c) => kubelet = Some(c),
                Err(e) => {
                    tracing::warn!(error = %e, "kubelet not reachable; retrying");
                    continue;
                }
            }
        }
        let Some(k) = kubelet.as_mut() else { continue };
        let view = match k.snapshot().await {
            Ok(v) => v,
            Err(e) => {
                tracing::warn!(error = %e, "kubelet read failed; reconnecting");
                kubelet = None;
                continue;
            }
        };
        let out = output(&cfg, view, &now_rfc3339());
        if !out.report.unknown_ids.is_empty() {
            tracing::warn!(ids = ?out.report.unknown_ids, "device IDs not on this node's topology; not counted");
        }
        let changed = last
            .as_ref()
            .is_none_or(|(r, at)| *r != out.report || at.elapsed() >= cfg.heartbeat);
        if changed {
            match apply_nrt(&client, &cfg.node, &out.node_resource_topology).await {
                Ok(()) => last = Some((out.report.clone(), Instant::now())),
                Err(e) => tracing::warn!(error = %e, "NodeResourceTopology not written; retrying"),
            }
        }
        if let Some(labels) = debounce.observe(out.labels, Instant::now())
            && let Err(e) = apply_labels(&client, &cfg.node, &labels).await
        {
            tracing::warn!(error = %e, "labels not written; retrying");
            debounce.reset();
        }
    }
}
