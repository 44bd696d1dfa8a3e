//! The follower: every `--rescan-interval` it discovers the node again and reads its
//! NICs' neighbours again (`topoalign_node_facts::Follower`, the agent's policy too).
//! When a device came or went or a NIC was recabled, it resolves the rails and derives
//! the leaf anew and hands the new node over, each on its watch channel: the pool to the
//! slice controller (`crate::slices`), the inventory to the kubelet plugin, the domain
//! facts to the labelling task (`--write-domain-labels`; it relabels only when they
//! differ). A rediscovery that fails, or a rail source that no longer fits, keeps the
//! last good node (counted as a `discover` error); a failed read of the neighbours keeps
//! the last good neighbours (a `neighbours` error).

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use topoalign_discover::Source;
use topoalign_dra::publish::{Inventory, PublishOptions};
use topoalign_node_facts::{Follower, NodeFacts, REREAD_COMPONENT, Reread};
use topoalign_topology::Topology;

use crate::error::DriverError;
use crate::inventory::NodePool;
use crate::metrics::Metrics;
use crate::start::DriverConfig;

/// The node as last discovered, and the channels it is handed over on.
pub(crate) struct NodeFollower {
    node_name: String,
    source: Source,
    options: PublishOptions,
    follower: Follower,
    topology: Topology,
    facts: NodeFacts,
    metrics: Arc<Metrics>,
    pools: watch::Sender<Arc<NodePool>>,
    inventories: watch::Sender<Arc<Inventory>>,
    domain_facts: watch::Sender<NodeFacts>,
}

impl NodeFollower {
    /// Follows the node of `config` from `topology` and `facts` (as read at start) and
    /// `pool`, the first pool built on them.
    pub(crate) fn new(
        config: &DriverConfig,
        follower: Follower,
        topology: Topology,
        facts: NodeFacts,
        pool: NodePool,
        metrics: Arc<Metrics>,
    ) -> Self {
        let (inventories, _) = watch::channel(pool.inventory.clone());
        let (pools, _) = watch::channel(Arc::new(pool));
        let (domain_facts, _) = watch::channel(facts.clone());
        NodeFollower {
            node_name: config.node_name.clone(),
            source: config.source.clone(),
            options: config.options.clone(),
            follower,
            topology,
            facts,
            metrics,
            pools,
            inventories,
            domain_facts,
        }
    }

    /// The pool now, then one per change of the node (the slice controller's).
    pub(crate) fn pools(&self) -> watch::Receiver<Arc<NodePool>> {
        self.pools.subscribe()
    }

    /// The inventory now, then one per change (the kubelet plugin's).
    pub(crate) fn inventories(&self) -> watch::Receiver<Arc<Inventory>> {
        self.inventories.subscribe()
    }

    /// The domain facts now, then one per change (the labelling task's).
    pub(crate) fn domain_facts(&self) -> watch::Receiver<NodeFacts> {
        self.domain_facts.subscribe()
    }

    /// Rediscovers every `interval` until `stop` turns true (the node was read at start:
    /// the first rediscovery is one interval later).
    pub(crate) async fn run(mut self, interval: Duration, mut stop: watch::Receiver<bool>) {
        let mut rescan = tokio::time::interval(interval);
        rescan.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        rescan.tick().await;
        loop {
            tokio::select! {
                _ = async { let _ = stop.wait_for(|s| *s).await; } => return,
                _ = rescan.tick() => {
                    if let Err(e) = self.rediscover().await {
                        self.metrics.error("discover");
                        tracing::error!(error = %e, "rescan failed; keeping the last topology");
                    }
                }
            }
        }
    }

    /// Rediscovers the topology and reads the NICs' neighbours again; true when either
    /// changed (a device came or went, a NIC was recabled) and the new node was handed
    /// over.
    pub(crate) async fn rediscover(&mut self) -> Result<bool, DriverError> {
        let source = self.source.clone();
        let follower = self.follower.clone();
        let (found, read) = tokio::task::spawn_blocking(move || {
            topoalign_discover::load(&source).map(|found| {
                let read = follower.rereads().then(|| follower.read(&found.topology));
                (found, read)
            })
        })
        .await
        .map_err(|source| DriverError::Join {
            task: "discovery",
            source,
        })??;
        let news = match read.map(|r| self.follower.reread(&self.facts, r)) {
            Some(Reread::Changed(w)) => Some(w),
            Some(Reread::Failed) => {
                self.metrics.error(REREAD_COMPONENT);
                None
            }
            Some(Reread::Same) | None => None,
        };
        let moved = found.topology != self.topology;
        if !moved && news.is_none() {
            return Ok(false);
        }
        if moved {
            for w in &found.warnings {
                tracing::warn!(warning = %w, "discovery");
            }
            tracing::info!(node = %self.node_name, "the topology changed; republishing");
        }
        if let Some(w) = &news {
            for warning in &w.warnings {
                tracing::warn!(warning = %warning, "NIC neighbours");
            }
            tracing::info!(node = %self.node_name, "the NICs' neighbours changed; republishing");
        }
        // The rails and the leaf are resolved on the new topology and neighbours before
        // anything is handed over: a rail source that no longer fits keeps the last good
        // node and fails the rescan.
        let facts = self.follower.refresh(&self.facts, &found.topology, news)?;
        let pool = NodePool::new(
            found.topology.clone(),
            self.options.clone(),
            facts.rails.clone(),
        );
        self.topology = found.topology;
        self.facts = facts.clone();
        // The plugin first: it prepares what the slices are about to say.
        self.inventories.send_replace(pool.inventory.clone());
        self.pools.send_replace(Arc::new(pool));
        self.domain_facts.send_if_modified(|now| {
            let changed = *now != facts;
            *now = facts;
            changed
        });
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    //! A rediscovery reads the NICs' neighbours again: a recabled NIC moves its rail and
    //! the leaf; a read that fails keeps the last good neighbours.

    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use serde_json::{Map, Value, json};
    use topoalign_fabric::parse_rail_source;
    use topoalign_node_facts::{NodeFacts, WiringFlags, read_wiring};

    use super::*;

    /// lldpctl's JSON (`lldpctl -f json`) for mi300x-8's RDMA NICs: `rdma<i>` cabled to
    /// `leaves[i]`.
    fn lldp(leaves: &[String]) -> String {
        let interfaces: Vec<Value> = (leaves.iter().enumerate())
            .map(|(i, leaf)| {
                let mut chassis = Map::new();
                chassis.insert(
                    leaf.clone(),
                    json!({"id": {"type": "mac", "value": format!("b8:59:9f:a0:00:{i:02x}")}}),
                );
                let mut iface = Map::new();
                iface.insert(
                    format!("rdma{i}"),
                    json!({"via": "LLDP", "rid": format!("{}", i + 1), "chassis": chassis,
                           "port": {"id": {"type": "ifname", "value": format!("swp{i}")}}}),
                );
                Value::Object(iface)
            })
            .collect();
        json!({"lldp": {"interface": interfaces}}).to_string()
    }

    /// The rail of the NIC named `netdev` in the pool handed over last.
    fn rail(p: &NodeFollower, netdev: &str) -> Option<u32> {
        let i = (p.topology.nics.iter())
            .position(|n| n.netdev.as_deref() == Some(netdev))
            .unwrap();
        let bdf = p.topology.nic_bdf(i);
        let pool = p.pools.borrow().clone();
        pool.inventory
            .nics
            .iter()
            .find(|n| n.bdf == bdf)
            .unwrap()
            .rail
    }

    #[tokio::test]
    async fn a_recabled_nic_moves_its_rail_and_the_leaf_and_a_bad_read_keeps_the_last_good() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("lldp.json");
        let su1: Vec<String> = (0..8).map(|i| format!("leaf-r{i}-su1")).collect();
        std::fs::write(&file, lldp(&su1)).unwrap();
        let topology = topoalign_profiles::get("mi300x-8").unwrap();
        let flags = WiringFlags {
            lldp_from: Some(file.display().to_string()),
            ..WiringFlags::default()
        };
        let source = parse_rail_source(
            "rule: switch\nrails: 8\nswitchPattern: \"leaf-r{rail}-*\"\n",
            "rails.yaml",
        )
        .unwrap();
        // As at start: the neighbours read once, the rails and the facts on them.
        let wiring = read_wiring(&flags, &topology).unwrap().unwrap();
        let facts = NodeFacts::default()
            .with_wiring(&topology, Some(wiring.clone()), Some(&source))
            .unwrap();
        let leaf_su1 = facts.leaf.clone().unwrap();
        assert!(leaf_su1.value.is_some(), "{leaf_su1:?}");
        let metrics = Arc::new(Metrics::new());
        let config = DriverConfig {
            node_name: "n1".into(),
            source: Source::Profile("mi300x-8".into()),
            options: PublishOptions::default(),
            write_domain_labels: true,
            rescan_interval: Duration::from_secs(3600),
            removal_timeout: Duration::from_secs(1),
            plugin: None,
            listen: "127.0.0.1:0".parse().unwrap(),
            crash_at: None,
        };
        let pool = NodePool::new(
            topology.clone(),
            config.options.clone(),
            facts.rails.clone(),
        );
        let mut p = NodeFollower::new(
            &config,
            Follower::new(flags, Some(source)),
            topology,
            facts,
            pool,
            metrics.clone(),
        );
        let mut rx = p.domain_facts();
        let mut plugin = p.inventories();
        let mut controller = p.pools();
        assert_eq!((rail(&p, "rdma0"), rail(&p, "rdma1")), (Some(0), Some(1)));

        // Nothing moved: nothing to do.
        assert!(!p.rediscover().await.unwrap());
        assert!(!rx.has_changed().unwrap());

        // rdma0 and rdma1 swap leaves, and the node moves to scalable unit 2.
        let mut su2: Vec<String> = (0..8).map(|i| format!("leaf-r{i}-su2")).collect();
        su2.swap(0, 1);
        std::fs::write(&file, lldp(&su2)).unwrap();
        assert!(p.rediscover().await.unwrap());
        assert_eq!((rail(&p, "rdma0"), rail(&p, "rdma1")), (Some(1), Some(0)));
        assert!(
            plugin.has_changed().unwrap(),
            "the kubelet plugin's inventory"
        );
        let handed = plugin.borrow_and_update().clone();
        assert!(Arc::ptr_eq(
            &handed,
            &controller.borrow_and_update().inventory
        ));
        assert!(rx.has_changed().unwrap());
        let facts = rx.borrow_and_update().clone();
        let leaf_su2 = facts.leaf.clone().unwrap();
        assert!(leaf_su2.value.is_some(), "{leaf_su2:?}");
        assert_ne!(leaf_su2.value, leaf_su1.value);
        let neighbours = &facts.wiring.as_ref().unwrap().neighbours;
        assert_eq!(neighbours, &p.facts.wiring.as_ref().unwrap().neighbours);
        let bdf0 = p.topology.nic_bdf(0);
        assert_eq!(
            facts.rails.as_ref().unwrap().rail_of(bdf0),
            handed.nics.iter().find(|n| n.bdf == bdf0).unwrap().rail,
            "the labels and the slices read the same rails"
        );

        // A file that no longer reads, then none at all: the last good neighbours stay,
        // nothing is republished, and each failure is counted.
        let before = p.pools.borrow().inventory.clone();
        for broken in [Some("{\"lldp\": "), None] {
            match broken {
                Some(text) => std::fs::write(&file, text).unwrap(),
                None => std::fs::remove_file(&file).unwrap(),
            }
            assert!(!p.rediscover().await.unwrap());
            assert_eq!(p.pools.borrow().inventory, before);
            assert_eq!(&p.facts.wiring.as_ref().unwrap().neighbours, neighbours);
            assert!(!rx.has_changed().unwrap());
        }
        let text = metrics.encode();
        assert!(
            text.contains("topoalign_driver_errors_total{component=\"neighbours\"} 2"),
            "{text}"
        );
        // Readable again and as before the failures: still nothing to do.
        std::fs::write(&file, lldp(&su2)).unwrap();
        assert!(!p.rediscover().await.unwrap());
        assert!(!plugin.has_changed().unwrap() && !controller.has_changed().unwrap());
    }
}
