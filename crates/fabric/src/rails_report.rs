//! What `topoalign rails` reports for a node: each physical NIC with the switch it is
//! cabled to and its rail, the neighbours read, the rails resolved and the leaf derived
//! (the table form is `topoalign_render::rails_table`).

use serde::Serialize;
use topoalign_topology::{Neighbours, Topology};

use crate::leaf::{LeafDecision, derive_leaf};
use crate::neighbour_switch::neighbour_switch;
use crate::nic_rails::NicRails;

/// One physical NIC.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NicRow {
    /// Its PCI address.
    pub pci: String,
    /// Its RDMA device or netdev name (empty when it has none).
    pub name: String,
    /// The switch it is cabled to (`? (why)` when the neighbours do not say which).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub switch: Option<String>,
    /// Its rail, when a rail file was given and gives it one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rail: Option<u32>,
}

/// A node's NICs, neighbours, rails and leaf.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RailsReport<'a> {
    /// The node (its topology's name).
    pub node: &'a str,
    /// Every physical NIC, in topology order.
    pub nics: Vec<NicRow>,
    /// What the NICs are cabled to.
    pub neighbours: &'a Neighbours,
    /// The rails, when a rail file was given.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rails: Option<&'a NicRails>,
    /// The leaf label derived from the neighbours.
    pub leaf: LeafDecision,
}

impl<'a> RailsReport<'a> {
    /// The report of `topo` with its NICs' `neighbours` and, when given, `rails`.
    pub fn new(
        topo: &'a Topology,
        neighbours: &'a Neighbours,
        rails: Option<&'a NicRails>,
    ) -> Self {
        let nics = (0..topo.nics.len())
            .filter(|&i| !topo.nics[i].is_vf())
            .map(|i| {
                let bdf = topo.nic_bdf(i);
                let switch = neighbours.of(bdf).map(|f| match neighbour_switch(f) {
                    Ok(s) => s.unwrap_or_default(),
                    Err(why) => format!("? ({why})"),
                });
                NicRow {
                    pci: bdf.to_string(),
                    name: topo.nics[i].label().unwrap_or("").to_string(),
                    switch: switch.filter(|s| !s.is_empty()),
                    rail: rails.and_then(|r| r.rail_of(bdf)),
                }
            })
            .collect();
        RailsReport {
            node: &topo.name,
            nics,
            neighbours,
            rails,
            leaf: derive_leaf(topo, neighbours, rails),
        }
    }
}

#[cfg(test)]
mod tests {
    use topoalign_topology::{LldpNeighbour, NicNeighbours};

    use super::*;

    #[test]
    fn every_physical_nic_gets_a_row_with_the_switch_it_hears() {
        let topo = topoalign_profiles::get("mi300x-8").unwrap();
        let first = (0..topo.nics.len())
            .find(|&i| !topo.nics[i].is_vf())
            .unwrap();
        let bdf = topo.nic_bdf(first);
        let mut n = Neighbours::default();
        let lldp = LldpNeighbour {
            interface: topo.nics[first].netdev.clone().unwrap_or_default(),
            chassis_name: Some("leaf-1".into()),
            chassis_id: None,
            port_id: Some("ifname swp1".into()),
            port_descr: None,
        };
        n.nics.insert(
            bdf,
            NicNeighbours {
                lldp: vec![lldp],
                ib: None,
            },
        );
        let r = RailsReport::new(&topo, &n, None);
        let physical = topo.nics.iter().filter(|nic| !nic.is_vf()).count();
        assert_eq!((r.node, r.nics.len()), (topo.name.as_str(), physical));
        assert_eq!(r.nics[0].pci, bdf.to_string());
        assert_eq!(r.nics[0].switch.as_deref(), Some("leaf-1"));
        assert!(
            r.nics[1..]
                .iter()
                .all(|row| row.switch.is_none() && row.rail.is_none())
        );
        let json = serde_json::to_value(&r).unwrap();
        assert!(json.get("rails").is_none() && json["nics"][1].get("switch").is_none());
    }
}
