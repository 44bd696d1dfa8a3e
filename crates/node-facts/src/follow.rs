//! What both node agents follow after start (the device-plugin agent and the DRA
//! driver, one policy): the NICs' neighbours (`--lldp-from`, `--ib-sysfs`,
//! `--ibnetdiscover`) are read again, and the rail source resolved again on them, so a
//! recabled NIC's rail and the node's leaf follow it without a restart. A read that
//! fails after start keeps the last good neighbours (a warning names the source; the
//! caller counts it under [`REREAD_COMPONENT`]), and neighbours equal to the last good
//! ones bring nothing. At start a bad source stops the agent, as every bad input does.

use std::fmt::Display;

use topoalign_fabric::RailSource;
use topoalign_topology::{Neighbours, Topology};

use crate::facts::{FactsError, NodeFacts, Wiring, WiringFlags, read_wiring};

/// The `component` label the agent's and the driver's error counters give a failed
/// re-read of the NICs' neighbours.
pub const REREAD_COMPONENT: &str = "neighbours";

/// What a read of the neighbours after start brings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reread {
    /// The same neighbours as the last good ones (or no source to read).
    Same,
    /// New neighbours.
    Changed(Wiring),
    /// The read failed (logged): the last good neighbours stay.
    Failed,
}

/// Where a node agent reads its NICs' neighbours again, and the rail source it resolves
/// again on them (and on a rediscovered topology): the one follower of both agents.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Follower {
    flags: WiringFlags,
    rails: Option<RailSource>,
}

impl Follower {
    /// Follows the neighbour sources `flags` and the rail source `rails` (`--rails`, as
    /// read at start: [`crate::read_rail_source`]).
    pub fn new(flags: WiringFlags, rails: Option<RailSource>) -> Self {
        Follower { flags, rails }
    }

    /// Whether the neighbours are read again: a neighbour source is given.
    pub fn rereads(&self) -> bool {
        self.flags.any()
    }

    /// Reads the NICs' neighbours of `topo` again (`None` without a source). Blocking:
    /// it reads files and may run `lldpctl`, so a caller on a runtime runs it on a
    /// blocking thread.
    pub fn read(&self, topo: &Topology) -> Result<Option<Wiring>, FactsError> {
        read_wiring(&self.flags, topo)
    }

    /// What `read` (a [`Follower::read`] after start) brings against the last good
    /// neighbours, those `facts` hold.
    pub fn reread<E: Display>(&self, facts: &NodeFacts, read: Result<Option<Wiring>, E>) -> Reread {
        reread(read, facts.wiring.as_ref().map(|w| &w.neighbours))
    }

    /// `facts` on `topo` with the neighbours `news` (`None`: those the facts hold): the
    /// rails resolved again and the leaf derived again; the clique and the operator's
    /// labels kept. An error when the rail source does not fit (nothing changes then).
    pub fn refresh(
        &self,
        facts: &NodeFacts,
        topo: &Topology,
        news: Option<Wiring>,
    ) -> Result<NodeFacts, FactsError> {
        let wiring = news.or_else(|| facts.wiring.clone());
        facts.clone().with_wiring(topo, wiring, self.rails.as_ref())
    }
}

/// Judges `read` against the `last` good neighbours (`None`: none known).
fn reread<E: Display>(read: Result<Option<Wiring>, E>, last: Option<&Neighbours>) -> Reread {
    match read {
        Ok(None) => Reread::Same,
        Ok(Some(w)) if Some(&w.neighbours) == last => Reread::Same,
        Ok(Some(w)) => Reread::Changed(w),
        Err(e) => {
            tracing::warn!(error = %e, "reading the NICs' neighbours again failed; keeping the last good ones");
            Reread::Failed
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_new_neighbours_count_and_a_failure_keeps_the_last() {
        let other = Neighbours {
            sources: vec!["lldpctl -f json".to_string()],
            ..Neighbours::default()
        };
        let wiring = |n: &Neighbours| Wiring {
            neighbours: n.clone(),
            warnings: Vec::new(),
        };
        let last = Neighbours::default();
        assert_eq!(reread::<String>(Ok(None), Some(&last)), Reread::Same);
        assert_eq!(
            reread::<String>(Ok(Some(wiring(&last))), Some(&last)),
            Reread::Same
        );
        assert_eq!(
            reread::<String>(Ok(Some(wiring(&other))), Some(&last)),
            Reread::Changed(wiring(&other))
        );
        assert_eq!(
            reread::<String>(Ok(Some(wiring(&last))), None),
            Reread::Changed(wiring(&last)),
            "no last good neighbours: any read is new"
        );
        assert_eq!(reread(Err("gone"), Some(&last)), Reread::Failed);
    }
}
