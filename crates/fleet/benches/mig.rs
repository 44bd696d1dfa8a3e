//! `simulate --mig` at 1,000 nodes × 8 H100-80GB GPUs: the whole run (the pod stream and
//! both placers over 20,000 pods of 1-3 MIG instances at load 1.0).

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use topoalign_fleet::MigSimSpec;
use topoalign_fleet::{default_mix, simulate_mig};

fn bench(c: &mut Criterion) {
    let Ok(model) = topoalign_mig::lookup("h100-80gb") else {
        return;
    };
    let spec = MigSimSpec {
        model,
        nodes: 1_000,
        gpus: 8,
        pods: 20_000,
        seed: 1,
        mix: default_mix(),
        load: 1.0,
    };
    let mut g = c.benchmark_group("mig-1000-nodes-x-8-gpus");
    g.sample_size(10);
    g.bench_function("20000-pods", |b| {
        b.iter(|| black_box(simulate_mig(&spec).ok()))
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
