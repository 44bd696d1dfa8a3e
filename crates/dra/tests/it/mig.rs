//! Static MIG in the pool: MIG devices and MIG×NIC pairs on a mixed-geometry DGX H100,
//! within the API limits, and the stock allocator's model over them: a memory slice is
//! never given twice, a whole GPU never with one of its instances, and one-slice claims
//! fill one GPU before the next.

use std::collections::{BTreeMap, BTreeSet};

use topoalign_dra::DeviceRef;
use topoalign_dra::publish::{MigInstance, MigJoinError};
use topoalign_dra::{
    DraError,
    claim::ClaimSpec,
    publish::{Inventory, NodeMig, PublishOptions, resource_slices, slices_for},
};
use topoalign_mig::{MigState, Placement, lookup, state_from_placements};
use topoalign_profiles as profiles;
use topoalign_topology::Bdf;

use crate::mig_pool::{Claim, Node, Stream, allocate, cells, id, mig, random_stream};

fn p(profile: &str, start: u8) -> Placement {
    Placement {
        profile: profile.into(),
        start,
    }
}

/// GPUs 0 and 1: seven 1g.10gb; GPU 2: 4g.40gb + 3g.40gb; GPU 3: three 2g.20gb and a
/// 1g.20gb; GPUs 4–7 without MIG.
fn mixed_state() -> MigState {
    let h100 = lookup("h100-80gb").unwrap();
    let sevens: Vec<Placement> = (0..7).map(|s| p("1g.10gb", s)).collect();
    state_from_placements(
        h100,
        &[
            (0, sevens.clone()),
            (1, sevens),
            (2, vec![p("4g.40gb", 0), p("3g.40gb", 4)]),
            (
                3,
                vec![
                    p("2g.20gb", 0),
                    p("2g.20gb", 2),
                    p("2g.20gb", 4),
                    p("1g.20gb", 6),
                ],
            ),
        ],
    )
    .unwrap()
}

fn mixed_node() -> Node {
    let topo = profiles::get("dgx-h100").unwrap();
    let opts = PublishOptions {
        mig: NodeMig::join(&topo, &mixed_state()).unwrap(),
        ..Default::default()
    };
    let slices = resource_slices(&topo, "n1", &opts).unwrap();
    let inv = Inventory::new(&topo, &opts);
    Node { topo, inv, slices }
}

#[test]
fn the_mixed_node_publishes_instances_and_pairs_within_the_limits() {
    let nd = mixed_node();
    assert_eq!(crate::common::check_limits(&nd.slices), Ok(()));
    assert_eq!(nd.inv.migs.len(), 7 + 7 + 2 + 4);
    // Each instance pairs with every NIC its parent pairs with.
    for m in &nd.inv.migs {
        let parent_pairs = nd.inv.pairs.iter().filter(|p| p.gpu == m.gpu).count();
        let own = nd
            .inv
            .mig_pairs
            .iter()
            .filter(|p| p.mig == nd.inv.migs.iter().position(|x| x == m).unwrap())
            .count();
        assert_eq!(own, parent_pairs, "{}", m.name);
    }
    let devices: Vec<_> = nd
        .slices
        .iter()
        .flat_map(|s| s.spec.devices.iter().flatten())
        .collect();
    assert_eq!(devices.len(), nd.inv.devices().len());
    let sets: usize = nd
        .slices
        .iter()
        .map(|s| s.spec.shared_counters.as_ref().map_or(0, Vec::len))
        .sum();
    // gpus-0 (four GPUs without MIG), four MIG sets, nics-0.
    assert_eq!(sets, 1 + 4 + 1);
    let by_name: BTreeMap<&str, _> = devices.iter().map(|d| (d.name.as_str(), *d)).collect();
    let m = &nd.inv.migs[0];
    let d = by_name[m.name.as_str()];
    assert_eq!(m.name, "gpu-0000-1b-00-0-mig-1g10gb-19-0");
    let a = d.attributes.as_ref().unwrap();
    let s = |k: &str| a[k].string.clone().unwrap();
    assert_eq!(s("type"), "mig");
    assert_eq!(s("profile"), "1g.10gb");
    assert_eq!(s("parentUUID"), nd.topo.gpus[0].uuid.clone().unwrap());
    assert_eq!(s("resource.kubernetes.io/pciBusID"), "0000:1b:00.0");
    assert!(a.contains_key("resource.kubernetes.io/pcieRoot"));
    assert_eq!(a["resource.kubernetes.io/numaNode"].int, Some(0));
    assert_eq!(a["dra.net/numaNode"].int, Some(0));
    let consumes = d.consumes_counters.as_ref().unwrap();
    assert_eq!(consumes.len(), 1);
    assert_eq!(consumes[0].counter_set, "gpu-0000-1b-00-0-counter-set");
    let used: Vec<(&str, &str)> = consumes[0]
        .counters
        .iter()
        .map(|(k, v)| (k.as_str(), v.value.0.as_str()))
        .collect();
    assert_eq!(used, [("memory-slice-0", "1"), ("sm-slices", "1")]);
    // A MIG pair: the instance's counters and one NIC function, two entries.
    let mp = by_name[nd.inv.mig_pairs[0].name.as_str()];
    assert_eq!(mp.consumes_counters.as_ref().unwrap().len(), 2);
    let a = mp.attributes.as_ref().unwrap();
    assert_eq!(a["type"].string.as_deref(), Some("mig-pair"));
    // GPU 0 and its PIX NIC sit on NUMA node 0: the pair does too.
    assert_eq!(a["resource.kubernetes.io/numaNode"].int, Some(0));
    assert_eq!(a["dra.net/numaNode"].int, Some(0));
    assert_eq!(
        a["class"].string.as_deref(),
        Some("PIX"),
        "the parent's class"
    );
    // A GPU in MIG mode is offered through its instances only (static MIG: CUDA sees
    // no whole device), neither alone nor in a whole-GPU pair; its counter set still
    // holds every slice.
    assert!(!by_name.contains_key("gpu-0000-1b-00-0"));
    assert!(
        !by_name
            .keys()
            .any(|n| n.starts_with("pair-") && n.contains("1b-00-0") && !n.contains("-mig-")),
        "a whole-GPU pair of a MIG-mode GPU is published"
    );
    let plain = by_name["gpu-0000-9d-00-0"];
    assert_eq!(
        plain.consumes_counters.as_ref().unwrap()[0].counter_set,
        "gpus-0"
    );
    assert!(
        !plain
            .attributes
            .as_ref()
            .unwrap()
            .contains_key("migEnabled")
    );
    println!(
        "FIGURE mixed dgx-h100: {} devices ({} MIG, {} MIG pairs) in {} slices, {sets} counter sets",
        devices.len(),
        nd.inv.migs.len(),
        nd.inv.mig_pairs.len(),
        nd.slices.len()
    );
}

#[test]
fn without_instances_the_pool_is_the_one_without_mig() {
    let topo = profiles::get("dgx-h100").unwrap();
    let h100 = lookup("h100-80gb").unwrap();
    let empty = state_from_placements(h100, &[(0, vec![]), (5, vec![])]).unwrap();
    let opts = PublishOptions {
        mig: NodeMig::join(&topo, &empty).unwrap(),
        ..Default::default()
    };
    assert!(opts.mig.is_empty());
    assert_eq!(
        resource_slices(&topo, "n1", &opts).unwrap(),
        resource_slices(&topo, "n1", &PublishOptions::default()).unwrap()
    );
}

#[test]
fn seven_one_slice_claims_land_on_one_gpu_and_the_eighth_on_the_next() {
    let nd = mixed_node();
    let mut held = BTreeSet::new();
    let mut parents = Vec::new();
    for _ in 0..8 {
        let got = allocate(&nd, &held, &mig("1g.10gb", 1, false)).unwrap();
        assert_eq!(got.len(), 1);
        let (_, g) = nd.inv.device(&got[0]).unwrap().mig().unwrap();
        parents.push(g.bdf.to_string());
        held.insert(id(&got[0]));
    }
    assert_eq!(parents[..7], ["0000:1b:00.0"; 7]);
    assert_eq!(parents[7], "0000:43:00.0");
    // Whole-GPU pairs come from the four GPUs not in MIG mode only: four fit, five do not.
    let four = allocate(&nd, &held, &Claim::Pairs(ClaimSpec::pairs(4))).unwrap();
    let gpus: BTreeSet<String> = four
        .iter()
        .map(|d| nd.inv.device(d).unwrap().gpu().unwrap().bdf.to_string())
        .collect();
    assert_eq!(gpus.len(), 4);
    assert!(
        four.iter()
            .all(|d| !nd.inv.device(d).unwrap().gpu().unwrap().mig_enabled),
        "{gpus:?}"
    );
    assert!(allocate(&nd, &held, &Claim::Pairs(ClaimSpec::pairs(5))).is_none());
}

#[test]
fn mig_pairs_take_the_parents_best_nic_first() {
    let nd = mixed_node();
    let got = allocate(&nd, &BTreeSet::new(), &mig("1g.10gb", 2, true)).unwrap();
    let classes: Vec<String> = got
        .iter()
        .map(|d| match nd.inv.device(d).unwrap() {
            DeviceRef::MigPair { parent_pair, .. } => parent_pair.path.class.as_str().into(),
            other => panic!("{} is not a MIG pair", other.name()),
        })
        .collect();
    assert_eq!(classes, ["PIX", "PIX"], "{got:?}");
    // One NIC function each: GPU 0's PIX NIC has one, so the second is on GPU 1.
    assert_ne!(cells(&nd.inv, &got[0])[0].0, cells(&nd.inv, &got[1])[0].0);
}

/// A random stream of claims and deletions (MIG devices of every profile, MIG pairs,
/// whole GPUs, GPU pairs): no memory slice is ever held twice, so never a whole GPU and
/// one of its instances.
#[test]
fn random_claims_never_give_a_memory_slice_twice() {
    let nd = mixed_node();
    let profiles = ["1g.10gb", "4g.40gb", "3g.40gb", "2g.20gb", "1g.20gb"];
    let (placed, refused) = random_stream(
        &nd,
        &Stream {
            seed: 23,
            steps: 400,
            profiles: &profiles,
            max_pairs: 3,
            kinds: 4,
        },
    );
    assert!(
        placed > 100 && refused > 10,
        "{placed} placed, {refused} refused"
    );
}

#[test]
fn a_state_that_does_not_fit_the_topology_is_refused_with_the_reason() {
    let topo = profiles::get("dgx-h100").unwrap();
    let h100 = lookup("h100-80gb").unwrap();
    let a100 = lookup("a100-40gb").unwrap();
    let one = |index: u32| state_from_placements(h100, &[(index, vec![p("7g.80gb", 0)])]);
    // An index past the node's 8 GPUs.
    let e = NodeMig::join(&topo, &one(8).unwrap()).unwrap_err();
    assert!(
        matches!(e, MigJoinError::UnknownIndex { index: 8, count: 8 }),
        "{e}"
    );
    // A UUID the node lacks.
    let mut s = one(0).unwrap();
    s.gpus[0].uuid = Some("GPU-00000000-dead-beef-0000-000000000000".into());
    let e = NodeMig::join(&topo, &s).unwrap_err().to_string();
    assert!(
        e.contains("GPU-00000000-dead-beef") && e.contains("expected one of"),
        "{e}"
    );
    // The UUID of GPU 3 and index 3: twice the same GPU.
    let mut s = state_from_placements(h100, &[(1, vec![]), (3, vec![])]).unwrap();
    s.gpus[0].uuid = topo.gpus[3].uuid.clone();
    let e = NodeMig::join(&topo, &s).unwrap_err();
    assert!(matches!(e, MigJoinError::Twice { .. }), "{e}");
    // An A100 state on H100s.
    let s = state_from_placements(a100, &[(0, vec![p("7g.40gb", 0)])]).unwrap();
    let e = NodeMig::join(&topo, &s).unwrap_err().to_string();
    assert!(e.contains("a100-40gb") && e.contains("h100-80gb"), "{e}");
    // Overlapping placements and an unknown profile, as a hand-made state would have.
    let mut s = one(0).unwrap();
    let mut second = s.gpus[0].instances[0].clone();
    second.profile = "1g.10gb".into();
    second.start = 3;
    second.id = 2;
    s.gpus[0].instances.push(second.clone());
    let e = NodeMig::join(&topo, &s).unwrap_err().to_string();
    assert!(e.contains("overlaps"), "{e}");
    s.gpus[0].instances[1].profile = "1g.5gb".into();
    let e = NodeMig::join(&topo, &s).unwrap_err().to_string();
    assert!(e.contains("unknown profile `1g.5gb`"), "{e}");
    // GPUs whose model has no MIG table (L40S), with a state that names none.
    let pcie = profiles::get("pcie-2socket").unwrap();
    let mut s = one(0).unwrap();
    s.gpus[0].model = None;
    s.gpus[0].name = None;
    let e = NodeMig::join(&pcie, &s).unwrap_err().to_string();
    assert!(e.contains("no known MIG profile table"), "{e}");
}

#[test]
fn a_layout_of_another_node_is_refused_at_publish() {
    let topo = profiles::get("dgx-h100").unwrap();
    let h100 = lookup("h100-80gb").unwrap();
    let mut mig = NodeMig::join(&topo, &mixed_state()).unwrap();
    mig.gpus.push(
        topoalign_dra::publish::MigGpuLayout::new(
            Bdf::new(0, 0xee, 0, 0),
            9,
            h100,
            vec![MigInstance::planned(h100, topoalign_mig::Shape::Seven, 0)],
        )
        .unwrap(),
    );
    let opts = PublishOptions {
        mig,
        ..Default::default()
    };
    let e = resource_slices(&topo, "n1", &opts).unwrap_err();
    assert!(
        matches!(e, DraError::Mig(MigJoinError::NotInTopology { .. })),
        "{e}"
    );
    // Without pair devices, MIG pairs go too; MIG devices stay.
    let opts = PublishOptions {
        mig: NodeMig::join(&topo, &mixed_state()).unwrap(),
        pair_devices: false,
        ..Default::default()
    };
    let inv = Inventory::new(&topo, &opts);
    assert!(inv.mig_pairs.is_empty());
    assert_eq!(inv.migs.len(), 20);
    let slices = slices_for(&inv, "n1", 1).unwrap();
    assert_eq!(crate::common::check_limits(&slices), Ok(()));
}

fn alloc(device: &str) -> topoalign_dra::alloc::AllocatedDevice {
    topoalign_dra::alloc::AllocatedDevice {
        request: "mig".into(),
        driver: "topoalign.dev".into(),
        pool: "n1".into(),
        device: device.into(),
    }
}

/// Prepare, the last gate: a held whole GPU keeps its instances, a held instance keeps
/// its whole GPU; instances of one GPU go to different claims.
#[test]
fn prepare_keeps_whole_gpus_and_their_instances_apart() {
    use topoalign_dra::prepare::{Holdings, prepare_allocation};
    let nd = mixed_node();
    let gpu0 = "gpu-0000-1b-00-0";
    let (m0, m1) = (&nd.inv.migs[0].name, &nd.inv.migs[1].name);
    let mut held = Holdings::default();
    let first = prepare_allocation(&nd.inv, "n1", &[alloc(m0)], &held).unwrap();
    assert_eq!(first[0].mig.as_ref().unwrap().instance.profile, "1g.10gb");
    assert!(first[0].gpu.is_none(), "an instance does not take its GPU");
    held.add("claim-a", &first);
    // Another instance of GPU 0: fine.
    prepare_allocation(&nd.inv, "n1", &[alloc(m1)], &held).unwrap();
    // The whole GPU 0: memory slice 0 is claim-a's.
    let e = prepare_allocation(&nd.inv, "n1", &[alloc(gpu0)], &held)
        .unwrap_err()
        .to_string();
    assert!(e.contains("memory slice 0") && e.contains("claim-a"), "{e}");
    // The other way round.
    let mut held = Holdings::default();
    let whole = prepare_allocation(&nd.inv, "n1", &[alloc(gpu0)], &held).unwrap();
    held.add("claim-b", &whole);
    let e = prepare_allocation(&nd.inv, "n1", &[alloc(m1)], &held)
        .unwrap_err()
        .to_string();
    assert!(e.contains("claim-b"), "{e}");
}

/// A MIG pair's CDI: the parent's device nodes, the NIC's, `UCX_NET_DEVICES` and no
/// NCCL variable; the instance's UUID for the NVIDIA hook.
#[test]
fn a_mig_pair_claim_gets_ucx_variables_and_no_nccl_ones() {
    use topoalign_dra::prepare::{CdiPlan, Holdings, compose_cdi, prepare_allocation};
    let topo = profiles::get("dgx-h100").unwrap();
    let mut state = mixed_state();
    state.gpus[0].instances[0].mig_devices = vec![topoalign_mig::MigDevice {
        line: 2,
        profile: "1g.10gb".into(),
        device: 0,
        uuid: "MIG-0a6e3c51-2b7d-5e48-9f13-6d2c8b4a7e01".into(),
    }];
    let opts = PublishOptions {
        mig: NodeMig::join(&topo, &state).unwrap(),
        ..Default::default()
    };
    let inv = Inventory::new(&topo, &opts);
    let pair = inv
        .mig_pairs
        .iter()
        .find(|p| inv.migs[p.mig].instance.uuid.is_some())
        .unwrap();
    let prepared =
        prepare_allocation(&inv, "n1", &[alloc(&pair.name)], &Holdings::default()).unwrap();
    let vendor = BTreeMap::new();
    let plan = CdiPlan {
        vendor_ids: &vendor,
        vendor_mig_ids: &Default::default(),
        nvidia_node: true,
    };
    let cdi = compose_cdi("uid-1", &prepared, &plan);
    let spec = cdi.spec.unwrap();
    let env = &spec.container_edits.env;
    assert!(
        env.iter().any(|e| e == "UCX_NET_DEVICES=mlx5_0:1"),
        "{env:?}"
    );
    assert!(!env.iter().any(|e| e.starts_with("NCCL_")), "{env:?}");
    assert!(
        env.iter()
            .any(|e| e == "NVIDIA_VISIBLE_DEVICES=MIG-0a6e3c51-2b7d-5e48-9f13-6d2c8b4a7e01"),
        "{env:?}"
    );
    let nodes: Vec<&str> = spec.devices[0]
        .container_edits
        .device_nodes
        .iter()
        .map(|n| n.path.as_str())
        .collect();
    assert!(nodes.contains(&"/dev/nvidia0"), "{nodes:?}");
}
