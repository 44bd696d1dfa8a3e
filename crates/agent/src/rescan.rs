//! The NICs' neighbours followed while the agent runs: the neighbour sources
//! (`--lldp-from`, `--ib-sysfs`, `--ibnetdiscover`) are read again every
//! `--rescan-interval`, so that a recabled NIC's rail (in the NodeResourceTopology object)
//! and the node's leaf label follow it without a restart. A read that fails after start
//! keeps the last good neighbours (a warning names the source, and
//! `topoalign_agent_errors_total{component="neighbours"}` counts it); at start a bad source
//! stops the agent, as every bad input does.

use std::time::Duration;

use topoalign_fabric::RailSource;
use topoalign_node_facts::{
    NodeFacts, REREAD_COMPONENT, Reread, Wiring, WiringFlags, read_wiring, reread,
};
use topoalign_topology::Topology;

use crate::metrics::Metrics;

/// The `component` label of the agent's errors metric for a failed read of the
/// neighbours (the driver's word for the same failure).
pub(crate) const COMPONENT: &str = REREAD_COMPONENT;

/// Where the NICs' neighbours are read again, how often, and the rail source resolved
/// again on new neighbours.
#[derive(Debug, Clone)]
pub struct Rewire {
    /// The neighbour sources (at least one given).
    pub flags: WiringFlags,
    /// The rail source of `--rails`, as read at start.
    pub rails: Option<RailSource>,
    /// Time between reads (`--rescan-interval`).
    pub interval: Duration,
}

impl Rewire {
    /// Follows the sources `flags` every `interval`, resolving `rails` again on new
    /// neighbours; `None` without a neighbour source (nothing to follow).
    pub fn new(flags: WiringFlags, rails: Option<RailSource>, interval: Duration) -> Option<Self> {
        flags.any().then_some(Rewire {
            flags,
            rails,
            interval,
        })
    }

    /// Reads the neighbours of `topo` again on a blocking thread (it reads files and may
    /// run `lldpctl`), and returns `facts` with them when they differ from those `facts`
    /// hold ([`Rewire::follow`]).
    pub(crate) async fn rescan(
        &self,
        facts: &NodeFacts,
        topo: &Topology,
        metrics: &Metrics,
    ) -> Option<NodeFacts> {
        let (flags, on) = (self.flags.clone(), topo.clone());
        let read = move || read_wiring(&flags, &on).map_err(|e| e.to_string());
        // A read that panicked on its thread fails as any failed read.
        let read = match tokio::task::spawn_blocking(read).await {
            Ok(read) => read,
            Err(e) => Err(e.to_string()),
        };
        self.follow(facts, topo, read, metrics)
    }

    /// What a read brings to `facts` (on `topo`): the facts with the neighbours read, the
    /// rails resolved on them and the leaf derived again, when the neighbours differ
    /// from those `facts` hold; `None` when they are the same, or when the read failed or
    /// the rail source does not fit the new neighbours (a warning, counted in `metrics`:
    /// the last good neighbours stay, and the next read tries again).
    pub(crate) fn follow(
        &self,
        facts: &NodeFacts,
        topo: &Topology,
        read: Result<Option<Wiring>, impl std::fmt::Display>,
        metrics: &Metrics,
    ) -> Option<NodeFacts> {
        let last = facts.wiring.as_ref().map(|w| &w.neighbours);
        let wiring = match reread(read, last) {
            Reread::Changed(w) => w,
            Reread::Same => return None,
            Reread::Failed => {
                metrics.error(COMPONENT);
                return None;
            }
        };
        for warning in &wiring.warnings {
            tracing::warn!(warning = %warning, "NIC neighbours");
        }
        match facts
            .clone()
            .with_wiring(topo, Some(wiring), self.rails.as_ref())
        {
            Ok(new) => {
                tracing::info!("the NICs' neighbours changed; republishing");
                Some(new)
            }
            Err(e) => {
                tracing::warn!(error = %e, "the NICs' new neighbours do not fit the rail source; keeping the last good ones");
                metrics.error(COMPONENT);
                None
            }
        }
    }
}

#[cfg(test)]
#[path = "rewire_tests.rs"]
mod tests;
