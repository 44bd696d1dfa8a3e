//! The node's inventory: every device it publishes, each physical NIC on its rail
//! (`--rails`, resolved by `topoalign_node_facts` on each discovery's topology and
//! neighbours), built the one way the driver builds it, so the slice controller, the
//! kubelet plugin and `--dry-run` agree; and the pool the follower hands the slice
//! controller ([`NodePool`]), which also gives the same inventory without pair devices
//! for an API server that drops their counters.

use std::sync::{Arc, OnceLock};

use topoalign_dra::publish::{Inventory, PublishOptions};
use topoalign_fabric::NicRails;
use topoalign_topology::Topology;

/// The inventory of `topo` under `options`, each physical NIC on the rail `rails` gives
/// it (no rail anywhere without them).
pub(crate) fn inventory(
    topo: &Topology,
    options: &PublishOptions,
    rails: Option<&NicRails>,
) -> Inventory {
    let mut inv = Inventory::new(topo, options);
    if let Some(r) = rails {
        inv.set_rails(|bdf| r.rail_of(bdf));
    }
    inv
}

/// One discovery of the node as the slice controller publishes it: its inventory (the
/// kubelet plugin's too) and what it was built from.
#[derive(Debug)]
pub(crate) struct NodePool {
    topology: Topology,
    options: PublishOptions,
    rails: Option<NicRails>,
    /// The devices published (pairs too, when the options ask for them).
    pub(crate) inventory: Arc<Inventory>,
    /// The same without pair devices, built when first asked for.
    plain: OnceLock<Arc<Inventory>>,
}

impl NodePool {
    /// The pool of `topology` under `options`, each NIC on the rail `rails` gives it.
    pub(crate) fn new(
        topology: Topology,
        options: PublishOptions,
        rails: Option<NicRails>,
    ) -> Self {
        let inventory = Arc::new(inventory(&topology, &options, rails.as_ref()));
        NodePool {
            topology,
            options,
            rails,
            inventory,
            plain: OnceLock::new(),
        }
    }

    /// The pool generation the options give (the slice controller owns the real one).
    pub(crate) fn generation(&self) -> i64 {
        self.options.generation
    }

    /// The inventory without pair devices (plain GPUs and NICs, MIG instances): what is
    /// published while the API server drops ResourceSlice counters. The inventory itself
    /// where the options ask for no pairs.
    pub(crate) fn plain(&self) -> Arc<Inventory> {
        if !self.options.pair_devices {
            return self.inventory.clone();
        }
        self.plain
            .get_or_init(|| {
                let plain = PublishOptions {
                    pair_devices: false,
                    ..self.options.clone()
                };
                Arc::new(inventory(&self.topology, &plain, self.rails.as_ref()))
            })
            .clone()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;
    use topoalign_dra::attr;
    use topoalign_fabric::{nic_rails, nic_rails_with, parse_rail_source};

    fn rails_on(inv: &Inventory, node: &str) -> Vec<(String, Option<i64>)> {
        topoalign_dra::publish::slices_for(inv, node, 1)
            .unwrap()
            .into_iter()
            .flat_map(|s| s.spec.devices.unwrap_or_default())
            .map(|d| {
                let rail = d
                    .attributes
                    .as_ref()
                    .and_then(|a| a.get(attr::RAIL))
                    .and_then(|v| v.int);
                (d.name, rail)
            })
            .collect()
    }

    #[test]
    fn the_rule_puts_every_nic_and_pair_of_dgx_h100_on_a_rail() {
        let topo = topoalign_profiles::get("dgx-h100").unwrap();
        let src = parse_rail_source("rule: nearest-gpu\n", "rails.yaml").unwrap();
        let rails = nic_rails(&topo, &src).unwrap();
        let inv = inventory(&topo, &PublishOptions::default(), Some(&rails));
        let devices = rails_on(&inv, "n1");
        let railed: Vec<_> = devices.iter().filter(|(_, r)| r.is_some()).collect();
        assert!(
            railed.iter().any(|(n, _)| n.starts_with("pair-")),
            "{devices:?}"
        );
        assert!(
            railed.iter().any(|(n, _)| n.starts_with("nic-")),
            "{devices:?}"
        );
        let rails: std::collections::BTreeSet<i64> =
            railed.iter().filter_map(|(_, r)| *r).collect();
        assert_eq!(rails, (0..8).collect(), "8 GPUs, 8 rails");
        assert!(
            devices
                .iter()
                .filter(|(n, _)| n.starts_with("gpu-"))
                .all(|(_, r)| r.is_none()),
            "a GPU has no rail of its own"
        );
        let plain = inventory(&topo, &PublishOptions::default(), None);
        assert!(rails_on(&plain, "n1").iter().all(|(_, r)| r.is_none()));
    }

    #[test]
    fn the_plain_pool_is_the_inventory_without_pairs_on_the_same_rails() {
        let topo = topoalign_profiles::get("dgx-h100").unwrap();
        let src = parse_rail_source("rule: nearest-gpu\n", "rails.yaml").unwrap();
        let rails = nic_rails(&topo, &src).unwrap();
        let options = PublishOptions::default();
        let pool = NodePool::new(topo.clone(), options.clone(), Some(rails.clone()));
        assert!(!pool.inventory.pairs.is_empty());
        let plain = pool.plain();
        assert!(plain.pairs.is_empty() && plain.plain_devices);
        let without = PublishOptions {
            pair_devices: false,
            ..options
        };
        assert_eq!(*plain, inventory(&topo, &without, Some(&rails)));
        assert!(Arc::ptr_eq(&plain, &pool.plain()), "built once");
        let unpaired = NodePool::new(topo, without, None);
        assert!(Arc::ptr_eq(&unpaired.plain(), &unpaired.inventory));
    }

    #[test]
    fn the_switch_rule_reads_the_neighbours_read_at_start() {
        let topo = topoalign_profiles::get("mi300x-8").unwrap();
        let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../../deploy/gang/");
        let text = std::fs::read_to_string(format!("{root}rails-switch.yaml")).unwrap();
        let src = parse_rail_source(&text, "rails-switch.yaml").unwrap();
        // Without neighbours the rule cannot be resolved, and says so.
        let none = topoalign_topology::Neighbours::default();
        let e = nic_rails_with(&topo, &src, &none).unwrap_err().to_string();
        assert!(e.contains("has no neighbour switch"), "{e}");
        let sources = topoalign_discover::neighbours::NeighbourSources {
            lldp: Some(topoalign_discover::neighbours::LldpFrom::File(
                format!("{root}lldp-mi300x.json").into(),
            )),
            ..Default::default()
        };
        let (neighbours, _) =
            topoalign_discover::neighbours::read_neighbours(&topo, &sources).unwrap();
        let rails = nic_rails_with(&topo, &src, &neighbours).unwrap();
        let inv = inventory(&topo, &PublishOptions::default(), Some(&rails));
        let on: std::collections::BTreeSet<i64> = rails_on(&inv, "n1")
            .into_iter()
            .filter(|(n, _)| n.starts_with("nic-"))
            .filter_map(|(_, r)| r)
            .collect();
        assert_eq!(on, (0..8).collect(), "8 RDMA NICs on leaves r0..r7");
    }
}
