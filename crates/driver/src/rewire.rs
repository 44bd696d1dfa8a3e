//! The NICs' neighbours followed across rediscoveries: the neighbour sources
//! (`--lldp-from`, `--ib-sysfs`, `--ibnetdiscover`) are read again with every rescan, so
//! a recabled NIC's rail and the node's leaf follow it without a restart. A read that
//! fails after start keeps the last good neighbours (a warning names the source); at
//! start a bad source stops the driver, as every bad input does.

use tokio::sync::watch;
use topoalign_fabric::RailSource;
use topoalign_node_facts::{NodeFacts, Wiring, WiringFlags, read_wiring};
use topoalign_topology::{Neighbours, Topology};

use crate::error::DriverError;

/// Where the neighbours are read again, the last good ones, and the domain facts the
/// labelling task writes (derived again from new neighbours).
#[derive(Debug)]
pub(crate) struct Rewire {
    flags: WiringFlags,
    last: Neighbours,
    labels: Option<watch::Sender<NodeFacts>>,
}

impl Rewire {
    /// Follows the sources `flags` from `start`, the neighbours read at start; `labels`
    /// carries the domain facts to the labelling task (`--write-domain-labels`). `None`
    /// without a neighbour source.
    pub(crate) fn new(
        flags: WiringFlags,
        start: Neighbours,
        labels: Option<watch::Sender<NodeFacts>>,
    ) -> Option<Self> {
        flags.any().then_some(Rewire {
            flags,
            last: start,
            labels,
        })
    }

    /// Reads the neighbours of `topo` from the sources again (blocking: reads files, may
    /// run `lldpctl`): a function of its own, for a blocking thread.
    pub(crate) fn reader(
        &self,
    ) -> impl FnOnce(&Topology) -> Result<Option<Wiring>, DriverError> + Send + 'static {
        let flags = self.flags.clone();
        move |topo| Ok(read_wiring(&flags, topo)?)
    }

    /// The last good neighbours.
    pub(crate) fn last(&self) -> &Neighbours {
        &self.last
    }

    /// The domain facts on `topo` with the neighbours `news` (`None`: those the facts
    /// hold) and the rails of `rails` resolved on them; `None` without domain labels.
    pub(crate) fn facts(
        &self,
        topo: &Topology,
        news: Option<&Wiring>,
        rails: Option<&RailSource>,
    ) -> Result<Option<NodeFacts>, DriverError> {
        let Some(tx) = &self.labels else {
            return Ok(None);
        };
        let now = tx.borrow().clone();
        let wiring = news.cloned().or_else(|| now.wiring.clone());
        Ok(Some(now.with_wiring(topo, wiring, rails)?))
    }

    /// Keeps `news` as the last good neighbours and hands `facts` to the labelling task
    /// (it relabels only when they differ from those it has).
    pub(crate) fn commit(&mut self, news: Option<Wiring>, facts: Option<NodeFacts>) {
        if let Some(w) = news {
            self.last = w.neighbours;
        }
        if let (Some(tx), Some(facts)) = (&self.labels, facts) {
            tx.send_if_modified(|now| {
                let changed = *now != facts;
                *now = facts;
                changed
            });
        }
    }
}
