//! A node prepared once answers every admission as a fresh simulation does: random
//! profiles, kubelet settings (valid and refused), pods (GPUs, VFs, PFs, MIG, unknown
//! resources, Guaranteed CPUs and memory, init containers and sidecars) and usages, many
//! admissions per prepared node.

use std::collections::BTreeMap;

use proptest::prelude::*;
use topoalign_kube_types::kubelet_settings::{CpuPolicy, MemoryPolicy, Policy, Scope, Settings};
use topoalign_rng::Rng;
use topoalign_tm::{Case, Pod, Prepared, Quantity, ResourceMap, Usage, simulate};
use topoalign_topology::{CpuSet, Topology};

/// A random node: a built-in profile and kubelet settings the kubelet may refuse.
pub(crate) fn random_node(rng: &mut Rng) -> (Topology, Settings) {
    let names = topoalign_profiles::NAMES;
    let topo = topoalign_profiles::get(names[rng.below(names.len())]).unwrap();
    let policies = [
        Policy::None,
        Policy::BestEffort,
        Policy::Restricted,
        Policy::SingleNumaNode,
    ];
    let mut s = Settings {
        topology_manager_policy: policies[rng.below(policies.len())],
        topology_manager_scope: if rng.below(2) == 0 {
            Scope::Container
        } else {
            Scope::Pod
        },
        ..Settings::default()
    };
    if rng.below(4) == 0 {
        let v = if rng.below(4) == 0 { "maybe" } else { "true" };
        (s.topology_manager_policy_options).insert("prefer-closest-numa-nodes".into(), v.into());
    }
    if rng.below(2) == 0 {
        s.cpu_manager_policy = CpuPolicy::Static;
        match rng.below(8) {
            0 => {} // no reserved CPUs: refused
            1 => s.reserved_system_cpus = Some(CpuSet::from_ids([0, 1, 100_000])),
            2 | 3 => s.reserved_system_cpus = Some(CpuSet::from_ids([0, 1])),
            _ => s.reserved_cpu_millis = 1000 * (1 + rng.below_u64(4)),
        }
    }
    if rng.below(3) == 0 {
        s.memory_manager_policy = MemoryPolicy::Static;
        if rng.below(8) != 0 {
            s.reserved_memory = topo.numa.iter().map(|n| (n.id, 1 << 30)).collect();
        }
    }
    (topo, s)
}

/// A random pod and usage on `topo`.
pub(crate) fn random_admission(rng: &mut Rng, topo: &Topology) -> (Pod, Usage) {
    let resources = [
        "nvidia.com/gpu",
        "amd.com/gpu",
        "nvidia.com/sriov-rdma-vf",
        "rdma/hca",
        "nvidia.com/mig-1g.10gb",
        "example.com/unknown",
    ];
    let mut devices = Vec::new();
    for (i, r) in resources.iter().enumerate() {
        let odds = [2, 2, 2, 8, 8, 20][i];
        if rng.below(odds) == 0 {
            devices.push((r.to_string(), 1 + rng.below_u64(5)));
        }
    }
    let (cpus, memory) = match rng.below(3) {
        0 => (None, None),
        1 => (
            Some(Quantity::from_units(1 + rng.below(16) as i64)),
            Some(Quantity::from_units(1 << (20 + rng.below(14)))),
        ),
        _ => (None, Some(Quantity::from_units(1 << 30))),
    };
    let mut pod = Pod::from_flags(&devices, cpus, memory).unwrap();
    if rng.below(3) == 0 {
        // An init container (or sidecar) asking as much: device and CPU reuse.
        let mut init = pod.containers[0].clone();
        init.name = "init".into();
        init.restartable = rng.below(3) == 0;
        pod.init_containers.push(init);
    }
    let mut usage = Usage::default();
    for i in 0..topo.gpus.len() {
        if rng.below(3) == 0 {
            usage.gpus.push(topo.gpu_bdf(i));
        }
    }
    for i in 0..topo.nics.len() {
        if rng.below(3) == 0 {
            usage.nics.push(topo.nic_bdf(i));
        }
    }
    let all: Vec<u32> = topo
        .numa
        .iter()
        .flat_map(|n| n.cpus.ids().to_vec())
        .collect();
    if rng.below(2) == 0 && !all.is_empty() {
        let taken = (0..rng.below(all.len())).map(|_| all[rng.below(all.len())]);
        usage.cpus = CpuSet::from_ids(taken);
    }
    if rng.below(20) == 0 {
        usage.cpus = usage.cpus.union(&CpuSet::from_ids([100_000]));
    }
    (pod, usage)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn a_prepared_node_admits_as_a_fresh_simulation(node in any::<u64>(), draws in 1..12usize) {
        let mut rng = Rng::new(node);
        let (topo, settings) = random_node(&mut rng);
        let resources = ResourceMap::default();
        let prepared = Prepared::new(&topo, &settings, &resources);
        for _ in 0..draws {
            let (pod, usage) = random_admission(&mut rng, &topo);
            let seed = rng.next_u64() % 4;
            let fresh = simulate(&Case {
                topology: &topo,
                settings: &settings,
                resources: &resources,
                pod: &pod,
                usage: &usage,
                seed,
            });
            prop_assert_eq!(prepared.simulate(&pod, &usage, seed), fresh);
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    #[test]
    fn an_admission_reads_only_the_relevant_usage(node in any::<u64>(), draws in 1..12usize) {
        let mut rng = Rng::new(node);
        let (topo, settings) = random_node(&mut rng);
        let resources = ResourceMap::default();
        let prepared = Prepared::new(&topo, &settings, &resources);
        for _ in 0..draws {
            let (pod, mut usage) = random_admission(&mut rng, &topo);
            match rng.below(12) {
                // A NIC's address listed as a GPU: the admission refuses the usage.
                0 if !topo.nics.is_empty() => usage.gpus.push(topo.nic_bdf(0)),
                // Listed twice, out of order, and memory the admission does not read.
                1 => {
                    usage.gpus.extend(usage.gpus.clone());
                    usage.nics.reverse();
                    usage.memory.insert(0, 1 << 20);
                }
                _ => {}
            }
            let relevant = prepared.relevant_usage(&pod, &usage);
            prop_assert!(relevant.gpus.len() <= usage.gpus.len());
            prop_assert!(relevant.nics.len() <= usage.nics.len());
            for seed in 0..3 {
                prop_assert_eq!(
                    prepared.simulate(&pod, &relevant, seed),
                    prepared.simulate(&pod, &usage, seed)
                );
            }
        }
    }
}

#[test]
fn the_relevant_usage_leaves_out_devices_the_pod_cannot_get() {
    let topo = topoalign_profiles::get("mi300x-8").unwrap();
    let resources = ResourceMap::default();
    let prepared = Prepared::new(&topo, &Settings::default(), &resources);
    let pod = Pod::from_flags(&[("amd.com/gpu".to_string(), 2)], None, None).unwrap();
    let usage = Usage {
        gpus: vec![topo.gpu_bdf(1), topo.gpu_bdf(0)],
        nics: (0..topo.nics.len()).map(|n| topo.nic_bdf(n)).collect(),
        cpus: CpuSet::from_ids([0, 1]),
        ..Usage::default()
    };
    let relevant = prepared.relevant_usage(&pod, &usage);
    let mut gpus = usage.gpus.clone();
    gpus.sort();
    assert_eq!(relevant.gpus, gpus);
    assert!(
        relevant.nics.is_empty() && relevant.cpus.is_empty(),
        "{relevant:?}"
    );
}

#[test]
fn the_random_cases_cover_admissions_refusals_and_errors() {
    let (mut admitted, mut refused, mut errors) = (0, 0, 0);
    let mut kinds = BTreeMap::new();
    for node in 0..200u64 {
        let mut rng = Rng::new(node);
        let (topo, settings) = random_node(&mut rng);
        let resources = ResourceMap::default();
        let prepared = Prepared::new(&topo, &settings, &resources);
        let (pod, usage) = random_admission(&mut rng, &topo);
        match prepared.simulate(&pod, &usage, 0) {
            Ok(o) if o.admitted => admitted += 1,
            Ok(_) => refused += 1,
            Err(e) => {
                errors += 1;
                *kinds
                    .entry(format!("{e:?}").chars().take(12).collect::<String>())
                    .or_insert(0) += 1;
            }
        }
    }
    assert!(
        admitted > 20 && refused > 5 && errors > 20,
        "{admitted} {refused} {errors}"
    );
    assert!(kinds.len() >= 2, "{kinds:?}");
}
