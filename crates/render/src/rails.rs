//! A node's rails report ([`topoalign_fabric::RailsReport`]) as `topoalign rails` prints
//! it: one row per NIC with its switch, port, subnet and rail, then the rails and the leaf.

use topoalign_fabric::RailsReport;

use crate::table::Table;

/// The table form of `r`.
pub fn rails_table(r: &RailsReport<'_>) -> String {
    let mut t = Table::new(&["NIC", "NAME", "SWITCH", "PORT", "SUBNET", "RAIL"]);
    let dash = || "-".to_string();
    for row in &r.nics {
        let facts = row.pci.parse().ok().and_then(|b| r.neighbours.of(b));
        let ib = facts.and_then(|f| f.ib.as_ref());
        let port = ib
            .and_then(|p| p.switch.as_ref().map(|s| s.port.to_string()))
            .or_else(|| facts.and_then(|f| f.lldp.first()?.port_id.clone()));
        t.row(vec![
            row.pci.clone(),
            row.name.clone(),
            row.switch.clone().unwrap_or_else(dash),
            port.unwrap_or_else(dash),
            ib.and_then(|p| p.subnet)
                .map_or_else(dash, |s| s.to_string()),
            row.rail.map_or_else(dash, |r| r.to_string()),
        ]);
    }
    let mut out = format!("node {}\n{}", r.node, t.render(0));
    if let Some(rails) = r.rails {
        out.push_str(&format!("rails: {} ({})\n", rails.rails, rails.source));
        for note in &rails.notes {
            out.push_str(&format!("  {note}\n"));
        }
    }
    let leaf = r.leaf.value.as_deref().unwrap_or("none");
    out + &format!("leaf: {leaf} ({})\n", r.leaf.why)
}

#[cfg(test)]
mod tests {
    use topoalign_fabric::{LeafDecision, NicRow};
    use topoalign_topology::Neighbours;

    use super::*;

    #[test]
    fn nics_without_facts_show_dashes_and_the_leaf_line_ends_it() {
        let neighbours = Neighbours::default();
        let r = RailsReport {
            node: "n1",
            nics: vec![NicRow {
                pci: "0000:0c:00.0".into(),
                name: "mlx5_0".into(),
                switch: None,
                rail: Some(3),
            }],
            neighbours: &neighbours,
            rails: None,
            leaf: LeafDecision {
                value: None,
                switches: vec![],
                why: "no neighbours".into(),
            },
        };
        let text = rails_table(&r);
        assert!(text.starts_with("node n1\nNIC"), "{text}");
        assert!(
            text.contains("0000:0c:00.0  mlx5_0  -       -     -       3"),
            "{text}"
        );
        assert!(text.ends_with("leaf: none (no neighbours)\n"), "{text}");
    }
}
