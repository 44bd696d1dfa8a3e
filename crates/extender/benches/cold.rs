//! The cold call (issue 24, at 20,000 nodes since issue 35): filter + prioritize for a
//! pod shape the verdict cache has never seen, over 20,000 nodes, pure core (no HTTP),
//! on both paths:
//!
//! - device-plugin pods judged on each node's topology, kubelet settings and used devices
//!   (the `decide` bench's cluster), a fresh verdict cache per call;
//! - DRA pods (a claim of 2 `gpu-nic-pair` devices) judged on each node's ResourceSlices
//!   minus the devices other claims hold (random occupancy), a fresh cache per call, and
//!   weighed against 64 pods waiting for a node.
//!
//! Printed first: one device-plugin cold call per profile's nodes, with its distinct node
//! states (where a cold call's time goes).
//!
//! And the warm call the scheduler makes per candidate domain: filter + prioritize over a
//! 72-node domain with the cache warm, with its p50 / p99 printed from timed calls.

// A measurement harness: building the synthetic cluster must not fail silently.
#![allow(clippy::expect_used)]

use std::hint::black_box;
use std::time::{Duration, Instant, SystemTime};

use criterion::{BatchSize, Criterion, criterion_group, criterion_main};
use serde_json::json;
use topoalign_extender::Decider;
use topoalign_extender::Interner;
use topoalign_extender::synth_nodes;
use topoalign_extender::{ClusterState, PodRequest, pod_request};
use topoalign_extender::{DraShared, PodClaims, Resolved, priorities};
use topoalign_extender::{FilterWriter, PriorityWriter, parse_args};
use topoalign_kube_types::kubelet_settings::Policy;
use topoalign_tm::ResourceMap;

mod common;
use common::{PROFILES, add_waiting, dra_cluster, dra_pod};

const NODES: usize = 20_000;
const DOMAIN: usize = 72;

fn cluster() -> (ClusterState, Vec<String>) {
    let policies = [
        Policy::Restricted,
        Policy::SingleNumaNode,
        Policy::BestEffort,
        Policy::None,
    ];
    let nodes = synth_nodes(NODES, 1, &PROFILES, &policies).expect("profiles");
    let mut interner = Interner::default();
    let mut st = ClusterState::default();
    for n in &nodes {
        st.upsert_node(&n.name, n.entry(&mut interner));
    }
    (st, nodes.into_iter().map(|n| n.name).collect())
}

/// The server's filter then prioritize for one pod over `names`.
fn call(d: &Decider, st: &ClusterState, req: &PodRequest, body: &[u8], now: SystemTime) {
    let Ok((_, candidates)) = parse_args(body) else {
        return;
    };
    let names = candidates.names();
    let mut f = FilterWriter::new(&candidates);
    d.visit(st, req, names, now, |i, name, seen| {
        match seen.rejection() {
            Some(r) => f.fail_json(name, r.message_json, r.unresolvable),
            None => f.pass(i, name),
        }
    });
    let mut p = PriorityWriter::new(names);
    d.visit(st, req, names, now, |_, name, seen| {
        p.push(name, seen.score())
    });
    black_box((f.finish(), p.finish()));
}

/// The DRA filter then prioritize: every candidate judged (the filter), then the
/// verdicts read again and weighed against each other and the pods waiting.
fn dra_call(shared: &DraShared, claims: &Resolved, names: &[String]) {
    let mut passed = 0usize;
    shared.visit(claims, names, None, |_, _, v| {
        passed += usize::from(!matches!(v, topoalign_extender::DraNode::Reject(_)));
    });
    black_box(passed);
    let mut verdicts = Vec::with_capacity(names.len());
    shared.visit(claims, names, None, |_, _, v| verdicts.push(v.clone()));
    let refs: Vec<_> = verdicts.iter().map(Some).collect();
    let waiting = shared.waiting("u");
    black_box(priorities(names, &refs, claims.foreign, &waiting));
}

fn report(name: &str, mut v: Vec<Duration>) {
    v.sort();
    let at = |p: f64| v[((v.len() as f64 - 1.0) * p).round() as usize];
    println!(
        "{name:<48} n={:<5} p50 {:>8.1} µs   p99 {:>8.1} µs   max {:>8.1} µs",
        v.len(),
        at(0.5).as_secs_f64() * 1e6,
        at(0.99).as_secs_f64() * 1e6,
        v.last().copied().unwrap_or_default().as_secs_f64() * 1e6,
    );
}

fn bench(c: &mut Criterion) {
    let (state, names) = cluster();
    let pod = json!({"metadata": {"name": "p", "namespace": "b"},
        "spec": {"containers": [{"name": "m", "resources": {"limits": {"amd.com/gpu": 2, "nvidia.com/sriov-rdma-vf": 2}}}]}});
    let resources = ResourceMap::default();
    let req = pod_request(&pod, &resources).expect("pod");
    let now = SystemTime::now();
    let body =
        serde_json::to_vec(&json!({"Pod": pod, "Nodes": null, "NodeNames": names})).expect("json");
    let domain_body =
        serde_json::to_vec(&json!({"Pod": pod, "Nodes": null, "NodeNames": names[..DOMAIN]}))
            .expect("json");

    let (dra_state, dra_names, kinds) = dra_cluster(NODES);
    println!("DRA: {kinds} distinct (profile, devices held) among {NODES} nodes");
    let PodClaims::Judge(claims) = dra_state.resolve(&dra_pod()) else {
        panic!("the bench pod's claim does not resolve");
    };
    let dra_fresh = || {
        let s = DraShared::new();
        *s.write() = dra_state.clone();
        add_waiting(&s, 64);
        s
    };

    let once = Decider::new(ResourceMap::default(), 1 << 20);
    call(&once, &state, &req, &body, now);
    println!(
        "device plugin: {} distinct node states among {NODES} nodes",
        once.cached()
    );
    // Where a cold call's time goes: one cold call over each profile's nodes alone.
    for profile in PROFILES {
        let part: Vec<&String> = names.iter().filter(|n| n.starts_with(profile)).collect();
        let body = serde_json::to_vec(&json!({"Pod": pod, "Nodes": null, "NodeNames": part}))
            .expect("json");
        let d = Decider::new(ResourceMap::default(), 1 << 20);
        let t0 = Instant::now();
        call(&d, &state, &req, &body, now);
        println!(
            "device plugin: {profile:<10} {:>5} nodes, {:>5} distinct states, cold call {:>7.1} ms",
            part.len(),
            d.cached(),
            t0.elapsed().as_secs_f64() * 1e3
        );
    }
    // The warm 72-node call's latency distribution, from timed calls.
    let warm = Decider::new(ResourceMap::default(), 1 << 20);
    call(&warm, &state, &req, &domain_body, now);
    let times: Vec<Duration> = (0..3000)
        .map(|_| {
            let t0 = Instant::now();
            call(&warm, &state, &req, &domain_body, now);
            t0.elapsed()
        })
        .collect();
    report("device plugin: 72 nodes, cache warm", times);
    let dra_warm = dra_fresh();
    let domain = &dra_names[..DOMAIN];
    dra_call(&dra_warm, &claims, domain);
    let times: Vec<Duration> = (0..3000)
        .map(|_| {
            let t0 = Instant::now();
            dra_call(&dra_warm, &claims, domain);
            t0.elapsed()
        })
        .collect();
    report("DRA: 72 nodes, cache warm", times);

    let mut g = c.benchmark_group("cold call/20000 nodes");
    g.sample_size(10);
    g.bench_function("device plugin, new shape", |b| {
        b.iter_batched(
            || Decider::new(ResourceMap::default(), 1 << 20),
            |d| {
                call(&d, &state, &req, &body, now);
                d
            },
            BatchSize::PerIteration,
        )
    });
    g.bench_function("DRA, new shape", |b| {
        b.iter_batched(
            dra_fresh,
            |s| {
                dra_call(&s, &claims, &dra_names);
                s
            },
            BatchSize::PerIteration,
        )
    });
    g.finish();

    let mut g = c.benchmark_group("warm call/72 nodes");
    g.bench_function("device plugin", |b| {
        b.iter(|| call(&warm, &state, &req, &domain_body, now))
    });
    g.bench_function("DRA", |b| b.iter(|| dra_call(&dra_warm, &claims, domain)));
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
