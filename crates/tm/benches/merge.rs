#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Cost of a Topology Manager merge at the kubelet's limit of 8 NUMA nodes, and of one
//! full admission on the mi300x-8 profile.

use criterion::{Criterion, criterion_group, criterion_main};
use topoalign_kube_types::kubelet_settings::{Policy, PolicyOptions, Settings};
use topoalign_tm::NumaInfo;
use topoalign_tm::iterate_masks;
use topoalign_tm::merge_with_policy;
use topoalign_tm::{Case, Pod, ResourceMap, Usage, simulate};
use topoalign_tm::{ProviderHints, TopologyHint};

fn bench(c: &mut Criterion) {
    let nodes: Vec<u32> = (0..8).collect();
    let numa = NumaInfo::new(nodes.clone(), Default::default());
    // Three resources, each with every mask (255 hints): the worst case the kubelet bounds.
    let all: Vec<TopologyHint> = iterate_masks(&nodes)
        .into_iter()
        .map(|m| TopologyHint::new(m, m.count() == 2))
        .collect();
    let mut p = ProviderHints::new();
    p.insert("a".into(), Some(all.clone()));
    p.insert("b".into(), Some(all[..64].to_vec()));
    let providers = vec![p];
    c.bench_function("merge 8 NUMA nodes, 255x64 hints", |b| {
        b.iter(|| {
            merge_with_policy(
                Policy::BestEffort,
                PolicyOptions::default(),
                &numa,
                &providers,
            )
        })
    });

    let topo = topoalign_profiles::get("mi300x-8").unwrap();
    let settings = Settings {
        topology_manager_policy: Policy::Restricted,
        ..Settings::default()
    };
    let pod = Pod::from_flags(
        &[
            ("amd.com/gpu".into(), 4),
            ("nvidia.com/sriov-rdma-vf".into(), 4),
        ],
        None,
        None,
    )
    .unwrap();
    let resources = ResourceMap::default();
    let usage = Usage::default();
    c.bench_function("admit 4 GPU + 4 VF on mi300x-8 (restricted)", |b| {
        b.iter(|| {
            simulate(&Case {
                topology: &topo,
                settings: &settings,
                resources: &resources,
                pod: &pod,
                usage: &usage,
                seed: 1,
            })
            .unwrap()
        })
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
