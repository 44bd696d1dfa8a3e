//! The planner on a fleet: 1,000 nodes × 8 GPUs with a mixed request that fills most of
//! it, one that overflows it (the largest-first cut and its reasons), and one node.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use topoalign_mig::{GeometryRequest, Pod, lookup, parse_mix, plan, plan_pods};

fn request(nodes: Option<u32>, want: &str) -> GeometryRequest {
    let model = lookup("h100-80gb").unwrap();
    GeometryRequest {
        model,
        gpus: 8,
        nodes,
        want: parse_mix(model, want).unwrap(),
    }
}

fn bench(c: &mut Criterion) {
    let fleet = request(
        Some(1000),
        "7g.80gb=1000,4g.40gb=2000,3g.40gb=3000,2g.20gb=3000,1g.20gb=2000,1g.10gb=6000,1g.10gb+me=500",
    );
    let p = plan(&fleet).unwrap();
    assert_eq!(p.gpus.len(), 8000);
    c.bench_function("plan 1000 nodes x 8 GPUs, mixed", |b| {
        b.iter(|| plan(black_box(&fleet)).unwrap())
    });
    let over = request(Some(1000), "4g.40gb=9000,3g.40gb=9000,1g.10gb=60000");
    c.bench_function("plan 1000 nodes x 8 GPUs, overflowing", |b| {
        b.iter(|| plan(black_box(&over)).unwrap())
    });
    let model = lookup("h100-80gb").unwrap();
    let shapes = [
        "3g.40gb=2,1g.10gb=1",
        "7g.80gb=2",
        "2g.20gb=3,1g.10gb=4",
        "4g.40gb=1",
    ];
    let pods: Vec<Pod> = (0..6000)
        .map(|i| Pod {
            name: format!("p{i}"),
            want: parse_mix(model, shapes[i % shapes.len()]).unwrap(),
        })
        .collect();
    c.bench_function("plan 6000 pods on 1000 nodes x 8 GPUs", |b| {
        b.iter(|| plan_pods(model, 8, Some(1000), black_box(&pods)).unwrap())
    });
    let node = request(None, "3g.40gb=3,2g.20gb=4,1g.10gb=9");
    c.bench_function("plan 1 node x 8 GPUs", |b| {
        b.iter(|| plan(black_box(&node)).unwrap())
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
