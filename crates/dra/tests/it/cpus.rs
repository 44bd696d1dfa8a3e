//! CPUs of dra-driver-cpu beside the pairs (`claims --cpus`): the claim shapes, and what
//! the allocator model gives them on every two-socket profile, in both device modes and
//! both releases' NUMA keys, with other claims holding devices and CPUs.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::resource::v1::{DeviceClass, ResourceSlice};
use topoalign_dra::{
    DraError,
    alloc::{DeviceId, NodeDevices, first_fit},
    attr,
    claim::{
        ClaimShape, ClaimSpec, CpuClaim, CpuMode, CpuRelease, CpuShape, claim_spec,
        cpu_device_class, cpu_slices,
    },
    publish::{Inventory, PublishOptions, device_classes, slices_for},
};
use topoalign_profiles as profiles;
use topoalign_rng::Rng;

const BUDGET: u64 = 5_000_000;

fn with_cpus(pairs: u32, cpus: u32, mode: CpuMode, shape: CpuShape) -> ClaimSpec {
    ClaimSpec {
        cpus: Some(CpuClaim {
            mode,
            shape,
            ..CpuClaim::new(cpus)
        }),
        ..ClaimSpec::pairs(pairs)
    }
}

#[test]
fn cpu_claim_shapes_snapshot() {
    let per_gpu = with_cpus(4, 18, CpuMode::Grouped, CpuShape::PerGpu);
    let one_node = with_cpus(2, 8, CpuMode::Individual, CpuShape::OneNode);
    let mut ladder = with_cpus(2, 4, CpuMode::Grouped, CpuShape::PerGpu);
    ladder.shape = ClaimShape::Ladder;
    let mut k2 = with_cpus(2, 4, CpuMode::Grouped, CpuShape::OneNode);
    k2.nics_per_gpu = 2;
    let mut compat = with_cpus(1, 2, CpuMode::Grouped, CpuShape::PerGpu);
    if let Some(c) = compat.cpus.as_mut() {
        c.numa_attribute = attr::NUMA_NODE_COMPAT.into();
    }
    insta::assert_json_snapshot!("cpus-per-gpu-4-18", claim_spec(&per_gpu).unwrap());
    insta::assert_json_snapshot!("cpus-one-node-2-8", claim_spec(&one_node).unwrap());
    insta::assert_json_snapshot!("cpus-ladder-2-4", claim_spec(&ladder).unwrap());
    insta::assert_json_snapshot!("cpus-k2-one-node", claim_spec(&k2).unwrap());
    insta::assert_json_snapshot!("cpus-compat-1-2", claim_spec(&compat).unwrap());
}

#[test]
fn bad_cpu_requests_are_refused_with_the_reason() {
    let refused = |s: ClaimSpec| claim_spec(&s).unwrap_err().to_string();
    let few = refused(with_cpus(4, 3, CpuMode::Grouped, CpuShape::PerGpu));
    assert!(
        few.contains("--cpus 3: fewer CPUs than the 4 GPUs"),
        "{few}"
    );
    let zero = refused(with_cpus(1, 0, CpuMode::Grouped, CpuShape::OneNode));
    assert!(zero.contains("--cpus must be at least 1"), "{zero}");
    let mut bad_class = with_cpus(1, 2, CpuMode::Grouped, CpuShape::PerGpu);
    if let Some(c) = bad_class.cpus.as_mut() {
        c.class = "Not A Class".into();
    }
    assert!(refused(bad_class).contains("--cpu-class \"Not A Class\""));
    let mut bad_attr = with_cpus(1, 2, CpuMode::Grouped, CpuShape::PerGpu);
    if let Some(c) = bad_attr.cpus.as_mut() {
        c.numa_attribute = "numaNode".into();
    }
    assert!(refused(bad_attr).contains("qualified attribute name"));
    // 16 pairs with their own CPU requests are 32 requests: the most a claim holds.
    assert!(claim_spec(&with_cpus(16, 16, CpuMode::Grouped, CpuShape::PerGpu)).is_ok());
    let e = refused(with_cpus(17, 17, CpuMode::Grouped, CpuShape::PerGpu));
    assert!(e.contains("at most 32"), "{e}");
    assert!(matches!(
        "pinned".parse::<CpuShape>(),
        Err(DraError::BadClaim(m)) if m.contains("per-gpu")
    ));
    assert!("fifo".parse::<CpuMode>().is_err());
}

struct Node {
    slices: Vec<ResourceSlice>,
    classes: Vec<DeviceClass>,
}

fn node(profile: &str, mode: CpuMode, release: CpuRelease) -> Node {
    let topo = profiles::get(profile).unwrap();
    let inv = Inventory::new(&topo, &PublishOptions::default());
    let mut slices = slices_for(&inv, "n1", 1).unwrap();
    slices.extend(cpu_slices(&topo, "n1", mode, release).unwrap());
    let mut classes = device_classes();
    classes.push(cpu_device_class("dra.cpu"));
    Node { slices, classes }
}

/// Every device's NUMA node under `key`, by identity.
fn numa_by_id(slices: &[ResourceSlice], key: &str) -> BTreeMap<(String, String), i64> {
    let mut out = BTreeMap::new();
    for s in slices {
        for d in s.spec.devices.iter().flatten() {
            if let Some(n) = d.attributes.as_ref().and_then(|a| a.get(key)?.int) {
                out.insert((s.spec.driver.clone(), d.name.clone()), n);
            }
        }
    }
    out
}

/// Places some other pods' devices and CPUs on the node: pairs held by id, a share of
/// each CPU group (grouped) or single CPUs (individual).
fn hold_some(n: &Node, rng: &mut Rng, mode: CpuMode) -> NodeDevices {
    let mut devices = NodeDevices::gather(&n.slices, "n1").unwrap();
    let mut held = BTreeSet::new();
    for id in devices.ids() {
        let gpu_or_cpu = id.device.starts_with("gpu-") || id.device.starts_with("cpudev0");
        if gpu_or_cpu && rng.below(4) == 0 {
            held.insert(id.clone());
        }
    }
    devices.mark_in_use(&held);
    if mode == CpuMode::Grouped {
        let groups: Vec<DeviceId> = (devices.ids())
            .filter(|i| i.driver == "dra.cpu")
            .cloned()
            .collect();
        for g in groups {
            let cpus = rng.below(40);
            devices
                .consume_capacity(&g, "dra.cpu/cpu", &cpus.to_string())
                .unwrap();
        }
    }
    devices
}

#[test]
fn every_allocated_cpu_sits_on_its_gpus_numa_node() {
    let mut rng = Rng::new(7);
    let mut checked = 0;
    let mut refused = 0;
    for profile in ["mi300x-8", "gb300-4", "dgx-h100", "pcie-2socket"] {
        for mode in [CpuMode::Grouped, CpuMode::Individual] {
            for (release, key) in [
                (CpuRelease::Main, attr::NUMA_NODE_STD),
                (CpuRelease::V0_2, attr::NUMA_NODE_COMPAT),
            ] {
                let n = node(profile, mode, release);
                let numa = numa_by_id(&n.slices, key);
                for round in 0..12 {
                    let pairs = 1 + rng.below(4) as u32;
                    let cpus = pairs * (1 + rng.below(6) as u32);
                    let shape = match round % 3 {
                        0 => CpuShape::OneNode,
                        _ => CpuShape::PerGpu,
                    };
                    let mut spec = with_cpus(pairs, cpus, mode, shape);
                    if let Some(c) = spec.cpus.as_mut() {
                        c.numa_attribute = key.into();
                    }
                    let claim = claim_spec(&spec).unwrap();
                    let devices = hold_some(&n, &mut rng, mode);
                    let out = first_fit(&claim, &n.classes, &devices, BUDGET).unwrap();
                    let Some(alloc) = out.allocation else {
                        assert!(!out.gave_up, "{profile} {mode}: the search ran out");
                        refused += 1;
                        continue;
                    };
                    // Each request's NUMA node: pairs and CPUs of one GPU agree.
                    let mut by_request: BTreeMap<String, BTreeSet<i64>> = BTreeMap::new();
                    let mut cpu_total = 0;
                    for (a, took) in alloc.iter().zip(&out.consumed) {
                        let node = numa[&(a.driver.clone(), a.device.clone())];
                        let group = match a.request.strip_prefix("cpus-") {
                            Some(i) => format!("pair-{i}"),
                            None if a.request == "cpus" || a.request == "pairs" => "all".into(),
                            None => a.request.clone(),
                        };
                        by_request.entry(group).or_default().insert(node);
                        if a.driver == "dra.cpu" {
                            cpu_total += match mode {
                                CpuMode::Grouped => took["dra.cpu/cpu"].parse::<u32>().unwrap(),
                                CpuMode::Individual => 1,
                            };
                        } else {
                            assert!(took.is_empty(), "a pair is taken whole: {took:?}");
                        }
                    }
                    assert_eq!(cpu_total, cpus, "{profile} {mode} {shape:?}");
                    for (group, nodes) in &by_request {
                        assert_eq!(
                            nodes.len(),
                            1,
                            "{profile} {mode} {shape:?} {group}: {nodes:?}"
                        );
                    }
                    checked += 1;
                }
            }
        }
    }
    println!(
        "FIGURE cpus: {checked} claims allocated with every CPU on its GPU's NUMA node, {refused} refused on busy nodes"
    );
    assert!(checked > 100, "{checked}");
}

#[test]
fn a_standard_key_claim_finds_no_cpu_of_v0_2() {
    // dra-driver-cpu v0.2.0 publishes only dra.net/numaNode: a claim matching the
    // standard key cannot take its CPUs, one matching the compatibility key can.
    let n = node("dgx-h100", CpuMode::Grouped, CpuRelease::V0_2);
    let devices = NodeDevices::gather(&n.slices, "n1").unwrap();
    let std = claim_spec(&with_cpus(2, 4, CpuMode::Grouped, CpuShape::PerGpu)).unwrap();
    let out = first_fit(&std, &n.classes, &devices, BUDGET).unwrap();
    assert!(out.allocation.is_none() && !out.gave_up);
    let mut compat = with_cpus(2, 4, CpuMode::Grouped, CpuShape::PerGpu);
    if let Some(c) = compat.cpus.as_mut() {
        c.numa_attribute = attr::NUMA_NODE_COMPAT.into();
    }
    let out = first_fit(&claim_spec(&compat).unwrap(), &n.classes, &devices, BUDGET).unwrap();
    assert_eq!(out.allocation.map(|a| a.len()), Some(4));
}

#[test]
fn a_grouped_cpu_device_is_shared_until_its_cpus_run_out() {
    let n = node("dgx-h100", CpuMode::Grouped, CpuRelease::Main);
    let mut devices = NodeDevices::gather(&n.slices, "n1").unwrap();
    let group0 = DeviceId {
        driver: "dra.cpu".into(),
        pool: "n1".into(),
        device: "cpudevnuma000".into(),
    };
    let cpus0 = numa_cpus("dgx-h100", 0);
    // All but 3 CPUs of NUMA node 0 held by others: 4 CPUs for a GPU of node 0 do not
    // fit there, so the one-node claim lands on node 1.
    devices
        .consume_capacity(&group0, "dra.cpu/cpu", &(cpus0 - 3).to_string())
        .unwrap();
    let one = claim_spec(&with_cpus(1, 4, CpuMode::Grouped, CpuShape::OneNode)).unwrap();
    let out = first_fit(&one, &n.classes, &devices, BUDGET).unwrap();
    let alloc = out.allocation.unwrap();
    assert_eq!(alloc[1].device, "cpudevnuma001");
    assert_eq!(out.consumed[1]["dra.cpu/cpu"], "4");
    // Three fit on node 0, next to the node's first pair.
    let three = claim_spec(&with_cpus(1, 3, CpuMode::Grouped, CpuShape::OneNode)).unwrap();
    let alloc = first_fit(&three, &n.classes, &devices, BUDGET)
        .unwrap()
        .allocation
        .unwrap();
    assert_eq!(alloc[1].device, "cpudevnuma000");
    // A bad quantity is refused with the device named.
    let e = devices
        .consume_capacity(&group0, "dra.cpu/cpu", "many")
        .unwrap_err();
    assert!(e.to_string().contains("cpudevnuma000"), "{e}");
}

fn numa_cpus(profile: &str, numa: u32) -> u32 {
    let topo = profiles::get(profile).unwrap();
    topo.numa_node(numa).unwrap().cpus.len() as u32
}

#[test]
fn a_prepared_claim_with_held_cpus_searches_as_first_fit_does() {
    // ClaimSearch::search_held (the extender's path: one claim prepared per node kind,
    // each node's held devices and CPU shares told per search) equals first_fit on the
    // node's devices with the same devices held and the same CPUs consumed.
    let mut rng = Rng::new(11);
    for profile in ["mi300x-8", "dgx-h100"] {
        let n = node(profile, CpuMode::Grouped, CpuRelease::Main);
        let full = NodeDevices::gather(&n.slices, "n1").unwrap();
        for round in 0..20 {
            let shape = if round % 2 == 0 {
                CpuShape::PerGpu
            } else {
                CpuShape::OneNode
            };
            let pairs = 1 + rng.below(4) as u32;
            let spec = with_cpus(
                pairs,
                pairs * (1 + rng.below(20) as u32),
                CpuMode::Grouped,
                shape,
            );
            let claim = claim_spec(&spec).unwrap();
            let prepared =
                topoalign_dra::alloc::ClaimSearch::new(&claim, &n.classes, &full).unwrap();
            let ids: Vec<DeviceId> = full.ids().cloned().collect();
            let in_use: Vec<bool> = ids
                .iter()
                .map(|i| i.device.starts_with("gpu-") && rng.below(3) == 0)
                .collect();
            let shares: Vec<(DeviceId, String)> = (ids.iter())
                .filter(|i| i.driver == "dra.cpu")
                .map(|i| (i.clone(), rng.below(60).to_string()))
                .collect();
            let held = full
                .shared_held(shares.iter().map(|(i, q)| (i, "dra.cpu/cpu", q.as_str())))
                .unwrap();
            let found = prepared.search_held(&in_use, &held, BUDGET);
            let mut alone = full.clone();
            let busy: BTreeSet<DeviceId> = (ids.iter().zip(&in_use))
                .filter(|(_, u)| **u)
                .map(|(i, _)| i.clone())
                .collect();
            alone.mark_in_use(&busy);
            for (i, q) in &shares {
                alone.consume_capacity(i, "dra.cpu/cpu", q).unwrap();
            }
            let want = first_fit(&claim, &n.classes, &alone, BUDGET).unwrap();
            let got: Option<Vec<String>> =
                (found.devices).map(|d| d.iter().map(|p| ids[*p].device.clone()).collect());
            let want: Option<Vec<String>> =
                (want.allocation).map(|a| a.iter().map(|d| d.device.clone()).collect());
            assert_eq!(got, want, "{profile} round {round}");
        }
    }
}
