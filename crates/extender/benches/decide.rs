//! filter + prioritize for one pod over 5,000 nodes, pure core (no HTTP): the server's
//! path (verdicts visited in place and written straight into the JSON answers) with the
//! verdict cache warm (the steady state: one node changes per binding, re-judged on its
//! watch event), the same with owned outcomes (maps and vectors, as tests and the CLI
//! use), and the calls with the cache disabled (every node judged: Topology Manager
//! simulation + planner) as the peer.

use std::hint::black_box;
use std::time::SystemTime;

use criterion::{Criterion, criterion_group, criterion_main};
use serde_json::json;
use topoalign_extender::Decider;
use topoalign_extender::Interner;
use topoalign_extender::synth_nodes;
use topoalign_extender::{ClusterState, pod_request};
use topoalign_extender::{FilterWriter, PriorityWriter, parse_args};
use topoalign_kube_types::kubelet_settings::Policy;
use topoalign_tm::ResourceMap;

const NODES: usize = 5_000;

fn cluster() -> (ClusterState, Vec<String>) {
    let policies = [
        Policy::Restricted,
        Policy::SingleNumaNode,
        Policy::BestEffort,
        Policy::None,
    ];
    let nodes =
        synth_nodes(NODES, 1, &["mi300x-8", "gb300-4", "dgx-h100"], &policies).unwrap_or_default();
    let mut interner = Interner::default();
    let mut st = ClusterState::default();
    for n in &nodes {
        st.upsert_node(&n.name, n.entry(&mut interner));
    }
    (st, nodes.into_iter().map(|n| n.name).collect())
}

fn bench(c: &mut Criterion) {
    let (state, names) = cluster();
    let pod = json!({"metadata": {"name": "p", "namespace": "b"},
        "spec": {"containers": [{"name": "m", "resources": {"limits": {"amd.com/gpu": 2, "nvidia.com/sriov-rdma-vf": 2}}}]}});
    let cached = Decider::new(ResourceMap::default(), 1 << 20);
    let plain = Decider::new(ResourceMap::default(), 0);
    let Ok(req) = pod_request(&pod, cached.resources()) else {
        return;
    };
    let now = SystemTime::now();
    let body = serde_json::to_vec(&json!({"Pod": pod, "Nodes": null, "NodeNames": names}))
        .unwrap_or_default();
    let Ok((_, candidates)) = parse_args(&body) else {
        return;
    };
    let mut g = c.benchmark_group("filter+prioritize/5000 nodes");
    g.sample_size(20);
    g.bench_function("cache warm, server path", |b| {
        b.iter(|| {
            let mut f = FilterWriter::new(&candidates);
            cached.visit(
                &state,
                &req,
                candidates.names(),
                now,
                |i, name, seen| match seen.rejection() {
                    Some(r) => f.fail_json(name, r.message_json, r.unresolvable),
                    None => f.pass(i, name),
                },
            );
            let mut p = PriorityWriter::new(&names);
            cached.visit(&state, &req, candidates.names(), now, |_, name, seen| {
                p.push(name, seen.score())
            });
            black_box((f.finish(), p.finish()))
        })
    });
    g.bench_function("cache warm, owned outcomes", |b| {
        b.iter(|| {
            let f = cached.filter(&state, &req, &names, now);
            let p = cached.prioritize(&state, &req, &names, now);
            black_box((f, p))
        })
    });
    g.sample_size(10);
    g.bench_function("cache disabled (peer)", |b| {
        b.iter(|| {
            let f = plain.filter(&state, &req, &names, now);
            let p = plain.prioritize(&state, &req, &names, now);
            black_box((f, p))
        })
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
