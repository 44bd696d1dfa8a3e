//! Counters and latency histograms of prepare and unprepare, as prometheus-client types:
//! the driver registers them in its registry ([`Metrics::register`]); they are cheap
//! `Arc` clones, so the plugin and the exporter share them.

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

/// The plugin's metrics.
#[derive(Debug, Clone)]
pub struct Metrics {
    /// Claims prepared (first preparations and idempotent repeats).
    pub prepares: Counter,
    /// Claims unprepared.
    pub unprepares: Counter,
    /// Claims whose prepare or unprepare failed.
    pub errors: Counter,
    /// Seconds per claim prepare, API read included.
    pub prepare_seconds: Histogram,
    /// Seconds per claim unprepare.
    pub unprepare_seconds: Histogram,
    /// 1 while this node has NVIDIA GPUs but no `nvidia.com/gpu` CDI spec (pods get
    /// device nodes only, CUDA finds no driver), else 0.
    pub nvidia_cdi_spec_missing: Gauge,
}

impl Default for Metrics {
    fn default() -> Self {
        // 100 µs … ~3.3 s.
        let buckets = || exponential_buckets(0.0001, 2.0, 16);
        Self {
            prepares: Counter::default(),
            unprepares: Counter::default(),
            errors: Counter::default(),
            prepare_seconds: Histogram::new(buckets()),
            unprepare_seconds: Histogram::new(buckets()),
            nvidia_cdi_spec_missing: Gauge::default(),
        }
    }
}

impl Metrics {
    /// Registers every metric under the names `topoalign_plugin_*`.
    pub fn register(&self, registry: &mut Registry) {
        registry.register(
            "topoalign_plugin_prepares",
            "ResourceClaims prepared by the kubelet plugin",
            self.prepares.clone(),
        );
        registry.register(
            "topoalign_plugin_unprepares",
            "ResourceClaims unprepared by the kubelet plugin",
            self.unprepares.clone(),
        );
        registry.register(
            "topoalign_plugin_errors",
            "ResourceClaim prepares or unprepares that failed",
            self.errors.clone(),
        );
        registry.register(
            "topoalign_plugin_prepare_seconds",
            "Latency of one ResourceClaim prepare",
            self.prepare_seconds.clone(),
        );
        registry.register(
            "topoalign_plugin_unprepare_seconds",
            "Latency of one ResourceClaim unprepare",
            self.unprepare_seconds.clone(),
        );
        registry.register(
            "topoalign_plugin_nvidia_cdi_spec_missing",
            "1 while this node has NVIDIA GPUs but no nvidia.com/gpu CDI spec (generate it with nvidia-ctk cdi generate)",
            self.nvidia_cdi_spec_missing.clone(),
        );
    }
}
