#![allow(clippy::unwrap_used, clippy::expect_used)]
//! What the scheduler extender asks the lean admission per node state (issue 24): the
//! pod read once (`LeanPod::new`), then, for each of many node states, the part of the
//! usage the pod reads (`relevant_usage`), the node state (`state`) and four draws
//! (`admit`, seeds 0..4). The node is mi300x-8 under the `restricted` policy (container
//! and pod scope); the pod asks 2 GPUs and 2 VFs; the usages are random sets of its GPUs
//! and NICs (VFs and PFs alike), from empty to most of them in use. `LeanPod::new` (with
//! the clone of the prepared node it takes) is measured on its own.

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use std::hint::black_box;
use topoalign_kube_types::kubelet_settings::{Policy, Scope, Settings};
use topoalign_rng::Rng;
use topoalign_tm::{LeanPod, Pod, Prepared, ResourceMap, Usage};

/// Node states per iteration.
const STATES: usize = 64;

fn bench(c: &mut Criterion) {
    let topo = topoalign_profiles::get("mi300x-8").unwrap();
    let devices = [
        ("amd.com/gpu".to_string(), 2),
        ("nvidia.com/sriov-rdma-vf".to_string(), 2),
    ];
    let pod = Pod::from_flags(&devices, None, None).unwrap();
    let resources = ResourceMap::default();
    let mut rng = Rng::new(24);
    let usages: Vec<Usage> = (0..STATES)
        .map(|k| {
            // From nothing in use to nearly everything, by state.
            let busy = 1 + k % 8;
            Usage {
                gpus: (0..topo.gpus.len())
                    .filter(|_| rng.below(10) < busy)
                    .map(|i| topo.gpu_bdf(i))
                    .collect(),
                nics: (0..topo.nics.len())
                    .filter(|_| rng.below(10) < busy)
                    .map(|i| topo.nic_bdf(i))
                    .collect(),
                ..Usage::default()
            }
        })
        .collect();
    let mut group = c.benchmark_group("lean per node state");
    for (label, scope) in [("container", Scope::Container), ("pod", Scope::Pod)] {
        let settings = Settings {
            topology_manager_policy: Policy::Restricted,
            topology_manager_scope: scope,
            ..Settings::default()
        };
        let prepared = Prepared::new(&topo, &settings, &resources);
        // Once per machine type and pod in an extender call.
        group.bench_function(BenchmarkId::new("LeanPod::new", label), |b| {
            b.iter(|| LeanPod::new(black_box(prepared.clone()), &pod))
        });
        let lean = LeanPod::new(prepared, &pod);
        let admitted = (usages.iter())
            .filter(|u| lean.state(u).unwrap().admit(0).unwrap().admitted)
            .count();
        assert!(admitted > STATES / 4 && admitted < STATES, "{admitted}");
        group.bench_function(BenchmarkId::new(format!("{STATES} states"), label), |b| {
            b.iter(|| {
                let mut devices = 0;
                for usage in &usages {
                    let usage = black_box(usage);
                    let relevant = lean.relevant_usage(usage);
                    let state = lean.state(usage).unwrap();
                    devices += relevant.gpus.len() + relevant.nics.len();
                    for seed in 0..4 {
                        devices += state.admit(seed).unwrap().devices.len();
                    }
                }
                devices
            })
        });
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
