//! A rediscovery reads the NICs' neighbours again: a recabled NIC moves its rail and the
//! leaf; a read that fails keeps the last good neighbours.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::atomic::{AtomicUsize, Ordering};

use serde_json::{Map, Value, json};
use topoalign_fabric::parse_rail_source;
use topoalign_node_facts::{NodeFacts, WiringFlags, read_wiring};

use super::*;
use crate::Rails;

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

/// The rail of the NIC named `netdev` in the publisher's inventory.
fn rail(p: &Publisher, netdev: &str) -> Option<u32> {
    let i = (p.topology.nics.iter())
        .position(|n| n.netdev.as_deref() == Some(netdev))
        .unwrap();
    let bdf = p.topology.nic_bdf(i);
    p.inventory.nics.iter().find(|n| n.bdf == bdf).unwrap().rail
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
    let (tx, mut rx) = watch::channel(facts);
    let rails = Rails {
        source,
        neighbours: wiring.neighbours.clone(),
    };
    let options = PublishOptions::default();
    let inventory = crate::rails::inventory(&topology, &options, Some(&rails)).unwrap();
    let hooked = Arc::new(AtomicUsize::new(0));
    let seen = hooked.clone();
    let metrics = Arc::new(Metrics::new());
    let mut p = Publisher::new(
        super::tests::unreachable(),
        PublisherConfig {
            node_name: "n1".into(),
            source: Source::Profile("mi300x-8".into()),
            rails: Some(rails),
            options,
            rescan_interval: Duration::from_secs(3600),
            removal_timeout: Duration::from_secs(1),
        },
        topology,
        Arc::new(inventory),
        metrics.clone(),
        Arc::new(Health::new(false)),
    )
    .on_topology_change(Box::new(move |_| {
        seen.fetch_add(1, Ordering::SeqCst);
    }))
    .following(crate::rewire::Rewire::new(
        flags,
        wiring.neighbours.clone(),
        Some(tx),
    ));
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
    assert_eq!(
        hooked.load(Ordering::SeqCst),
        1,
        "the kubelet plugin's inventory"
    );
    assert!(rx.has_changed().unwrap());
    let facts = rx.borrow_and_update().clone();
    let leaf_su2 = facts.leaf.clone().unwrap();
    assert!(leaf_su2.value.is_some(), "{leaf_su2:?}");
    assert_ne!(leaf_su2.value, leaf_su1.value);
    let neighbours = &facts.wiring.as_ref().unwrap().neighbours;
    assert_eq!(neighbours, &p.cfg.rails.as_ref().unwrap().neighbours);
    let bdf0 = p.topology.nic_bdf(0);
    assert_eq!(
        facts.rails.as_ref().unwrap().rail_of(bdf0),
        p.inventory
            .nics
            .iter()
            .find(|n| n.bdf == bdf0)
            .unwrap()
            .rail,
        "the labels and the slices read the same rails"
    );

    // A file that no longer reads, then none at all: the last good neighbours stay,
    // nothing is republished, and each failure is counted.
    let before = p.inventory.clone();
    for broken in [Some("{\"lldp\": "), None] {
        match broken {
            Some(text) => std::fs::write(&file, text).unwrap(),
            None => std::fs::remove_file(&file).unwrap(),
        }
        assert!(!p.rediscover().await.unwrap());
        assert_eq!(p.inventory, before);
        assert_eq!(&p.cfg.rails.as_ref().unwrap().neighbours, neighbours);
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
    assert_eq!(hooked.load(Ordering::SeqCst), 1);
}
