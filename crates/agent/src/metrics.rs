//! The agent's Prometheus metrics (prometheus-client) and its HTTP endpoints:
//! `/healthz` (the process serves), `/readyz` (the last round read the kubelet and the
//! API server holds the current report) and `/metrics` (OpenMetrics text).
//!
//! Names (counters end in `_total`):
//! * `topoalign_agent_kubelet_reads_total{outcome="ok|error"}`: pod-resources rounds;
//! * `topoalign_agent_writes_total{object="nrt|labels",outcome="ok|error"}`: server-side
//!   applies of the NodeResourceTopology object and of the node labels;
//! * `topoalign_agent_last_published_seconds` (gauge): Unix time of the last NRT write
//!   (the extender's staleness clock starts there);
//! * `topoalign_agent_devices_in_use{kind="gpu|nic"}` and
//!   `topoalign_agent_exclusive_cpus_in_use` (gauges), `topoalign_agent_unknown_device_ids`
//!   (gauge): device IDs the kubelet reports that the topology lacks;
//! * `topoalign_agent_errors_total{component="neighbours"}` (counter): a read of the NICs'
//!   neighbours after start that failed (or did not fit the rail source), the last good
//!   ones kept.

use std::future::Future;
use std::sync::Arc;
use std::sync::Mutex;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use tokio::net::TcpListener;
use topoalign_probes::Probe;

use crate::report::Report;

/// `outcome` label.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct Outcome {
    /// `ok` or `error`.
    pub outcome: &'static str,
}

/// `object` and `outcome` labels.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct Write {
    /// `nrt` or `labels`.
    pub object: &'static str,
    /// `ok` or `error`.
    pub outcome: &'static str,
}

/// `component` label.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct Component {
    /// The part of the agent that failed (`neighbours`).
    pub component: &'static str,
}

/// `kind` label.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct Kind {
    /// `gpu` or `nic`.
    pub kind: &'static str,
}

/// Every metric of the agent and its readiness.
#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
    /// Kubelet reads by outcome.
    pub kubelet_reads: Family<Outcome, Counter>,
    /// API writes by object and outcome.
    pub writes: Family<Write, Counter>,
    /// Unix time of the last NRT write.
    pub last_published: Gauge,
    /// Devices held by pods, by kind.
    pub devices_in_use: Family<Kind, Gauge>,
    /// CPUs held exclusively by pods.
    pub cpus_in_use: Gauge,
    /// Device IDs the topology lacks.
    pub unknown_ids: Gauge,
    /// Errors by component.
    pub errors: Family<Component, Counter>,
    not_ready: Mutex<Option<String>>,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

fn outcome(ok: bool) -> &'static str {
    if ok { "ok" } else { "error" }
}

impl Metrics {
    /// Fresh metrics; not ready until the first round published.
    pub fn new() -> Self {
        let m = Metrics {
            registry: Registry::default(),
            kubelet_reads: Family::default(),
            writes: Family::default(),
            last_published: Gauge::default(),
            devices_in_use: Family::default(),
            cpus_in_use: Gauge::default(),
            unknown_ids: Gauge::default(),
            errors: Family::default(),
            not_ready: Mutex::new(Some("no round finished yet".to_string())),
        };
        let mut r = Registry::default();
        r.register(
            "topoalign_agent_kubelet_reads",
            "Reads of the kubelet's pod-resources API",
            m.kubelet_reads.clone(),
        );
        r.register(
            "topoalign_agent_writes",
            "Server-side applies of the NodeResourceTopology object and node labels",
            m.writes.clone(),
        );
        r.register(
            "topoalign_agent_last_published_seconds",
            "Unix time of the last NodeResourceTopology write",
            m.last_published.clone(),
        );
        r.register(
            "topoalign_agent_devices_in_use",
            "Devices held by pods",
            m.devices_in_use.clone(),
        );
        r.register(
            "topoalign_agent_exclusive_cpus_in_use",
            "CPUs held exclusively by pods (static CPU manager)",
            m.cpus_in_use.clone(),
        );
        r.register(
            "topoalign_agent_unknown_device_ids",
            "Device IDs the kubelet reports that the node's topology lacks",
            m.unknown_ids.clone(),
        );
        r.register(
            "topoalign_agent_errors",
            "Errors, by component",
            m.errors.clone(),
        );
        Metrics { registry: r, ..m }
    }

    /// A kubelet read finished; on success, what it reported.
    pub fn kubelet_read(&self, report: Option<&Report>) {
        self.kubelet_reads
            .get_or_create(&Outcome {
                outcome: outcome(report.is_some()),
            })
            .inc();
        match report {
            Some(r) => {
                let gauge = |kind, n: usize| {
                    self.devices_in_use
                        .get_or_create(&Kind { kind })
                        .set(i64::try_from(n).unwrap_or(i64::MAX));
                };
                gauge("gpu", r.used.gpus.len());
                gauge("nic", r.used.nics.len());
                self.cpus_in_use
                    .set(i64::try_from(r.used.cpus.len()).unwrap_or(i64::MAX));
                self.unknown_ids
                    .set(i64::try_from(r.unknown_ids.len()).unwrap_or(i64::MAX));
            }
            None => self.set_not_ready("the kubelet's pod-resources API did not answer"),
        }
    }

    /// An API write finished (`object`: `nrt` or `labels`).
    pub fn wrote(&self, object: &'static str, ok: bool) {
        self.writes
            .get_or_create(&Write {
                object,
                outcome: outcome(ok),
            })
            .inc();
        if object == "nrt" && ok {
            let now = jiff::Timestamp::now().as_second();
            self.last_published.set(now);
        }
    }

    /// Counts one error of `component`.
    pub fn error(&self, component: &'static str) {
        self.errors.get_or_create(&Component { component }).inc();
    }

    /// The round read the kubelet and the API server holds its report.
    pub fn set_ready(&self) {
        if let Ok(mut n) = self.not_ready.lock() {
            *n = None;
        }
    }

    /// Not ready, and why.
    pub fn set_not_ready(&self, why: &str) {
        if let Ok(mut n) = self.not_ready.lock() {
            *n = Some(why.to_string());
        }
    }

    /// Why the agent is not ready (`None`: ready).
    pub fn not_ready(&self) -> Option<String> {
        self.not_ready
            .lock()
            .map_or_else(|_| Some("state lock poisoned".to_string()), |n| n.clone())
    }

    /// The OpenMetrics text.
    pub fn encode(&self) -> String {
        topoalign_probes::encode(&self.registry)
    }
}

impl Probe for Metrics {
    fn not_ready(&self) -> Vec<String> {
        Metrics::not_ready(self).into_iter().collect()
    }

    fn metrics(&self) -> String {
        self.encode()
    }
}

/// Serves `/healthz`, `/readyz` and `/metrics` on `listener` until `shutdown` completes.
pub(crate) async fn serve(
    listener: TcpListener,
    metrics: Arc<Metrics>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    topoalign_probes::serve(listener, metrics, shutdown).await
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    // The HTTP side is topoalign_probes' and tested there (and against the running agent
    // in the e2e `podresources` scenario); here, what the agent tells its probes.
    #[test]
    fn probes_report_rounds_and_readiness() {
        let m = Metrics::new();
        let why = |m: &Metrics| Probe::not_ready(m).join("; ");
        assert!(why(&m).contains("no round finished yet"), "{}", why(&m));
        m.kubelet_read(None);
        assert!(
            why(&m).contains("pod-resources API did not answer"),
            "{}",
            why(&m)
        );
        m.wrote("nrt", true);
        m.wrote("labels", false);
        m.error("neighbours");
        m.set_ready();
        assert!(Probe::not_ready(&m).is_empty());
        let text = Probe::metrics(&m);
        for want in [
            "topoalign_agent_kubelet_reads_total{outcome=\"error\"} 1",
            "topoalign_agent_writes_total{object=\"nrt\",outcome=\"ok\"} 1",
            "topoalign_agent_writes_total{object=\"labels\",outcome=\"error\"} 1",
            "topoalign_agent_last_published_seconds ",
            "topoalign_agent_errors_total{component=\"neighbours\"} 1",
        ] {
            assert!(text.contains(want), "{want} missing in\n{text}");
        }
    }
}
