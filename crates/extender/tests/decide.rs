//! Filter and prioritize decisions on the built-in profiles, through the pure core.

mod common;

use std::time::{Duration, SystemTime};

use common::*;
use serde_json::json;
use topoalign_extender::decide::{Decider, NeutralReason};
use topoalign_extender::nodeinfo::Interner;
use topoalign_extender::{NodeEntry, pod_request};
use topoalign_tm::{Policy, ResourceMap};

fn names(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

const AMD: &str = "amd.com/gpu";
const VF: &str = "nvidia.com/sriov-rdma-vf";

#[test]
fn restricted_mi300x_with_split_occupancy_is_filtered_and_an_aligned_node_wins() {
    let mut i = Interner::default();
    let mut st = state();
    // Two GPUs taken on each socket: 2+2 free, so 4 GPUs cannot come from one NUMA node.
    let split = [MI_GPUS_N0[0], MI_GPUS_N0[1], MI_GPUS_N1[0], MI_GPUS_N1[1]];
    st.upsert_node(
        "split",
        node(&mut i, "mi300x-8", Policy::Restricted, &split, &[]),
    );
    st.upsert_node(
        "free",
        node(&mut i, "mi300x-8", Policy::Restricted, &[], &[]),
    );
    // Socket 0 full: 4+4 still fits on socket 1.
    st.upsert_node(
        "half",
        node(&mut i, "mi300x-8", Policy::Restricted, &MI_GPUS_N0, &[]),
    );
    // The same split occupancy without a Topology Manager policy: admitted, scored low.
    st.upsert_node(
        "split-none",
        node(&mut i, "mi300x-8", Policy::None, &split, &[]),
    );
    let d = Decider::new(ResourceMap::default(), 10_000);
    let p = pod("p4", json!({AMD: 4, VF: 4}), json!({}));
    let req = pod_request(&p, d.resources()).unwrap();
    let cands = names(&["split", "free", "half", "split-none"]);
    let (f, _) = d.filter(&st, &req, &cands, SystemTime::now());
    assert_eq!(f.passed, [false, true, true, true]);
    let msg = &f.failed["split"];
    assert!(
        msg.contains("Topology Manager (restricted, scope container)"),
        "{msg}"
    );
    assert!(msg.contains("TopologyAffinityError"), "{msg}");
    assert!(f.unresolvable.is_empty(), "preemption could free a socket");
    let (p, _) = d.prioritize(&st, &req, &cands[1..], SystemTime::now());
    let s: Vec<i64> = p.scores.iter().map(|h| h.score).collect();
    // Four PIX pairs on one socket on both free and half-full nodes (the half-full one
    // fragments less: it completes the xGMI island); the split node can only span both
    // sockets.
    assert_eq!(s, [9, 9, 8], "free, half, split-none");
}

#[test]
fn single_numa_node_refuses_eight_gpus_for_good() {
    let mut i = Interner::default();
    let mut st = state();
    st.upsert_node(
        "snn",
        node(&mut i, "mi300x-8", Policy::SingleNumaNode, &[], &[]),
    );
    st.upsert_node(
        "restricted",
        node(&mut i, "mi300x-8", Policy::Restricted, &[], &[]),
    );
    let d = Decider::new(ResourceMap::default(), 0);
    // Eight GPUs need both sockets: restricted admits (the GPUs' minimal width is two
    // nodes), single-numa-node never can.
    let req = pod_request(&pod("p8", json!({AMD: 8}), json!({})), d.resources()).unwrap();
    let (f, _) = d.filter(&st, &req, &names(&["snn", "restricted"]), SystemTime::now());
    assert_eq!(f.passed, [false, true]);
    assert!(
        f.unresolvable["snn"].contains("single-numa-node"),
        "{:?}",
        f.unresolvable
    );
}

#[test]
fn a_required_pair_class_filters_nodes_that_cannot_reach_it() {
    let mut i = Interner::default();
    let mut st = state();
    // Only GPU 11:00.0 free, and every VF of its switch-mate NIC 0c:00.0 taken.
    let gpus: Vec<&str> = MI_GPUS_N0[1..]
        .iter()
        .chain(MI_GPUS_N1.iter())
        .copied()
        .collect();
    let vfs = [
        "0000:0c:00.1",
        "0000:0c:00.2",
        "0000:0c:00.3",
        "0000:0c:00.4",
    ];
    st.upsert_node("far", node(&mut i, "mi300x-8", Policy::None, &gpus, &vfs));
    st.upsert_node("near", node(&mut i, "mi300x-8", Policy::None, &gpus, &[]));
    let d = Decider::new(ResourceMap::default(), 100);
    let strict = pod(
        "pix",
        json!({AMD: 1, VF: 1}),
        json!({"topoalign.dev/min-pair-class": "PIX"}),
    );
    let req = pod_request(&strict, d.resources()).unwrap();
    let (f, _) = d.filter(&st, &req, &names(&["far", "near"]), SystemTime::now());
    assert_eq!(f.passed, [false, true]);
    assert!(
        f.failed["far"].contains("cannot reach pair class PIX"),
        "{:?}",
        f.failed
    );
    // Without the annotation both pass, and the node with the PIX pair scores higher.
    let loose = pod_request(
        &pod("any", json!({AMD: 1, VF: 1}), json!({})),
        d.resources(),
    )
    .unwrap();
    let (f, _) = d.filter(&st, &loose, &names(&["far", "near"]), SystemTime::now());
    assert_eq!(f.passed, [true, true]);
    let (p, _) = d.prioritize(&st, &loose, &names(&["far", "near"]), SystemTime::now());
    assert!(p.scores[1].score > p.scores[0].score, "{:?}", p.scores);
}

#[test]
fn gb300_and_dgx_h100_scores_follow_what_is_left() {
    let mut i = Interner::default();
    let mut st = state();
    st.upsert_node(
        "gb-free",
        node(&mut i, "gb300-4", Policy::Restricted, &[], &[]),
    );
    // One GPU per socket taken: two GPUs left, one per socket.
    st.upsert_node(
        "gb-split",
        node(
            &mut i,
            "gb300-4",
            Policy::Restricted,
            &["0008:06:00.0", "0018:06:00.0"],
            &[],
        ),
    );
    st.upsert_node(
        "dgx-free",
        node(&mut i, "dgx-h100", Policy::Restricted, &[], &[]),
    );
    st.upsert_node(
        "dgx-one",
        node(
            &mut i,
            "dgx-h100",
            Policy::Restricted,
            &["0000:1b:00.0"],
            &[],
        ),
    );
    let d = Decider::new(ResourceMap::default(), 100);
    let gb = pod_request(
        &pod("gb", json!({"nvidia.com/gpu": 2, "rdma/ib": 2}), json!({})),
        d.resources(),
    )
    .unwrap();
    let (f, _) = d.filter(
        &st,
        &gb,
        &names(&["gb-free", "gb-split"]),
        SystemTime::now(),
    );
    assert_eq!(
        f.passed,
        [true, false],
        "restricted refuses 2 GPUs split over sockets: {:?}",
        f.failed
    );
    let big = pod_request(
        &pod("dgx8", json!({"nvidia.com/gpu": 8}), json!({})),
        d.resources(),
    )
    .unwrap();
    let (f, _) = d.filter(
        &st,
        &big,
        &names(&["dgx-free", "dgx-one"]),
        SystemTime::now(),
    );
    assert_eq!(f.passed, [true, false]);
    let (p, _) = d.prioritize(&st, &big, &names(&["dgx-free"]), SystemTime::now());
    // 8 GPUs span both sockets (0.9) and leave every GPU's switch-mate NIC behind
    // (fragmentation penalty at its 2-point bound).
    assert_eq!(p.scores[0].score, 7, "{:?}", p.scores);
}

#[test]
fn stale_unknown_and_broken_nodes_pass_with_a_neutral_score() {
    let mut i = Interner::default();
    let mut st = state();
    let now = SystemTime::now();
    let split = [MI_GPUS_N0[0], MI_GPUS_N0[1], MI_GPUS_N1[0], MI_GPUS_N1[1]];
    // Agent data that would reject, but 10 minutes old: not held against the node.
    let old = now - Duration::from_secs(600);
    st.upsert_node(
        "stale",
        reported(
            node(&mut i, "mi300x-8", Policy::Restricted, &split, &[]),
            old,
        ),
    );
    st.upsert_node(
        "fresh",
        reported(
            node(&mut i, "mi300x-8", Policy::Restricted, &split, &[]),
            now,
        ),
    );
    st.upsert_node(
        "broken",
        NodeEntry::Broken("annotation `topoalign.dev/used`: not JSON".into()),
    );
    let d = Decider::new(ResourceMap::default(), 100);
    let req = pod_request(&pod("p4", json!({AMD: 4, VF: 4}), json!({})), d.resources()).unwrap();
    let cands = names(&["stale", "fresh", "broken", "ghost"]);
    let (f, _) = d.filter(&st, &req, &cands, now);
    assert_eq!(f.passed, [true, false, true, true]);
    let reasons: Vec<&str> = f.neutral.iter().map(|(_, r)| r.label()).collect();
    assert_eq!(reasons, ["stale", "broken", "unknown_node"]);
    let (p, _) = d.prioritize(&st, &req, &cands, now);
    assert_eq!(p.scores[0].score, 5);
    assert_eq!(p.scores[2].score, 5);
    assert_eq!(p.scores[3].score, 5);
    // Every node stale: nothing is filtered.
    let all_stale = names(&["stale", "stale"]);
    assert!(
        d.filter(&st, &req, &all_stale, now)
            .0
            .passed
            .iter()
            .all(|p| *p)
    );
}

#[test]
fn pods_without_gpus_are_not_judged() {
    let mut i = Interner::default();
    let mut st = state();
    st.upsert_node(
        "n",
        node(&mut i, "mi300x-8", Policy::Restricted, &MI_GPUS_N0, &[]),
    );
    let d = Decider::new(ResourceMap::default(), 100);
    let req = pod_request(&pod("cpu", json!({"cpu": "2"}), json!({})), d.resources()).unwrap();
    let (f, stats) = d.filter(&st, &req, &names(&["n"]), SystemTime::now());
    assert_eq!(f.passed, [true]);
    assert_eq!(f.neutral[0].1, NeutralReason::NotManaged);
    assert_eq!(stats.misses, 0);
}

#[test]
fn assumed_allocations_take_devices_until_the_pod_goes() {
    let mut i = Interner::default();
    let mut st = state();
    st.upsert_node("n", node(&mut i, "mi300x-8", Policy::Restricted, &[], &[]));
    let d = Decider::new(ResourceMap::default(), 100);
    let p4 = pod_request(&pod("p4", json!({AMD: 4, VF: 4}), json!({})), d.resources()).unwrap();
    let now = SystemTime::now();
    let plan = p4.plan.clone().unwrap();
    st.assume("default/a", "n", plan.clone(), now);
    st.assume("default/b", "n", plan.clone(), now);
    // Both sockets taken by assumed pods: the third 4-GPU pod cannot fit.
    let (f, _) = d.filter(&st, &p4, &names(&["n"]), now);
    assert_eq!(f.passed, [false], "{:?}", f.failed);
    st.forget_pod("default/b");
    assert_eq!(d.filter(&st, &p4, &names(&["n"]), now).0.passed, [true]);
    // On a declared (label) node assumed pods never expire; on agent nodes they do.
    st.expire(now + Duration::from_secs(3600));
    assert_eq!(st.assumed_count(), 1);
    st.upsert_node(
        "m",
        reported(node(&mut i, "mi300x-8", Policy::Restricted, &[], &[]), now),
    );
    st.assume("default/c", "m", plan, now);
    st.expire(now + Duration::from_secs(3600));
    assert_eq!(st.assumed_count(), 1);
}

#[test]
fn the_cache_changes_no_decision() {
    let mut i = Interner::default();
    let mut st = state();
    let occupancies: [&[&str]; 4] = [
        &[],
        &MI_GPUS_N0,
        &[MI_GPUS_N0[0], MI_GPUS_N1[0]],
        &MI_GPUS_N1[..3],
    ];
    let mut cands = Vec::new();
    for k in 0..40 {
        let policy = [Policy::Restricted, Policy::SingleNumaNode, Policy::None][k % 3];
        let name = format!("n{k}");
        st.upsert_node(
            &name,
            node(&mut i, "mi300x-8", policy, occupancies[k % 4], &[]),
        );
        cands.push(name);
    }
    let cached = Decider::new(ResourceMap::default(), 100);
    let plain = Decider::new(ResourceMap::default(), 0);
    for (g, v) in [(1, 1), (2, 2), (4, 4), (8, 8), (3, 0)] {
        let req = pod_request(
            &pod("p", json!({AMD: g, VF: v}), json!({})),
            plain.resources(),
        )
        .unwrap();
        for _ in 0..2 {
            let a = cached
                .prioritize(&st, &req, &cands, SystemTime::now())
                .0
                .scores;
            let b = plain
                .prioritize(&st, &req, &cands, SystemTime::now())
                .0
                .scores;
            assert_eq!(a, b);
            let a = cached.filter(&st, &req, &cands, SystemTime::now()).0;
            let b = plain.filter(&st, &req, &cands, SystemTime::now()).0;
            assert_eq!((a.passed, a.failed), (b.passed, b.failed));
        }
    }
}

#[test]
fn changed_nodes_are_judged_on_the_watch_event_and_reused_slots_never_mix_up() {
    let mut i = Interner::default();
    let mut st = state();
    let cands: Vec<String> = (0..12).map(|k| format!("n{k}")).collect();
    for (k, n) in cands.iter().enumerate() {
        let used: &[&str] = if k % 2 == 0 { &[] } else { &MI_GPUS_N0 };
        st.upsert_node(n, node(&mut i, "mi300x-8", Policy::Restricted, used, &[]));
    }
    let cached = Decider::new(ResourceMap::default(), 10_000);
    let plain = Decider::new(ResourceMap::default(), 0);
    let req = pod_request(
        &pod("p", json!({AMD: 4, VF: 4}), json!({})),
        plain.resources(),
    )
    .unwrap();
    let now = SystemTime::now();
    let same = |st: &topoalign_extender::ClusterState| {
        let a = cached.filter(st, &req, &cands, now).0;
        let b = plain.filter(st, &req, &cands, now).0;
        assert_eq!((&a.passed, &a.failed), (&b.passed, &b.failed));
        let a = cached.prioritize(st, &req, &cands, now).0.scores;
        let b = plain.prioritize(st, &req, &cands, now).0.scores;
        assert_eq!(a, b);
    };
    same(&st);
    let _ = st.take_changed();
    // A node fills up, another is removed and its slot taken by a new name, a removed
    // name comes back with other data.
    st.upsert_node(
        "n0",
        node(
            &mut i,
            "mi300x-8",
            Policy::Restricted,
            &MI_GPUS_N1[..2],
            &[],
        ),
    );
    st.remove_node("n3");
    st.upsert_node(
        "fresh",
        node(&mut i, "mi300x-8", Policy::Restricted, &[], &[]),
    );
    st.remove_node("n5");
    st.upsert_node(
        "n5",
        node(&mut i, "mi300x-8", Policy::SingleNumaNode, &[], &[]),
    );
    let changed = st.take_changed();
    assert_eq!(changed, ["fresh", "n0", "n5"]);
    // The watch event judges the changed nodes for the shapes in use: the next call
    // computes nothing.
    assert!(cached.warm(&st, &changed, now) > 0);
    let (_, stats) = cached.filter(&st, &req, &cands, now);
    assert_eq!(stats.misses, 0, "{stats:?}");
    same(&st);
    let mut with_fresh = cands.clone();
    with_fresh.push("fresh".to_string());
    let a = cached.filter(&st, &req, &with_fresh, now).0;
    let b = plain.filter(&st, &req, &with_fresh, now).0;
    assert_eq!((a.passed, a.failed), (b.passed, b.failed));
    assert_eq!(st.len(), 12);
}

#[test]
fn a_tiny_cache_evicts_and_still_decides_the_same() {
    let mut i = Interner::default();
    let mut st = state();
    let mut cands = Vec::new();
    for k in 0..30 {
        let used: &[&str] = [&[][..], &MI_GPUS_N0[..], &MI_GPUS_N1[..1]][k % 3];
        let name = format!("n{k}");
        st.upsert_node(
            &name,
            node(&mut i, "mi300x-8", Policy::Restricted, used, &[]),
        );
        cands.push(name);
    }
    let tiny = Decider::new(ResourceMap::default(), 2);
    let plain = Decider::new(ResourceMap::default(), 0);
    for g in [1, 2, 4, 8, 2, 1] {
        let req = pod_request(
            &pod("p", json!({AMD: g, VF: g}), json!({})),
            plain.resources(),
        )
        .unwrap();
        let a = tiny.filter(&st, &req, &cands, SystemTime::now()).0;
        let b = plain.filter(&st, &req, &cands, SystemTime::now()).0;
        assert_eq!((a.passed, a.failed), (b.passed, b.failed));
        assert!(tiny.cached() <= 30, "{}", tiny.cached());
    }
}
