//! The node's rails (`--rails FILE`): the rail source is read once, at start
//! (`topoalign_node_facts::read_rail_source`, the one reader of the file), and resolved on
//! every discovery's topology, so the one inventory the publisher and the kubelet plugin
//! share carries each NIC's rail ([`topoalign_dra::attr::RAIL`]).
//!
//! The file's forms and checks belong to `topoalign_fabric::rails`; here it is only applied.

use topoalign_dra::{Inventory, PublishOptions};
use topoalign_fabric::{RailSource, nic_rails_with};
use topoalign_topology::{Neighbours, Topology};

/// The node's rail source and the NICs' neighbours read at start (`--lldp-from`,
/// `--ib-sysfs`, `--ibnetdiscover`), which the rules by switch and by InfiniBand subnet
/// resolve against; empty without a neighbour source.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rails {
    /// The rail file (`--rails`).
    pub source: RailSource,
    /// What the NICs are cabled to.
    pub neighbours: Neighbours,
}

impl Rails {
    /// A rail source whose rules need no neighbours (an operator map, `nearest-gpu`).
    pub fn without_neighbours(source: RailSource) -> Self {
        Self {
            source,
            neighbours: Neighbours::default(),
        }
    }
}

use crate::error::DriverError;

/// The inventory of `topo` under `options`, each physical NIC on the rail `rails` gives
/// it on this topology (no rail anywhere without a source). The one way the driver builds
/// an inventory, so the publisher, the kubelet plugin and `--dry-run` agree.
pub(crate) fn inventory(
    topo: &Topology,
    options: &PublishOptions,
    rails: Option<&Rails>,
) -> Result<Inventory, DriverError> {
    let mut inv = Inventory::new(topo, options);
    if let Some(r) = rails {
        let resolved = nic_rails_with(topo, &r.source, &r.neighbours)?;
        inv.set_rails(|bdf| resolved.rail_of(bdf));
    }
    Ok(inv)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;
    use topoalign_dra::attr;
    use topoalign_fabric::parse_rail_source;

    fn rails_on(inv: &Inventory, node: &str) -> Vec<(String, Option<i64>)> {
        topoalign_dra::slices_for(inv, node, 1)
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
        let inv = inventory(
            &topo,
            &PublishOptions::default(),
            Some(&Rails::without_neighbours(src)),
        )
        .unwrap();
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
        let plain = inventory(&topo, &PublishOptions::default(), None).unwrap();
        assert!(rails_on(&plain, "n1").iter().all(|(_, r)| r.is_none()));
    }

    #[test]
    fn a_map_naming_no_nic_of_the_node_is_an_error_naming_file_and_field() {
        let topo = topoalign_profiles::get("dgx-h100").unwrap();
        let src = parse_rail_source("rails: 2\nnics: {mlx5_99: 0}\n", "r.yaml").unwrap();
        let e = inventory(
            &topo,
            &PublishOptions::default(),
            Some(&Rails::without_neighbours(src)),
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.starts_with("--rails r.yaml: nics.mlx5_99: no such NIC"),
            "{e}"
        );
    }

    #[test]
    fn the_switch_rule_reads_the_neighbours_read_at_start() {
        let topo = topoalign_profiles::get("mi300x-8").unwrap();
        let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../../deploy/gang/");
        let text = std::fs::read_to_string(format!("{root}rails-switch.yaml")).unwrap();
        let src = parse_rail_source(&text, "rails-switch.yaml").unwrap();
        // Without neighbours the rule cannot be resolved, and says so.
        let e = inventory(
            &topo,
            &PublishOptions::default(),
            Some(&Rails::without_neighbours(src.clone())),
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("has no neighbour switch"), "{e}");
        let sources = topoalign_discover::neighbours::NeighbourSources {
            lldp: Some(topoalign_discover::neighbours::LldpFrom::File(
                format!("{root}lldp-mi300x.json").into(),
            )),
            ..Default::default()
        };
        let (neighbours, _) =
            topoalign_discover::neighbours::read_neighbours(&topo, &sources).unwrap();
        let rails = Rails {
            source: src,
            neighbours,
        };
        let inv = inventory(&topo, &PublishOptions::default(), Some(&rails)).unwrap();
        let on: std::collections::BTreeSet<i64> = rails_on(&inv, "n1")
            .into_iter()
            .filter(|(n, _)| n.starts_with("nic-"))
            .filter_map(|(_, r)| r)
            .collect();
        assert_eq!(on, (0..8).collect(), "8 RDMA NICs on leaves r0..r7");
    }
}
