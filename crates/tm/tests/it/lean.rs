//! The lean admission ([`topoalign_tm::LeanPod`]) answers exactly as the full
//! simulation does ([`Brief::of`] its outcome): random profiles, every policy and scope,
//! `prefer-closest-numa-nodes`, the static CPU and memory managers (which take the full
//! path), pods of one or two app containers with init containers and sidecars, device
//! resources of every kind (GPUs, VFs, PFs, a GPU resource mapped to every GPU, MIG,
//! unknown ones), plugin allocators of both kinds, usages valid and refused, four draws
//! per node state.

use proptest::prelude::*;
use topoalign_kube_types::kubelet_settings::{CpuPolicy, MemoryPolicy};
use topoalign_rng::Rng;
use topoalign_tm::{Brief, LeanPod, Pod, Prepared, Quantity, ResourceMap, Usage};
use topoalign_topology::pci::{class, vendor};
use topoalign_topology::{
    Bdf, CpuSet, Gpu, GpuVendor, Nic, PciKind, Sriov, Topology, TopologyBuilder,
};

use crate::prepared::{random_admission, random_node};

/// A resource map with random allocator overrides and an extra GPU resource.
fn random_resources(rng: &mut Rng) -> ResourceMap {
    let mut r = ResourceMap::default();
    if rng.below(3) == 0 {
        r.add_spec("example.com/any-gpu=gpus", "test").unwrap();
    }
    for name in [
        "nvidia.com/gpu",
        "amd.com/gpu",
        "nvidia.com/sriov-rdma-vf",
        "rdma/hca",
        "example.com/any-gpu",
    ] {
        match rng.below(5) {
            0 => r
                .set_allocator_spec(&format!("{name}=lowest-address"), "test")
                .unwrap(),
            1 => r
                .set_allocator_spec(&format!("{name}=unsorted:{}", rng.below(9)), "test")
                .unwrap(),
            _ => {}
        }
    }
    r
}

/// Sometimes devices whose NUMA node the kernel does not report (`numa_node` -1): pools
/// mixing devices with and without a NUMA node, or without any.
fn forget_some_numa(rng: &mut Rng, topo: &mut Topology) {
    let every = rng.below(3) == 0;
    if rng.below(3) != 0 && !every {
        return;
    }
    let pcis: Vec<usize> = (topo.gpus.iter().map(|g| g.pci))
        .chain(topo.nics.iter().map(|n| n.pci))
        .collect();
    for pci in pcis {
        if every || rng.below(3) == 0 {
            topo.pci[pci].numa_node = None;
        }
    }
}

/// A random pod (sometimes with a second app container, or the extra GPU resource) and
/// usage (sometimes with duplicates or a bad entry).
fn random_case(rng: &mut Rng, topo: &Topology) -> (Pod, Usage) {
    let (mut pod, mut usage) = random_admission(rng, topo);
    if rng.below(4) == 0 {
        let mut c = pod.containers[0].clone();
        c.name = "second".into();
        if rng.below(2) == 0 {
            c.limits.insert(
                "example.com/any-gpu".into(),
                Quantity::from_units(1 + rng.below(3) as i64),
            );
        }
        pod.containers.push(c);
    }
    match rng.below(16) {
        0 if !topo.nics.is_empty() => usage.gpus.push(topo.nic_bdf(0)),
        1 => usage.gpus.extend(usage.gpus.clone()),
        2 => usage.nics.reverse(),
        _ => {}
    }
    (pod, usage)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn the_lean_admission_is_the_full_one(node in any::<u64>(), cases in 1..8usize) {
        let mut rng = Rng::new(node);
        let (mut topo, mut settings) = random_node(&mut rng);
        forget_some_numa(&mut rng, &mut topo);
        // Mostly the lean path: without the static CPU and memory managers.
        if rng.below(4) != 0 {
            settings.cpu_manager_policy = CpuPolicy::None;
            settings.memory_manager_policy = MemoryPolicy::None;
        }
        let resources = random_resources(&mut rng);
        let prepared = Prepared::new(&topo, &settings, &resources);
        for _ in 0..cases {
            let (pod, usage) = random_case(&mut rng, &topo);
            let lean = LeanPod::new(prepared.clone(), &pod);
            prop_assert_eq!(lean.relevant_usage(&usage), prepared.relevant_usage(&pod, &usage));
            match lean.state(&usage) {
                Err(e) => prop_assert_eq!(Err(e), prepared.simulate(&pod, &usage, 0)),
                Ok(state) => {
                    for seed in 0..4 {
                        let full = prepared.simulate(&pod, &usage, seed).map(|o| Brief::of(&o));
                        prop_assert_eq!(state.admit(seed), full, "seed {}", seed);
                    }
                }
            }
        }
    }
}

/// The random cases reach the lean path's every answer: admitted, refused by the
/// Topology Manager, refused by the allocation, and errors.
#[test]
fn the_lean_cases_cover_every_answer() {
    let (mut admitted, mut unaligned, mut unexpected, mut errors) = (0, 0, 0, 0);
    for node in 0..300u64 {
        let mut rng = Rng::new(node);
        let (mut topo, mut settings) = random_node(&mut rng);
        forget_some_numa(&mut rng, &mut topo);
        settings.cpu_manager_policy = CpuPolicy::None;
        settings.memory_manager_policy = MemoryPolicy::None;
        let resources = random_resources(&mut rng);
        let prepared = Prepared::new(&topo, &settings, &resources);
        let (pod, usage) = random_case(&mut rng, &topo);
        let lean = LeanPod::new(prepared.clone(), &pod);
        match lean.state(&usage).and_then(|s| s.admit(0)) {
            Ok(b) if b.admitted => admitted += 1,
            Ok(b) if b.reason.as_deref() == Some("TopologyAffinityError") => unaligned += 1,
            Ok(_) => unexpected += 1,
            Err(_) => errors += 1,
        }
    }
    assert!(
        admitted > 40 && unaligned > 5 && unexpected > 0 && errors > 10,
        "{admitted} {unaligned} {unexpected} {errors}"
    );
}

/// A node whose VF pool (four PFs of 40 VFs) is larger than the sets the lean admission
/// keeps inline (128 devices): four GPU + NIC pairs, each under its own switch, two per
/// NUMA node.
fn many_vfs() -> Topology {
    let mut b = TopologyBuilder::new("many-vfs");
    b.numa_node(0, CpuSet::range(0, 7), Some(1 << 24), vec![10, 21], Some(0));
    b.numa_node(
        1,
        CpuSet::range(8, 15),
        Some(1 << 24),
        vec![21, 10],
        Some(1),
    );
    for i in 0..4u8 {
        let numa = Some(u32::from(i >= 2));
        let root = 0x10 + 0x20 * i;
        let hb = b.host_bridge(0, root);
        let rp = b.bridge(
            hb,
            Bdf::new(0, root, 1, 0),
            PciKind::RootPort,
            numa,
            (root + 1, root + 4),
            None,
        );
        let up = (root + 2, root + 4);
        let usp = b.bridge(
            rp,
            Bdf::new(0, root + 1, 0, 0),
            PciKind::SwitchUpstream,
            numa,
            up,
            None,
        );
        let down = |b: &mut TopologyBuilder, k: u8| {
            let sec = root + 3 + k;
            b.bridge(
                usp,
                Bdf::new(0, root + 2, k, 0),
                PciKind::SwitchDownstream,
                numa,
                (sec, sec),
                None,
            )
        };
        let (gpu_port, nic_port) = (down(&mut b, 0), down(&mut b, 1));
        let gpu = b.endpoint(
            gpu_port,
            Bdf::new(0, root + 3, 0, 0),
            vendor::NVIDIA,
            0x2330,
            class::DISPLAY_3D,
            numa,
            None,
        );
        b.gpu(Gpu::on(gpu, GpuVendor::Nvidia));
        let nic = |b: &mut TopologyBuilder, at: Bdf| {
            let pci = b.endpoint(
                nic_port,
                at,
                vendor::MELLANOX,
                0x1021,
                class::ETHERNET,
                numa,
                None,
            );
            let mut n = Nic::on(pci);
            n.rdma = Some(format!("mlx5_{}", at.function));
            n
        };
        let pf_at = Bdf::new(0, root + 4, 0, 0);
        let vfs: Vec<Bdf> = (1..=40u8)
            .map(|k| Bdf::new(0, root + 4, k / 8, k % 8))
            .collect();
        let mut pf = nic(&mut b, pf_at);
        pf.sriov = Sriov::Pf {
            total_vfs: 64,
            vfs: vfs.clone(),
        };
        b.nic(pf);
        for (k, at) in vfs.into_iter().enumerate() {
            let mut vf = nic(&mut b, at);
            vf.sriov = Sriov::Vf {
                pf: pf_at,
                index: k as u32,
            };
            b.nic(vf);
        }
    }
    b.build().unwrap()
}

/// The lean admission is the full one where its sets are too large to be inline.
#[test]
fn the_lean_admission_is_the_full_one_on_large_pools() {
    let topo = many_vfs();
    assert_eq!(topo.nics.len(), 4 * 41);
    let mut covered = (0, 0);
    for node in 0..96u64 {
        let mut rng = Rng::new(node);
        let (_, mut settings) = random_node(&mut rng);
        settings.cpu_manager_policy = CpuPolicy::None;
        settings.memory_manager_policy = MemoryPolicy::None;
        let resources = random_resources(&mut rng);
        let prepared = Prepared::new(&topo, &settings, &resources);
        for _ in 0..4 {
            let (mut pod, mut usage) = random_case(&mut rng, &topo);
            // VFs, from a few to nearly all of them in use (a few free on one NUMA
            // node is where the counts decide).
            let vfs = (
                "nvidia.com/sriov-rdma-vf".to_string(),
                1 + rng.below_u64(12),
            );
            pod.containers[0]
                .limits
                .insert(vfs.0, Quantity::from_units(vfs.1 as i64));
            let busy = rng.below(20);
            usage.nics.extend(
                (0..topo.nics.len())
                    .filter(|_| rng.below(20) <= busy)
                    .map(|i| topo.nic_bdf(i)),
            );
            let lean = LeanPod::new(prepared.clone(), &pod);
            assert_eq!(
                lean.relevant_usage(&usage),
                prepared.relevant_usage(&pod, &usage)
            );
            match lean.state(&usage) {
                Err(e) => assert_eq!(Err(e), prepared.simulate(&pod, &usage, 0)),
                Ok(state) => {
                    for seed in 0..4 {
                        let full = prepared.simulate(&pod, &usage, seed).map(|o| Brief::of(&o));
                        let admitted = full.as_ref().is_ok_and(|b| b.admitted);
                        covered = (covered.0 + usize::from(admitted), covered.1 + 1);
                        assert_eq!(state.admit(seed), full, "node {node} seed {seed}");
                    }
                }
            }
        }
    }
    assert!(
        covered.0 > 100 && covered.0 < covered.1 - 100,
        "{covered:?}"
    );
}
