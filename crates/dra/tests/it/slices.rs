//! Slices per built-in profile: snapshots, and the properties the design rests on.

use std::collections::BTreeSet;

use topoalign_dra::{
    DRIVER_NAME, DeviceKind, attr,
    publish::{
        CLASS_PAIR, Inventory, PairsPerGpu, PublishOptions, device_classes, resource_slices,
    },
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
        crate::common::check_limits(&slices).unwrap();
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
    // The NICs have VFs, so by default each GPU gets its best pair and one alternative.
    assert_eq!(inv.pairs.len(), 16);
    let all = Inventory::new(
        &topo,
        &PublishOptions {
            pairs_per_gpu: PairsPerGpu::All,
            ..Default::default()
        },
    );
    assert_eq!(all.pairs.len(), expected);
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
    assert_eq!(pairs, 16);
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

/// The NUMA node a device's attributes put it on, under the standard key, after
/// checking that the compatibility key and the driver's own agree with it.
fn numa_of(d: &k8s_openapi::api::resource::v1::Device) -> Option<i64> {
    let a = d.attributes.as_ref().unwrap();
    let std = a.get(attr::NUMA_NODE_STD).and_then(|v| v.int);
    let compat = a.get(attr::NUMA_NODE_COMPAT).and_then(|v| v.int);
    assert_eq!(
        std, compat,
        "{}: standard and compatibility keys differ",
        d.name
    );
    std
}

#[test]
fn every_device_on_one_numa_node_says_so_under_the_standard_and_compat_keys() {
    for name in profiles::NAMES {
        let topo = profile(name);
        let slices = resource_slices(&topo, "n1", &PublishOptions::default()).unwrap();
        let devices: Vec<_> = slices
            .iter()
            .flat_map(|s| s.spec.devices.iter().flatten())
            .collect();
        let by_name = |n: &str| devices.iter().find(|d| d.name == n).copied();
        let mut pairs = 0;
        for d in &devices {
            let a = d.attributes.as_ref().unwrap();
            let own = a.get(attr::NUMA_NODE).and_then(|v| v.int);
            match a.get(attr::TYPE).and_then(|v| v.string.as_deref()) {
                Some("pair") => {
                    pairs += 1;
                    let gpu = a[attr::GPU].string.as_deref().unwrap();
                    let nic = a[attr::NIC].string.as_deref().unwrap();
                    let (g, n) = (
                        numa_of(by_name(gpu).unwrap()),
                        numa_of(by_name(nic).unwrap()),
                    );
                    let want = g.filter(|g| Some(*g) == n);
                    assert_eq!(
                        numa_of(d),
                        want,
                        "{name} {}: GPU on {g:?}, NIC on {n:?}",
                        d.name
                    );
                    assert!(
                        want.is_some(),
                        "{name} {}: published pairs are NODE or better",
                        d.name
                    );
                }
                _ => assert_eq!(numa_of(d), own, "{name} {}", d.name),
            }
        }
        assert!(pairs > 0, "{name}");
    }
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
        assert!(!a.contains_key(attr::NUMA_NODE_COMPAT), "{}", d.name);
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

/// The safe mode for API servers that drop counters: plain GPUs and NICs only (plain
/// devices forced on even if asked off), every GPU and NIC once, no pair name resolves;
/// the counter sets are still published, so a readback can tell when they survive.
#[test]
fn without_pair_devices_only_plain_gpus_and_nics_are_published() {
    for name in profiles::NAMES {
        let topo = profile(name);
        let opts = PublishOptions {
            pair_devices: false,
            plain_devices: false,
            ..Default::default()
        };
        let with_pairs = Inventory::from_topology(&topo);
        let inv = Inventory::new(&topo, &opts);
        assert!(inv.pairs.is_empty(), "{name}");
        assert!(inv.plain_devices, "{name}");
        if let Some(p) = with_pairs.pairs.first() {
            assert!(inv.device(&p.name).is_none(), "{name}: {}", p.name);
        }
        let slices = resource_slices(&topo, "node-1", &opts).unwrap();
        crate::common::check_limits(&slices).unwrap();
        let devices: Vec<_> = slices
            .iter()
            .flat_map(|s| s.spec.devices.iter().flatten())
            .collect();
        let kind = |d: &&k8s_openapi::api::resource::v1::Device| {
            d.attributes.as_ref().unwrap()[attr::TYPE]
                .string
                .clone()
                .unwrap()
        };
        assert!(devices.iter().all(|d| kind(d) != "pair"), "{name}");
        let names: BTreeSet<&str> = devices.iter().map(|d| d.name.as_str()).collect();
        let want: BTreeSet<&str> = with_pairs
            .gpus
            .iter()
            .map(|g| g.name.as_str())
            .chain(with_pairs.nics.iter().map(|n| n.name.as_str()))
            .collect();
        assert_eq!(names, want, "{name}");
        assert_eq!(names.len(), devices.len(), "{name}: a device twice");
        let sets: usize = slices
            .iter()
            .map(|s| s.spec.shared_counters.as_ref().map_or(0, Vec::len))
            .sum();
        assert!(sets > 0, "{name}: the counter sets are still published");
    }
}

#[test]
fn bad_node_names_are_refused_with_the_reason() {
    let topo = profile("gb300-4");
    for bad in ["", "Node_1", "-n", &"a".repeat(250)] {
        let err = resource_slices(&topo, bad, &PublishOptions::default()).unwrap_err();
        assert!(err.to_string().contains("node name"), "{err}");
    }
}

/// Pairs per GPU of an inventory, and pairs per NIC.
fn pair_counts(inv: &Inventory) -> (Vec<usize>, Vec<usize>) {
    let mut per_gpu = vec![0; inv.gpus.len()];
    let mut per_nic = vec![0; inv.nics.len()];
    for p in &inv.pairs {
        per_gpu[p.gpu] += 1;
        per_nic[p.nic] += 1;
    }
    (per_gpu, per_nic)
}

#[test]
fn nics_with_vfs_get_two_pairs_per_gpu_spread_over_the_nics() {
    // mi300x-8: 8 GPUs, 4 NICs per NUMA node, 4 VFs per PF. Every GPU keeps its PIX
    // pair and one NODE alternative; every NIC is in exactly two pairs.
    let topo = profile("mi300x-8");
    let inv = Inventory::new(&topo, &PublishOptions::default());
    assert!(inv.nics.iter().all(|n| n.functions.len() == 5));
    assert_eq!(inv.pairs.len(), 16);
    let (per_gpu, per_nic) = pair_counts(&inv);
    assert_eq!(per_gpu, vec![2; 8]);
    assert_eq!(per_nic, vec![2; 8]);
    for gi in 0..inv.gpus.len() {
        let mine: Vec<_> = inv.pairs.iter().filter(|p| p.gpu == gi).collect();
        let best = mine.iter().map(|p| p.path.class).min().unwrap();
        assert_eq!(best, PcieClass::Pix, "GPU {gi} lost its best pair");
        assert!(mine.iter().any(|p| p.path.class == PcieClass::Node));
        // the alternative stays on the GPU's NUMA node
        assert!(
            mine.iter()
                .all(|p| inv.nics[p.nic].numa_node == inv.gpus[gi].numa_node)
        );
    }
    // the alternatives form a ring per NUMA node: GPU i (address order) also pairs with
    // the NIC of GPU i+1, so one used-up NIC strands no GPU
    for gi in 0..inv.gpus.len() {
        let alt = inv
            .pairs
            .iter()
            .find(|p| p.gpu == gi && p.path.class == PcieClass::Node)
            .unwrap();
        let next = if gi % 4 == 3 { gi - 3 } else { gi + 1 };
        let next_best = inv
            .pairs
            .iter()
            .find(|p| p.gpu == next && p.path.class == PcieClass::Pix)
            .unwrap();
        assert_eq!(alt.nic, next_best.nic, "GPU {gi}");
    }
    // every pair is still listed best first
    let prefs: Vec<_> = inv.pairs.iter().map(|p| p.path.preference()).collect();
    assert!(prefs.windows(2).all(|w| w[0] <= w[1]));

    let all = Inventory::new(
        &topo,
        &PublishOptions {
            pairs_per_gpu: PairsPerGpu::All,
            ..Default::default()
        },
    );
    assert_eq!(all.pairs.len(), 32);
    let one = Inventory::new(
        &topo,
        &PublishOptions {
            pairs_per_gpu: PairsPerGpu::AtMost(1),
            ..Default::default()
        },
    );
    assert!(one.pairs.iter().all(|p| p.path.class == PcieClass::Pix));
    assert_eq!(one.pairs.len(), 8);
}

#[test]
fn nics_without_vfs_keep_every_pair_in_auto() {
    for name in ["gb300-4", "dgx-h100", "pcie-2socket"] {
        let topo = profile(name);
        let auto = Inventory::new(&topo, &PublishOptions::default());
        let all = Inventory::new(
            &topo,
            &PublishOptions {
                pairs_per_gpu: PairsPerGpu::All,
                ..Default::default()
            },
        );
        if auto.nics.iter().all(|n| n.functions.len() == 1) {
            assert_eq!(auto.pairs, all.pairs, "{name}");
        }
    }
}

#[test]
fn pairs_per_gpu_parses_and_refuses_with_the_reason() {
    assert_eq!("auto".parse::<PairsPerGpu>().unwrap(), PairsPerGpu::Auto);
    assert_eq!("all".parse::<PairsPerGpu>().unwrap(), PairsPerGpu::All);
    assert_eq!("3".parse::<PairsPerGpu>().unwrap(), PairsPerGpu::AtMost(3));
    for bad in ["0", "-1", "two", ""] {
        let err = bad.parse::<PairsPerGpu>().unwrap_err().to_string();
        assert!(err.contains("expected `auto`, `all`"), "{err}");
    }
}
