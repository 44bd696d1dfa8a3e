//! Prometheus metrics of the extender (`/metrics`).

use std::sync::{Arc, RwLock};
use std::time::SystemTime;

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

use crate::dra::shared::DraShared;
use crate::plugin::state::{ClusterState, NodeView};

/// Label set: name/value pairs.
pub(crate) type Labels = Vec<(String, String)>;

fn histogram() -> Histogram {
    Histogram::new(exponential_buckets(0.000_05, 2.0, 16))
}

/// Every metric, registered in one registry.
#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
    /// Calls by verb and HTTP status.
    pub requests: Family<Labels, Counter>,
    /// Seconds per call by verb.
    pub latency: Family<Labels, Histogram, fn() -> Histogram>,
    /// Nodes filtered out, by reason (`topology_manager`, `pair_class`, `placement`).
    pub filtered: Family<Labels, Counter>,
    /// Nodes passed or scored without judgement, by reason (`stale`, `unknown_node`, …).
    pub neutral: Family<Labels, Counter>,
    /// Verdict cache hits.
    pub cache_hits: Counter,
    /// Verdict cache misses.
    pub cache_misses: Counter,
    /// Nodes in the state by status (`known`, `broken`, `stale`).
    pub nodes: Family<Labels, Gauge>,
    /// Assumed allocations held.
    pub assumed: Gauge,
    /// DRA-path node verdicts by verb and outcome (`fit`, `reject`, `dra_no_slices`,
    /// `dra_budget`, `dra_error`, `dra_claim_unseen`, `dra_mixed`, `dra_bad_pod`).
    pub dra_verdicts: Family<Labels, Counter>,
    /// DRA state: nodes with slices, claims, devices held (by `what`).
    pub dra_state: Family<Labels, Gauge>,
    /// Calls whose work budget ran out (some nodes passed neutral), by verb.
    pub budget_spent: Family<Labels, Counter>,
    /// Calls refused before judging, by reason (`busy`, `body_too_large`,
    /// `body_timeout`, `body_read`).
    pub refused: Family<Labels, Counter>,
    /// Scheduler calls in flight.
    pub in_flight: Gauge,
    /// Verdicts computed by background warming.
    pub warmed: Counter,
    /// Pods with GPU–NIC pairs by GPUDirect RDMA on every GPU (`crate::alignment`).
    pub alignment_pods: Family<Labels, Gauge>,
    /// Their pairs by class (`crate::alignment`).
    pub alignment_pairs: Family<Labels, Gauge>,
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics::new()
    }
}

impl Metrics {
    /// Creates and registers every metric under the `topoalign_extender` prefix.
    pub fn new() -> Self {
        let mut registry = Registry::with_prefix("topoalign_extender");
        let requests = Family::<Labels, Counter>::default();
        let latency: Family<Labels, Histogram, fn() -> Histogram> =
            Family::new_with_constructor(histogram);
        let filtered = Family::<Labels, Counter>::default();
        let neutral = Family::<Labels, Counter>::default();
        let cache_hits = Counter::default();
        let cache_misses = Counter::default();
        let nodes = Family::<Labels, Gauge>::default();
        let assumed = Gauge::default();
        let dra_verdicts = Family::<Labels, Counter>::default();
        let dra_state = Family::<Labels, Gauge>::default();
        let budget_spent = Family::<Labels, Counter>::default();
        let refused = Family::<Labels, Counter>::default();
        let in_flight = Gauge::default();
        let warmed = Counter::default();
        let alignment_pods = Family::<Labels, Gauge>::default();
        let alignment_pairs = Family::<Labels, Gauge>::default();
        registry.register(
            "alignment_pods",
            "Pods with GPU-NIC pairs from allocated claims (any driver), by whether NCCL uses GPUDirect RDMA on every GPU (every_gpu, not_every_gpu, unknown)",
            alignment_pods.clone(),
        );
        registry.register(
            "alignment_pairs",
            "GPU-NIC pairs of those pods by class (PIX, PXB, PHB, NODE, SYS, ? unknown)",
            alignment_pairs.clone(),
        );
        registry.register(
            "budget_spent",
            "Calls whose work budget ran out before every node was judged (those passed with a neutral score), by verb",
            budget_spent.clone(),
        );
        registry.register(
            "refused",
            "Calls refused before judging, by reason (busy, body_too_large, body_timeout, body_read)",
            refused.clone(),
        );
        registry.register("in_flight", "Scheduler calls in flight", in_flight.clone());
        registry.register(
            "warmed_verdicts",
            "Verdicts computed in the background for nodes that changed",
            warmed.clone(),
        );
        registry.register(
            "requests",
            "Extender calls by verb and HTTP status",
            requests.clone(),
        );
        registry.register(
            "request_seconds",
            "Seconds per extender call",
            latency.clone(),
        );
        registry.register(
            "nodes_filtered",
            "Nodes filtered out, by reason",
            filtered.clone(),
        );
        registry.register(
            "nodes_neutral",
            "Nodes passed or scored neutral without judgement (no, stale or broken data), by reason",
            neutral.clone(),
        );
        registry.register("cache_hits", "Verdict cache hits", cache_hits.clone());
        registry.register("cache_misses", "Verdict cache misses", cache_misses.clone());
        registry.register(
            "state_nodes",
            "Nodes in the cluster state, by status",
            nodes.clone(),
        );
        registry.register(
            "assumed_allocations",
            "Allocations assumed for bound pods",
            assumed.clone(),
        );
        registry.register(
            "dra_verdicts",
            "DRA-path node verdicts (pods with ResourceClaims of topoalign.dev), by verb and outcome",
            dra_verdicts.clone(),
        );
        registry.register(
            "dra_state",
            "DRA state size: nodes with topoalign.dev slices, claims, devices held",
            dra_state.clone(),
        );
        Metrics {
            registry,
            requests,
            latency,
            filtered,
            neutral,
            cache_hits,
            cache_misses,
            nodes,
            assumed,
            dra_verdicts,
            dra_state,
            budget_spent,
            refused,
            in_flight,
            warmed,
            alignment_pods,
            alignment_pairs,
        }
    }

    /// The text exposition.
    pub fn render(&self) -> String {
        topoalign_probes::encode(&self.registry)
    }
}

/// One label pair.
pub fn label(name: &str, value: &str) -> Labels {
    vec![(name.to_string(), value.to_string())]
}

/// The state gauges and what they count: the device-plugin wing's nodes (known, broken,
/// stale) and assumed pods, the DRA wing's nodes, claims and held devices.
#[derive(Debug, Clone)]
pub(crate) struct Gauges {
    /// Where the gauges are.
    pub metrics: Arc<Metrics>,
    /// The device-plugin wing's node state.
    pub state: Arc<RwLock<ClusterState>>,
    /// The DRA wing's state.
    pub dra: Arc<DraShared>,
}

impl Gauges {
    /// Refreshes the gauges.
    pub(crate) fn update(&self, now: SystemTime) {
        let state = self.state.read().unwrap_or_else(|p| p.into_inner());
        let (mut known, mut broken, mut stale) = (0i64, 0i64, 0i64);
        for (_, v) in state.nodes() {
            match v {
                NodeView::Known(e) if state.is_stale(e, now) => stale += 1,
                NodeView::Known(_) => known += 1,
                NodeView::Broken(_) => broken += 1,
            }
        }
        let m = &self.metrics;
        m.nodes.get_or_create(&label("status", "known")).set(known);
        m.nodes
            .get_or_create(&label("status", "broken"))
            .set(broken);
        m.nodes.get_or_create(&label("status", "stale")).set(stale);
        m.assumed.set(state.assumed_count() as i64);
        drop(state);
        let dra = self.dra.read();
        for (what, n) in [
            ("nodes", dra.node_count()),
            ("claims", dra.claim_count()),
            ("held_devices", dra.held_count()),
        ] {
            m.dra_state
                .get_or_create(&label("what", what))
                .set(n as i64);
        }
    }
}
