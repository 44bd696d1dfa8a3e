//! The driver's Prometheus metrics (prometheus-client), served on `/metrics`.
//!
//! Names (counters end in `_total`):
//! * `topoalign_driver_resourceslices` (gauge): slices of this node's pool the API server
//!   holds now; `topoalign_driver_devices` (gauge): devices in them;
//! * `topoalign_driver_pool_generation` (gauge): the pool generation last written or
//!   confirmed;
//! * `topoalign_driver_pair_devices_enabled` (gauge): 1 while pair devices are published
//!   (the API server keeps ResourceSlice counters), 0 in plain-only mode or before the
//!   first readback;
//! * `topoalign_driver_publishes_total` (counter): pool generations written (one per
//!   change of the published pool);
//! * `topoalign_driver_slice_writes_total{op="apply|delete"}` (counter): ResourceSlice writes;
//! * `topoalign_driver_publish_errors_total` (counter): publishing rounds that failed
//!   (retried with backoff);
//! * `topoalign_driver_errors_total{component="publish|watch|discover|neighbours|plugin|labels"}`
//!   (counter; `neighbours`: a rescan's read of the NICs' neighbours that failed, the last
//!   good ones kept; `labels`: a failed round of `--write-domain-labels`, retried with
//!   backoff);
//! * the kubelet plugin's own, registered with [`Metrics::with_plugin`]:
//!   `topoalign_plugin_prepares_total`, `topoalign_plugin_unprepares_total`,
//!   `topoalign_plugin_errors_total`, `topoalign_plugin_prepare_seconds` and
//!   `topoalign_plugin_unprepare_seconds` (histograms).

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

/// Label set with one `op` label (`apply` or `delete`).
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct OpLabel {
    /// `apply` or `delete`.
    pub op: &'static str,
}

/// Label set with one `component` label.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ComponentLabel {
    /// The part of the driver that failed.
    pub component: &'static str,
}

/// Every metric of the driver, and the registry that encodes them.
#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
    /// Slices held by the API server now.
    pub resourceslices: Gauge,
    /// Devices in them.
    pub devices: Gauge,
    /// The pool generation.
    pub pool_generation: Gauge,
    /// 1 while pair devices are published, else 0.
    pub pair_devices_enabled: Gauge,
    /// Pool generations written.
    pub publishes: Counter,
    /// Slice writes by operation.
    pub slice_writes: Family<OpLabel, Counter>,
    /// Failed publishing rounds.
    pub publish_errors: Counter,
    /// Errors by component.
    pub errors: Family<ComponentLabel, Counter>,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    /// A fresh set of metrics.
    pub fn new() -> Self {
        let mut m = Metrics {
            registry: Registry::default(),
            resourceslices: Gauge::default(),
            devices: Gauge::default(),
            pool_generation: Gauge::default(),
            pair_devices_enabled: Gauge::default(),
            publishes: Counter::default(),
            slice_writes: Family::default(),
            publish_errors: Counter::default(),
            errors: Family::default(),
        };
        let mut registry = Registry::default();
        registry.register(
            "topoalign_driver_resourceslices",
            "ResourceSlices of this node's pool held by the API server",
            m.resourceslices.clone(),
        );
        registry.register(
            "topoalign_driver_devices",
            "Devices published in this node's pool",
            m.devices.clone(),
        );
        registry.register(
            "topoalign_driver_pool_generation",
            "Generation of this node's pool last written or confirmed",
            m.pool_generation.clone(),
        );
        registry.register(
            "topoalign_driver_pair_devices_enabled",
            "1 while pair devices are published (the API server keeps ResourceSlice counters), 0 while only plain GPUs and NICs are",
            m.pair_devices_enabled.clone(),
        );
        registry.register(
            "topoalign_driver_publishes",
            "Pool generations written (one per change of the published pool)",
            m.publishes.clone(),
        );
        registry.register(
            "topoalign_driver_slice_writes",
            "ResourceSlice writes, by operation",
            m.slice_writes.clone(),
        );
        registry.register(
            "topoalign_driver_publish_errors",
            "Publishing rounds that failed and were retried",
            m.publish_errors.clone(),
        );
        registry.register(
            "topoalign_driver_errors",
            "Errors, by component",
            m.errors.clone(),
        );
        m.registry = registry;
        m
    }

    /// Counts one error of `component`.
    pub fn error(&self, component: &'static str) {
        self.errors
            .get_or_create(&ComponentLabel { component })
            .inc();
    }

    /// Also exposes the kubelet plugin's metrics (prepares, unprepares, latencies).
    pub fn with_plugin(mut self, plugin: &topoalign_kubelet_plugin::Metrics) -> Self {
        plugin.register(&mut self.registry);
        self
    }

    /// The metrics in the Prometheus text exposition format.
    pub fn encode(&self) -> String {
        topoalign_probes::encode(&self.registry)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exposition_names_every_metric() {
        let plugin = topoalign_kubelet_plugin::Metrics::default();
        let m = Metrics::new().with_plugin(&plugin);
        plugin.prepares.inc();
        plugin.prepare_seconds.observe(0.003);
        m.error("watch");
        m.slice_writes
            .get_or_create(&OpLabel { op: "apply" })
            .inc_by(3);
        m.resourceslices.set(4);
        m.pool_generation.set(7);
        let text = m.encode();
        for line in [
            "topoalign_driver_resourceslices 4",
            "topoalign_driver_pool_generation 7",
            "topoalign_driver_devices 0",
            "topoalign_driver_pair_devices_enabled 0",
            "topoalign_driver_publishes_total 0",
            "topoalign_driver_slice_writes_total{op=\"apply\"} 3",
            "topoalign_driver_errors_total{component=\"watch\"} 1",
            "topoalign_driver_publish_errors_total 0",
            "topoalign_plugin_prepares_total 1",
            "topoalign_plugin_prepare_seconds_count 1",
            "topoalign_plugin_unprepares_total 0",
            "# EOF",
        ] {
            assert!(text.contains(line), "{line} missing from\n{text}");
        }
    }
}
