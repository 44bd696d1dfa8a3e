//! The webhook's metrics (`/metrics`, prefix `topoalign_webhook_`): admissions by
//! outcome and their latency inside the webhook, requests refused before a review was
//! read, warnings given, certificate re-reads, and the server kit's connection counters.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::{ConstCounter, Counter};
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::{ConstGauge, Gauge};
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;
use topoalign_probes::ConnStats;

type Labels = Vec<(String, String)>;

/// Every metric, registered in one registry.
#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
    /// Reviews answered, by outcome (`rewritten`, `untouched`, `declined`).
    pub admissions: Family<Labels, Counter>,
    /// Seconds from a review's body read to its answer, inside the webhook.
    pub duration: Histogram,
    /// Requests answered without a review, by reason (`not_json`, `not_review`,
    /// `too_large`, `body_timeout`, `body_read`).
    pub bad_requests: Family<Labels, Counter>,
    /// Warnings put in responses.
    pub warnings: Counter,
    /// Certificate re-reads that took a new pair (`reloaded`) or failed (`failed`).
    pub tls_reloads: Family<Labels, Counter>,
    /// When the served certificate was loaded (Unix seconds).
    pub certificate_loaded: Gauge,
}

/// The server kit's counters, read on each scrape.
#[derive(Debug)]
struct Conns(Arc<ConnStats>);

impl Collector for Conns {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let s = &self.0;
        let open =
            ConstGauge::new(i64::try_from(s.open.load(Ordering::Relaxed)).unwrap_or(i64::MAX));
        open.encode(encoder.encode_descriptor(
            "connections_open",
            "Connections open now",
            None,
            open.metric_type(),
        )?)?;
        for (name, help, v) in [
            (
                "connections_refused",
                "Connections refused because the connection cap was reached",
                &s.refused,
            ),
            (
                "connections_timed_out",
                "Connections closed by the header-read, handshake or idle timeout",
                &s.timed_out,
            ),
            (
                "handshakes_failed",
                "Connections whose TLS handshake failed",
                &s.handshakes_failed,
            ),
        ] {
            let c = ConstCounter::new(v.load(Ordering::Relaxed));
            c.encode(encoder.encode_descriptor(name, help, None, c.metric_type())?)?;
        }
        Ok(())
    }
}

impl Metrics {
    /// Creates and registers every metric, with the kit's counters `conns`.
    pub fn new(conns: Arc<ConnStats>) -> Self {
        let mut root = Registry::default();
        let registry = root.sub_registry_with_prefix("topoalign_webhook");
        let admissions = Family::<Labels, Counter>::default();
        // 10 µs to ~0.33 s.
        let duration = Histogram::new(exponential_buckets(0.000_01, 2.0, 16));
        let bad_requests = Family::<Labels, Counter>::default();
        let warnings = Counter::default();
        let tls_reloads = Family::<Labels, Counter>::default();
        let certificate_loaded = Gauge::default();
        registry.register(
            "admissions",
            "Reviews answered, by outcome (rewritten, untouched, declined)",
            admissions.clone(),
        );
        registry.register(
            "admission_duration_seconds",
            "Seconds from a review's body read to its answer, inside the webhook",
            duration.clone(),
        );
        registry.register(
            "bad_requests",
            "Requests answered without a review, by reason (not_json, not_review, too_large, body_timeout, body_read)",
            bad_requests.clone(),
        );
        registry.register("warnings", "Warnings put in responses", warnings.clone());
        registry.register(
            "tls_reloads",
            "Certificate re-reads that took a new pair (reloaded) or failed (failed)",
            tls_reloads.clone(),
        );
        registry.register(
            "certificate_loaded_timestamp_seconds",
            "When the served certificate was loaded (Unix seconds)",
            certificate_loaded.clone(),
        );
        registry.register_collector(Box::new(Conns(conns)));
        Metrics {
            registry: root,
            admissions,
            duration,
            bad_requests,
            warnings,
            tls_reloads,
            certificate_loaded,
        }
    }

    /// Counts one value of a labelled family.
    pub(crate) fn count(family: &Family<Labels, Counter>, label: &str, value: &str) {
        family
            .get_or_create(&vec![(label.to_string(), value.to_string())])
            .inc();
    }

    /// The OpenMetrics text.
    pub fn render(&self) -> String {
        topoalign_probes::encode(&self.registry)
    }
}
