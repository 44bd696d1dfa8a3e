//! Slices per built-in profile: snapshots, and the properties the design rests on.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::BTreeSet;

use topoalign_dra::{
    CLASS_PAIR, DRIVER_NAME, DeviceKind, Inventory, PublishOptions, attr, device_classes,
    resource_slices,
};
use topoalign_profiles as profiles;
use topoalign_topology::{PcieClass, Topology};

fn profile(name: &str) -> Topology {
    profiles::get(name).unwrap()
}

#[test]
fn snapshots_per_profile() {
    for name in profiles::NAMES {
        let slices = resource_slices(&profile(name), "node-1", &PublishOptions::default()).unwrap();
        common::check_limits(&slices).unwrap();
        insta::assert_json_snapshot!(format!("slices-{name}"), slices);
    }
}

#[test]
fn device_classes_snapshot() {
    insta::assert_json_snapshot!("device-classes", device_classes());
}

/// The pair set that keeps an unsatisfiable claim cheap: one pair per GPU × physical NIC
/// at NUMA level or better, not one per GPU × VF.
#[test]
fn mi300x_pairs_are_per_physical_nic_not_per_vf() {
    let topo = profile("mi300x-8");
    let vfs = topo.nics.iter().filter(|n| n.is_vf()).count();
    assert_eq!(vfs, 32, "the profile has 4 VFs per PF");
    let inv = Inventory::from_topology(&topo);
    assert_eq!(inv.nics.len(), 8);
    let cls = topo.classifier();
    let mut expected = 0;
    for g in &inv.gpus {
        for n in &inv.nics {
            if cls.gpu_nic(g.index, n.index).class <= PcieClass::Node {
                expected += 1;
            }
        }
    }
    assert_eq!(expected, 32, "4 GPUs × 4 NICs per NUMA node × 2");
    assert_eq!(inv.pairs.len(), expected);
    // Each NIC counter counts the PF and its 4 VFs.
    for n in &inv.nics {
        assert_eq!(n.functions.len(), 5, "{}", n.name);
        assert_eq!(n.functions[0].vf, None);
    }
    let slices = resource_slices(&topo, "n1", &PublishOptions::default()).unwrap();
    let pairs: usize = slices
        .iter()
        .flat_map(|s| s.spec.devices.iter().flatten())
        .filter(|d| d.name.starts_with("pair-"))
        .count();
    assert_eq!(pairs, 32);
    let counters: Vec<_> = slices
        .iter()
        .flat_map(|s| s.spec.shared_counters.iter().flatten())
        .flat_map(|cs| cs.counters.iter())
        .filter(|(k, _)| k.starts_with("nic-"))
        .map(|(_, v)| v.value.0.clone())
        .collect();
    assert_eq!(counters, vec!["5"; 8]);
}

#[test]
fn pairs_are_listed_best_first_with_the_published_attributes() {
    let topo = profile("dgx-h100");
    let slices = resource_slices(&topo, "n1", &PublishOptions::default()).unwrap();
    let devices: Vec<_> = slices
        .iter()
        .flat_map(|s| s.spec.devices.iter().flatten())
        .collect();
    let ranks: Vec<i64> = devices
        .iter()
        .filter(|d| d.name.starts_with("pair-"))
        .map(|d| d.attributes.as_ref().unwrap()[attr::RANK].int.unwrap())
        .collect();
    assert!(ranks.windows(2).all(|w| w[0] <= w[1]), "{ranks:?}");
    assert_eq!(ranks[0], 0, "dgx-h100 has PIX pairs");
    let first = devices[0].attributes.as_ref().unwrap();
    for k in [
        attr::GPU_PCI_BUS_ID,
        attr::NIC_PCI_BUS_ID,
        attr::CLASS,
        attr::GPU,
        attr::NIC,
        attr::GDR,
    ] {
        assert!(first.contains_key(k), "pair lacks {k}");
    }
    assert!(
        !first.contains_key(attr::PCI_BUS_ID),
        "a pair is two PCI functions"
    );
    // Every device that is one PCI function carries the standard pciBusID.
    for d in devices.iter().filter(|d| !d.name.starts_with("pair-")) {
        assert!(
            d.attributes
                .as_ref()
                .unwrap()
                .contains_key(attr::PCI_BUS_ID),
            "{}",
            d.name
        );
    }
    // The class selector names the driver.
    let pair_class = device_classes()
        .into_iter()
        .find(|c| c.metadata.name.as_deref() == Some(CLASS_PAIR))
        .unwrap();
    let selectors = pair_class.spec.unwrap().selectors.unwrap();
    let expr = &selectors[0].cel.as_ref().unwrap().expression;
    assert!(
        expr.contains(DRIVER_NAME) && expr.contains("\"pair\""),
        "{expr}"
    );
}

#[test]
fn unknown_numa_is_not_published() {
    let mut topo = profile("pcie-2socket");
    for d in &mut topo.pci {
        d.numa_node = None;
    }
    let slices = resource_slices(&topo, "n1", &PublishOptions::default()).unwrap();
    for d in slices.iter().flat_map(|s| s.spec.devices.iter().flatten()) {
        let a = d.attributes.as_ref().unwrap();
        assert!(!a.contains_key(attr::NUMA_NODE_STD), "{}", d.name);
        assert!(!a.contains_key(attr::NUMA_NODE), "{}", d.name);
    }
}

#[test]
fn generation_names_and_node_are_consistent() {
    let topo = profile("mi300x-8");
    let opts = PublishOptions {
        generation: 7,
        ..Default::default()
    };
    let a = resource_slices(&topo, "gpu-node-3", &opts).unwrap();
    let b = resource_slices(&topo, "gpu-node-3", &opts).unwrap();
    assert_eq!(a, b, "deterministic");
    let names: BTreeSet<_> = a.iter().map(|s| s.metadata.name.clone().unwrap()).collect();
    assert_eq!(
        names,
        BTreeSet::from([
            "gpu-node-3-topoalign-dev-counters-0".to_string(),
            "gpu-node-3-topoalign-dev-devices-0".to_string()
        ])
    );
    for s in &a {
        assert_eq!(s.spec.pool.generation, 7);
        assert_eq!(s.spec.pool.name, "gpu-node-3");
        assert_eq!(s.spec.node_name.as_deref(), Some("gpu-node-3"));
        assert_eq!(s.spec.driver, DRIVER_NAME);
    }
}

#[test]
fn plain_devices_can_be_left_out() {
    let topo = profile("gb300-4");
    let opts = PublishOptions {
        plain_devices: false,
        ..Default::default()
    };
    let inv = Inventory::new(&topo, &opts);
    assert!(inv.devices().iter().all(|d| d.kind() == DeviceKind::Pair));
    assert!(inv.device(&inv.gpus[0].name).is_none());
    assert!(inv.device(&inv.pairs[0].name).is_some());
}

#[test]
fn bad_node_names_are_refused_with_the_reason() {
    let topo = profile("gb300-4");
    for bad in ["", "Node_1", "-n", &"a".repeat(250)] {
        let err = resource_slices(&topo, bad, &PublishOptions::default()).unwrap_err();
        assert!(err.to_string().contains("node name"), "{err}");
    }
}
