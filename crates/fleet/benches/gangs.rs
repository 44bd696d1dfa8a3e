//! `simulate --gangs` at 10,000 nodes: the whole run (preparing the node types, drawing
//! the background, both policies placing 1,000 gangs of 8 pods × 2 pairs on gb300-4 racks
//! of 18 nodes, and 4 pairs on dgx-h100 leaves, where topoalign has 70 rail sets to try).

use std::hint::black_box;
use std::sync::Arc;

use criterion::{Criterion, criterion_group, criterion_main};
use topoalign_fleet::RailRule;
use topoalign_fleet::{DomainLevel, DomainMode, GangConfig, GangSpec, NodeGroup, simulate_gangs};

const NODES: usize = 10_000;

fn config(profile: &str, pairs: u32, domain: DomainLevel) -> Option<GangConfig> {
    Some(GangConfig {
        fleet: vec![NodeGroup {
            topology: Arc::new(topoalign_profiles::get(profile)?),
            count: NODES,
        }],
        spec: GangSpec {
            gangs: 1_000,
            pods: 8,
            pairs,
            domain,
            mode: DomainMode::Required,
            rack_nodes: 18,
            racks_per_leaf: 4,
            class: None,
            background: 0.2,
            rails: RailRule::Auto,
        },
        seed: 1,
        cpus_per_gpu: 8,
        dra_budget: 100_000,
    })
}

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("gangs-10000-nodes");
    g.sample_size(10);
    for (name, profile, pairs, domain) in [
        ("gb300-4-nvlink-2-pairs", "gb300-4", 2, DomainLevel::Nvlink),
        ("dgx-h100-leaf-4-pairs", "dgx-h100", 4, DomainLevel::Leaf),
    ] {
        let Some(cfg) = config(profile, pairs, domain) else {
            continue;
        };
        g.bench_function(name, |b| b.iter(|| black_box(simulate_gangs(&cfg).ok())));
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
