//! Rails and leaves from what each NIC is cabled to, on the built-in profiles.

use std::collections::{BTreeMap, BTreeSet};

use topoalign_fabric::{
    DomainInputs, derive_leaf, domain_labels, domain_labels_with, nic_rails, nic_rails_with,
    parse_rail_source,
};
use topoalign_profiles as profiles;
use topoalign_topology::{
    Bdf, IbPort, IbSwitch, LinkLayer, LldpNeighbour, Neighbours, NicNeighbours, SubnetPrefix,
    Topology,
};

/// The physical RDMA NICs of a profile, in address order, with their link layer.
fn rdma_nics(topo: &Topology) -> Vec<(Bdf, Option<LinkLayer>)> {
    (0..topo.nics.len())
        .filter(|&n| !topo.nics[n].is_vf() && topo.nics[n].is_rdma())
        .map(|n| (topo.nic_bdf(n), topo.nics[n].link_layer()))
        .collect()
}

fn lldp(interface: &str, switch: &str) -> LldpNeighbour {
    LldpNeighbour {
        interface: interface.into(),
        chassis_name: Some(switch.into()),
        chassis_id: Some(format!("mac b8:59:9f:00:00:{:02x}", switch.len())),
        port_id: Some("ifname swp1".into()),
        port_descr: None,
    }
}

/// mi300x-8 (eight Ethernet RDMA NICs): NIC i hears `switch(i)` over LLDP.
fn lldp_node(switch: impl Fn(usize) -> String) -> (Topology, Neighbours) {
    let topo = profiles::get("mi300x-8").unwrap();
    let mut n = Neighbours::default();
    for (i, (bdf, _)) in rdma_nics(&topo).into_iter().enumerate() {
        let nic = topo.nic_index(bdf).unwrap();
        let ifname = topo.nics[nic].netdev.clone().unwrap_or_default();
        n.nics.insert(
            bdf,
            NicNeighbours {
                lldp: vec![lldp(&ifname, &switch(i))],
                ib: None,
            },
        );
    }
    (topo, n)
}

/// dgx-h100: IB NIC i active on subnet `fe80:0:0:<subnet(i)>`, cabled to leaf-r<i>-su1;
/// the Ethernet management NIC hears tor-12.
fn ib_node(subnet: impl Fn(usize) -> u64) -> (Topology, Neighbours) {
    let topo = profiles::get("dgx-h100").unwrap();
    let mut n = Neighbours::default();
    let mut i = 0;
    for (bdf, layer) in rdma_nics(&topo) {
        let nic = topo.nic_index(bdf).unwrap();
        let facts = if layer == Some(LinkLayer::InfiniBand) {
            let f = NicNeighbours {
                lldp: vec![],
                ib: Some(IbPort {
                    device: topo.nics[nic].rdma.clone().unwrap(),
                    port: 1,
                    state: Some("ACTIVE".into()),
                    lid: Some(0x10 + i as u16),
                    sm_lid: Some(1),
                    subnet: Some(SubnetPrefix(0xfe80_0000_0000_0000 | subnet(i))),
                    port_guid: Some(format!("0x0c42a1030000{i:04x}")),
                    switch: Some(IbSwitch {
                        guid: format!("0x7cfe900300a5a2{i:02x}"),
                        description: format!("MF0;leaf-r{i}-su1:MQM9700/U1"),
                        port: 1 + i as u32,
                    }),
                }),
            };
            i += 1;
            f
        } else {
            NicNeighbours {
                lldp: vec![lldp("enp41s0f0np0", "tor-12")],
                ib: None,
            }
        };
        n.nics.insert(bdf, facts);
    }
    (topo, n)
}

fn resolve(topo: &Topology, n: &Neighbours, text: &str) -> Result<BTreeMap<Bdf, u32>, String> {
    let src = parse_rail_source(text, "rails.yaml").map_err(|e| e.to_string())?;
    nic_rails_with(topo, &src, n)
        .map(|r| r.by_nic)
        .map_err(|e| e.to_string())
}

#[test]
fn lldp_switch_names_give_rails_by_map_and_by_pattern() {
    let (topo, n) = lldp_node(|i| format!("su1-leaf-r{i}"));
    let nics = rdma_nics(&topo);
    let map: Vec<String> = (0..8).map(|i| format!("su1-leaf-r{i}: {i}")).collect();
    let by_map = resolve(
        &topo,
        &n,
        &format!("rule: switch\nrails: 8\nswitches: {{{}}}\n", map.join(", ")),
    )
    .unwrap();
    let by_pattern = resolve(
        &topo,
        &n,
        "rule: switch\nrails: 8\nswitchPattern: \"su*-leaf-r{rail}\"\n",
    )
    .unwrap();
    assert_eq!(by_map, by_pattern);
    for (i, (bdf, _)) in nics.iter().enumerate() {
        assert_eq!(by_map.get(bdf), Some(&(i as u32)), "NIC {bdf}");
    }
    // A map may name the switch by chassis id too.
    let id = n.nics.values().next().unwrap().lldp[0]
        .chassis_id
        .clone()
        .unwrap();
    let r = resolve(
        &topo,
        &n,
        &format!("rule: switch\nrails: 8\nswitches: {{\"{id}\": 3}}\n"),
    )
    .unwrap_err();
    assert!(r.contains("rail 3 has 8 NICs"), "{r}");
    // ... or by its bare value, without the type.
    let bare = id.split_once(' ').unwrap().1;
    let r = resolve(
        &topo,
        &n,
        &format!("rule: switch\nrails: 8\nswitches: {{\"{bare}\": 3}}\n"),
    )
    .unwrap_err();
    assert!(r.contains("rail 3 has 8 NICs"), "{r}");
}

#[test]
fn switches_the_rule_does_not_name_are_on_no_rail_with_a_note() {
    let (topo, n) = ib_node(|i| i as u64 + 1);
    let src = parse_rail_source(
        "rule: switch\nrails: 8\nswitchPattern: \"leaf-r{rail}-su*\"\n",
        "rails.yaml",
    )
    .unwrap();
    let r = nic_rails_with(&topo, &src, &n).unwrap();
    assert_eq!(r.by_nic.len(), 8);
    assert_eq!(r.rails, 8);
    assert_eq!(r.source, "rule switch (rails.yaml)");
    assert_eq!(r.notes.len(), 1, "{:?}", r.notes);
    assert!(
        r.notes[0].contains("switch tor-12 is not named"),
        "{:?}",
        r.notes
    );
}

#[test]
fn ib_subnets_give_rails_by_map_and_by_order() {
    // Subnets numbered backwards: rail by order is 7 - i.
    let (topo, n) = ib_node(|i| 8 - i as u64);
    let ib: Vec<Bdf> = rdma_nics(&topo)
        .into_iter()
        .filter(|(_, l)| *l == Some(LinkLayer::InfiniBand))
        .map(|(b, _)| b)
        .collect();
    let ordered = resolve(&topo, &n, "rule: ib-subnet\nrails: 8\n").unwrap();
    for (i, bdf) in ib.iter().enumerate() {
        assert_eq!(ordered.get(bdf), Some(&(7 - i as u32)), "{bdf}");
    }
    let map: Vec<String> = (0..8)
        .map(|r| format!("\"fe80:0:0:{:x}\": {r}", r + 1))
        .collect();
    let mapped = resolve(
        &topo,
        &n,
        &format!(
            "rule: ib-subnet\nrails: 8\nsubnets: {{{}}}\n",
            map.join(", ")
        ),
    )
    .unwrap();
    assert_eq!(mapped, ordered);
    let e = resolve(&topo, &n, "rule: ib-subnet\nrails: 4\n").unwrap_err();
    assert!(
        e.contains("shows 8 InfiniBand subnets") && e.contains("not 4"),
        "{e}"
    );
}

#[test]
fn missing_or_ambiguous_neighbours_and_shared_rails_are_errors() {
    // One subnet for all: two NICs on one rail.
    let (topo, n) = ib_node(|_| 1);
    let e = resolve(&topo, &n, "rule: ib-subnet\n").unwrap_err();
    assert!(
        e.contains("rail 0 has 8 NICs") && e.contains("shared: [0]"),
        "{e}"
    );
    // A port down.
    let (topo, mut n) = ib_node(|i| i as u64 + 1);
    let first = *n
        .nics
        .iter()
        .find(|(_, f)| f.ib.is_some())
        .map(|(b, _)| b)
        .unwrap();
    n.nics.get_mut(&first).unwrap().ib.as_mut().unwrap().state = Some("DOWN".into());
    let e = resolve(&topo, &n, "rule: ib-subnet\n").unwrap_err();
    assert!(e.contains("is DOWN: no subnet manager"), "{e}");
    // No neighbour at all.
    n.nics.remove(&first);
    let e = resolve(
        &topo,
        &n,
        "rule: switch\nrails: 8\nswitchPattern: \"leaf-r{rail}-*\"\n",
    )
    .unwrap_err();
    assert!(
        e.starts_with("rails.yaml: rule: NIC ") && e.contains("has no neighbour switch"),
        "{e}"
    );
    // Two LLDP neighbours on one interface.
    let (topo, mut n) = lldp_node(|i| format!("leaf-r{i}"));
    let (bdf, f) = n.nics.iter_mut().next().unwrap();
    let ifname = f.lldp[0].interface.clone();
    f.lldp.push(lldp(&ifname, "other-switch"));
    let bdf = *bdf;
    let e = resolve(
        &topo,
        &n,
        "rule: switch\nrails: 8\nswitchPattern: \"leaf-r{rail}\"\n",
    )
    .unwrap_err();
    assert!(
        e.contains(&format!("NIC {bdf}")) && e.contains("2 neighbours"),
        "{e}"
    );
    // A pattern giving a rail past `rails`.
    let (topo, n) = lldp_node(|i| format!("leaf-r{}", i + 4));
    let e = resolve(
        &topo,
        &n,
        "rule: switch\nrails: 8\nswitchPattern: \"leaf-r{rail}\"\n",
    )
    .unwrap_err();
    assert!(e.contains("gives rail 8, out of range"), "{e}");
    // The neighbour rules without neighbours.
    let src = parse_rail_source("rule: ib-subnet\n", "rails.yaml").unwrap();
    let e = nic_rails(&topo, &src).unwrap_err().to_string();
    assert!(e.contains("no neighbours were read"), "{e}");
}

#[test]
fn the_existing_kinds_ignore_neighbours() {
    let (topo, n) = ib_node(|i| i as u64 + 1);
    for text in ["rule: nearest-gpu\n", "rails: 2\nnics: {mlx5_0: 0}\n"] {
        let src = parse_rail_source(text, "rails.yaml").unwrap();
        assert_eq!(
            nic_rails(&topo, &src).unwrap(),
            nic_rails_with(&topo, &src, &n).unwrap(),
            "{text}"
        );
    }
}

#[test]
fn rail_files_of_the_neighbour_rules_are_checked() {
    let err = |text: &str| {
        parse_rail_source(text, "rails.yaml")
            .unwrap_err()
            .to_string()
    };
    for (text, want) in [
        ("rule: switch\nrails: 8\n", "rails.yaml: switches: missing"),
        (
            "rule: switch\nswitches: {a: 0}\n",
            "rails.yaml: rails: missing",
        ),
        (
            "rule: switch\nrails: 2\nswitches: {a: 0}\nswitchPattern: \"a{rail}\"\n",
            "not both",
        ),
        (
            "rule: switch\nrails: 2\nswitchPattern: leaf\n",
            "{rail} exactly once",
        ),
        (
            "rule: switch\nrails: 2\nswitches: {a: 2}\n",
            "switches.a: rail 2 is out of range",
        ),
        (
            "rule: ib-subnet\nrails: 2\nsubnets: {\"fe80::1\": 0}\n",
            "is not a subnet prefix",
        ),
        (
            "rule: ib-subnet\nrails: 2\nsubnets: {\"fe80:0:0:1\": 0, \"fe80:0000:0000:0001\": 1}\n",
            "again, with rail 0 instead of 1",
        ),
        (
            "rule: nearest-gpu\nswitches: {a: 0}\n",
            "rails.yaml: switches: read only with rule: switch",
        ),
        (
            "rails: 2\nsubnets: {\"fe80:0:0:1\": 0}\n",
            "subnets: read only with rule: ib-subnet",
        ),
        ("rule: lldp\n", "the known rules are nearest-gpu"),
    ] {
        let e = err(text);
        assert!(e.contains(want), "{text}: {e}");
    }
}

#[test]
fn the_leaf_is_the_one_switch_or_the_unit_of_the_rail_leaves() {
    // Every NIC on one switch.
    let (topo, n) = lldp_node(|_| "leaf 07".into());
    let d = derive_leaf(&topo, &n, None);
    assert_eq!(d.value.as_deref(), Some("leaf-07"), "{d:?}");
    let label = d.label().unwrap();
    assert_eq!(label.key, "fabric.topograph.run/tier-0");

    // Rail-optimized: one leaf per rail; nodes of one unit agree, of another differ.
    let (topo, su1) = lldp_node(|i| format!("leaf-r{i}-su1"));
    let a = derive_leaf(&topo, &su1, None);
    let v = a.value.clone().unwrap();
    assert!(v.starts_with("leaf-r-su1-") && v.len() <= 63, "{v}");
    assert_eq!(a.switches.len(), 8);
    let (_, su1_other_order) = lldp_node(|i| format!("leaf-r{}-su1", 7 - i));
    assert_eq!(derive_leaf(&topo, &su1_other_order, None).value, a.value);
    let (_, su2) = lldp_node(|i| format!("leaf-r{i}-su2"));
    assert_ne!(derive_leaf(&topo, &su2, None).value, a.value);

    // dgx-h100: the management NIC's ToR would spoil the set; counting the railed NICs
    // leaves it out.
    let (topo, n) = ib_node(|i| i as u64 + 1);
    let all = derive_leaf(&topo, &n, None);
    assert!(all.switches.contains(&"tor-12".to_string()));
    let src = parse_rail_source("rule: ib-subnet\nrails: 8\n", "rails.yaml").unwrap();
    let rails = nic_rails_with(&topo, &src, &n).unwrap();
    let railed = derive_leaf(&topo, &n, Some(&rails));
    assert_eq!(railed.switches.len(), 8);
    assert!(!railed.switches.contains(&"tor-12".to_string()));
    assert_eq!(
        railed.value,
        derive_leaf(&profiles::get("mi300x-8").unwrap(), &su1, None).value,
        "the same eight leaves are the same unit, whatever reads them"
    );

    // Nothing readable, or only part: no value.
    let d = derive_leaf(&topo, &Neighbours::default(), None);
    assert_eq!(d.value, None);
    assert!(d.why.contains("none of the"), "{}", d.why);
    let (topo, mut n) = lldp_node(|i| format!("leaf-r{i}"));
    let first = *n.nics.keys().next().unwrap();
    n.nics.remove(&first);
    let d = derive_leaf(&topo, &n, None);
    assert_eq!(d.value, None);
    assert!(d.why.contains("1 of the 8 RDMA NICs"), "{}", d.why);
}

#[test]
fn a_derived_leaf_is_the_lowest_source() {
    let (topo, n) = lldp_node(|_| "leaf-07".into());
    let derived = vec![derive_leaf(&topo, &n, None).label().unwrap()];
    let empty = BTreeMap::new();
    let owned = BTreeSet::new();
    let input = |existing, operator| DomainInputs {
        existing,
        owned: &owned,
        clique: None,
        operator,
    };
    // Nothing else: written.
    let out = domain_labels_with(input(&empty, &empty), "d.yaml", &derived);
    assert_eq!(out.write["fabric.topograph.run/tier-0"], "leaf-07");
    assert!(out.sources["fabric.topograph.run/tier-0"].starts_with("NIC neighbours"));
    // The operator's file gives the leaf level (another key): the wiring wins, noted.
    let operator = BTreeMap::from([(
        "network.topology.nvidia.com/leaf".to_string(),
        "leaf-x".to_string(),
    )]);
    let out = domain_labels_with(input(&empty, &operator), "d.yaml", &derived);
    assert_eq!(
        out.write,
        BTreeMap::from([(
            "fabric.topograph.run/tier-0".to_string(),
            "leaf-07".to_string()
        )])
    );
    assert!(
        out.notes[0].starts_with(
            "network.topology.nvidia.com/leaf=leaf-x (d.yaml) not written: the NIC neighbours"
        ),
        "{:?}",
        out.notes
    );
    // The file and the wiring agree: one label, no note.
    let agree = BTreeMap::from([(
        "fabric.topograph.run/tier-0".to_string(),
        "leaf-07".to_string(),
    )]);
    let out = domain_labels_with(input(&empty, &agree), "d.yaml", &derived);
    assert_eq!(out.write, agree);
    assert!(out.notes.is_empty(), "{:?}", out.notes);
    // Topograph labelled the node: neither is written.
    let existing = BTreeMap::from([(
        "fabric.topograph.run/tier-0".to_string(),
        "topo-leaf".to_string(),
    )]);
    let out = domain_labels_with(input(&existing, &empty), "d.yaml", &derived);
    assert!(out.write.is_empty());
    // Without derived labels the answer is domain_labels'.
    assert_eq!(
        domain_labels_with(input(&existing, &operator), "d.yaml", &[]),
        domain_labels(input(&existing, &operator), "d.yaml")
    );
}
