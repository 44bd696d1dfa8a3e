//! The NICs' neighbours followed while the agent runs, by the one follower of both node
//! agents (`topoalign_node_facts::Follower`): the neighbour sources (`--lldp-from`,
//! `--ib-sysfs`, `--ibnetdiscover`) are read again every `--rescan-interval`, so that a recabled NIC's rail (in the NodeResourceTopology object)
//! and the node's leaf label follow it without a restart. A read that fails after start
//! keeps the last good neighbours (a warning names the source, and
//! `topoalign_agent_errors_total{component="neighbours"}` counts it); at start a bad source
//! stops the agent, as every bad input does.

use topoalign_node_facts::{Follower, NodeFacts, REREAD_COMPONENT, Reread, Wiring};
use topoalign_topology::Topology;

use crate::metrics::Metrics;

/// The `component` label of the agent's errors metric for a failed read of the
/// neighbours (the driver's word for the same failure).
pub(crate) const COMPONENT: &str = REREAD_COMPONENT;

/// Reads the neighbours of `topo` again on a blocking thread (it reads files and may run
/// `lldpctl`), and returns `facts` with them when they differ from those `facts` hold
/// ([`follow`]).
pub(crate) async fn rescan(
    follower: &Follower,
    facts: &NodeFacts,
    topo: &Topology,
    metrics: &Metrics,
) -> Option<NodeFacts> {
    let (reader, on) = (follower.clone(), topo.clone());
    let read = move || reader.read(&on).map_err(|e| e.to_string());
    // A read that panicked on its thread fails as any failed read.
    let read = match tokio::task::spawn_blocking(read).await {
        Ok(read) => read,
        Err(e) => Err(e.to_string()),
    };
    follow(follower, facts, topo, read, metrics)
}

/// What a read brings to `facts` (on `topo`): the facts with the neighbours read, the
/// rails resolved on them and the leaf derived again, when the neighbours differ from
/// those `facts` hold; `None` when they are the same, or when the read failed or the rail
/// source does not fit the new neighbours (a warning, counted in `metrics`: the last good
/// neighbours stay, and the next read tries again).
pub(crate) fn follow(
    follower: &Follower,
    facts: &NodeFacts,
    topo: &Topology,
    read: Result<Option<Wiring>, impl std::fmt::Display>,
    metrics: &Metrics,
) -> Option<NodeFacts> {
    let wiring = match follower.reread(facts, read) {
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
    match follower.refresh(facts, topo, Some(wiring)) {
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

#[cfg(test)]
#[path = "rescan_tests.rs"]
mod tests;
