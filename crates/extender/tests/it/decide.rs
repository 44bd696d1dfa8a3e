//! Filter and prioritize decisions on the built-in profiles, through the pure core.

use std::time::{Duration, SystemTime};

use crate::common::*;
use serde_json::json;
use topoalign_extender::Interner;
use topoalign_extender::{Decider, NeutralReason};
use topoalign_extender::{NodeEntry, pod_request};
use topoalign_kube_types::kubelet_settings::Policy;
use topoalign_tm::ResourceMap;

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
    // What the kubelet gives on the free and half-full nodes: four GPUs of one socket and
    // the first four VFs, all of one PF (one PIX pair, three NODE); the split node spans
    // both sockets and loses another point per extra NUMA node.
    assert_eq!(s, [2, 2, 0], "free, half, split-none");
}

#[test]
fn scores_follow_what_the_kubelet_would_allocate_not_the_best_plan() {
    let mut i = Interner::default();
    let mut st = state();
    // The planner reaches a PIX pair on both nodes (a GPU with its own NIC's VF), so it
    // cannot tell them apart. The kubelet does not follow it: here both plugins hand out
    // the lowest free address of NUMA node 0, GPU 11 and a VF of GPU 11's NIC on "free"
    // (PIX), GPU 2f and that same VF on "first-gpu-taken" (NODE).
    st.upsert_node(
        "first-gpu-taken",
        node(
            &mut i,
            "mi300x-8",
            Policy::Restricted,
            &MI_GPUS_N0[..1],
            &[],
        ),
    );
    st.upsert_node(
        "free",
        node(&mut i, "mi300x-8", Policy::Restricted, &[], &[]),
    );
    let mut packed = ResourceMap::default();
    packed
        .set_allocator_spec("amd.com/gpu=lowest-address", "--allocator")
        .unwrap();
    let d = Decider::new(packed, 100);
    let req = pod_request(&pod("p1", json!({AMD: 1, VF: 1}), json!({})), d.resources()).unwrap();
    let (p, _) = d.prioritize(
        &st,
        &req,
        &names(&["first-gpu-taken", "free"]),
        SystemTime::now(),
    );
    let s: Vec<i64> = p.scores.iter().map(|h| h.score).collect();
    assert!(s[1] >= 9 && s[0] <= 2, "{s:?}");
    // The planner's view, for contrast: the same best plan on both nodes.
    let planner = topoalign_plan::Planner::new(st.node("free").map_or_else(
        || panic!("free"),
        |v| match v {
            topoalign_extender::NodeView::Known(e) => &e.info.topology.topology,
            other => panic!("{other:?}"),
        },
    ));
    let plan = req.plan.as_ref().unwrap();
    let mut used = topoalign_topology::NodeUsage::empty();
    let free = planner.plan(plan, &used).unwrap().score.pair_rank_sum;
    used.gpus.push(MI_GPUS_N0[0].parse().unwrap());
    let taken = planner.plan(plan, &used).unwrap().score.pair_rank_sum;
    assert_eq!((free, taken), (0, 0));
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
fn assumed_pods_hold_what_the_kubelet_would_give_them() {
    let mut i = Interner::default();
    let mut st = state();
    st.upsert_node(
        "n",
        node(&mut i, "mi300x-8", Policy::SingleNumaNode, &[], &[]),
    );
    let d = Decider::new(ResourceMap::default(), 100);
    let used = |st: &topoalign_extender::ClusterState| match st.node("n") {
        Some(topoalign_extender::NodeView::Known(e)) => {
            (e.used.gpus.len(), e.used.nics.len(), e.unplaced.clone())
        }
        other => panic!("{other:?}"),
    };
    let now = SystemTime::now();
    // Five GPUs cannot come from one NUMA node: single-numa-node rejects the pod, so
    // once bound it holds nothing (the planner alone would have taken five GPUs).
    let p5 = pod_request(&pod("p5", json!({AMD: 5, VF: 5}), json!({})), d.resources()).unwrap();
    st.assume("default/planner", "n", p5.plan.clone().unwrap(), now);
    assert_eq!(used(&st).0, 5);
    st.forget_pod("default/planner");
    st.assume_pod("default/big", "n", &p5, now);
    assert_eq!(used(&st), (0, 0, vec!["default/big".to_string()]));
    // A pod the kubelet admits holds exactly what `topoalign tm` allocates to it.
    let p2 = pod_request(&pod("p2", json!({AMD: 2, VF: 2}), json!({})), d.resources()).unwrap();
    st.assume_pod("default/two", "n", &p2, now);
    assert_eq!(used(&st), (2, 2, vec!["default/big".to_string()]));
    // A pod asking for no GPU is not recorded.
    let cpu = pod_request(&pod("cpu", json!({"cpu": "2"}), json!({})), d.resources()).unwrap();
    st.assume_pod("default/cpu", "n", &cpu, now);
    assert_eq!(st.assumed_count(), 2);
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
