#![allow(clippy::unwrap_used, clippy::expect_used)]
//! One admission on a node the extender sees thousands of times (issue 24): a fresh
//! simulation (`simulate`, which prepares the node on every call) against the node
//! prepared once (`Prepared::simulate`), on mi300x-8 with a quarter of its GPUs and NICs
//! in use, without and with the static CPU and memory managers; and what the extender
//! asks per node state, four draws, in full and through the lean admission (which takes
//! the full path under the static managers).

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use std::hint::black_box;
use topoalign_kube_types::kubelet_settings::{CpuPolicy, MemoryPolicy, Policy, Settings};
use topoalign_tm::{Brief, Case, LeanPod, Pod, Prepared, Quantity, ResourceMap, Usage, simulate};

fn bench(c: &mut Criterion) {
    let topo = topoalign_profiles::get("mi300x-8").unwrap();
    let plain = Settings {
        topology_manager_policy: Policy::Restricted,
        ..Settings::default()
    };
    let managers = Settings {
        cpu_manager_policy: CpuPolicy::Static,
        reserved_cpu_millis: 2000,
        memory_manager_policy: MemoryPolicy::Static,
        reserved_memory: topo.numa.iter().map(|n| (n.id, 1 << 30)).collect(),
        ..plain.clone()
    };
    let devices = [
        ("amd.com/gpu".to_string(), 2),
        ("nvidia.com/sriov-rdma-vf".to_string(), 2),
    ];
    let pods = [
        ("gpus-vfs", Pod::from_flags(&devices, None, None).unwrap()),
        (
            "guaranteed",
            Pod::from_flags(
                &devices,
                Some(Quantity::from_units(8)),
                Some(Quantity::from_units(16 << 30)),
            )
            .unwrap(),
        ),
    ];
    let resources = ResourceMap::default();
    let usage = Usage {
        gpus: (0..topo.gpus.len())
            .step_by(4)
            .map(|i| topo.gpu_bdf(i))
            .collect(),
        nics: (0..topo.nics.len())
            .step_by(4)
            .map(|i| topo.nic_bdf(i))
            .collect(),
        ..Usage::default()
    };
    let mut group = c.benchmark_group("admission");
    for ((label, pod), settings) in pods.iter().zip([&plain, &managers]) {
        let case = Case {
            topology: &topo,
            settings,
            resources: &resources,
            pod,
            usage: &usage,
            seed: 1,
        };
        assert!(simulate(&case).unwrap().admitted, "{label}");
        group.bench_function(BenchmarkId::new("simulate", label), |b| {
            b.iter(|| simulate(black_box(&case)).unwrap())
        });
        let prepared = Prepared::new(&topo, settings, &resources);
        assert_eq!(prepared.simulate(pod, &usage, 1), simulate(&case));
        group.bench_function(BenchmarkId::new("prepared", label), |b| {
            b.iter(|| prepared.simulate(black_box(pod), &usage, 1).unwrap())
        });
        // What the extender does per node state: four draws, in full and lean.
        group.bench_function(BenchmarkId::new("prepared, 4 draws", label), |b| {
            b.iter(|| {
                (0..4)
                    .map(|seed| {
                        Brief::of(&prepared.simulate(black_box(pod), &usage, seed).unwrap())
                    })
                    .collect::<Vec<_>>()
            })
        });
        let lean = LeanPod::new(prepared.clone(), pod);
        group.bench_function(BenchmarkId::new("lean, 4 draws", label), |b| {
            b.iter(|| {
                let state = lean.state(black_box(&usage)).unwrap();
                (0..4)
                    .map(|seed| state.admit(seed).unwrap())
                    .collect::<Vec<_>>()
            })
        });
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
