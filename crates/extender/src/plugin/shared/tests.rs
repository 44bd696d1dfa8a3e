//! The call's judgement (node states shared out over threads, kubelet admissions shared
//! by the usage they read) against the straightforward one (each node judged alone, every
//! admission simulated on the node's whole usage), on seeded random clusters and pods.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::SystemTime;

use serde_json::{Value, json};
use topoalign_kube_types::kubelet_settings::{CpuPolicy, Policy, Scope};
use topoalign_rng::Rng;
use topoalign_tm::ResourceMap;
use topoalign_topology::CpuSet;

use super::Decider;
use crate::plugin::judge::{Decision, NeutralReason, Reuse, Verdict};
use crate::plugin::node::NodeEntry;
use crate::plugin::nodeinfo::Interner;
use crate::plugin::podreq::{PodRequest, pod_request};
use crate::plugin::state::{ClusterState, NodeView};
use crate::plugin::synth::synth_nodes;

const PROFILES: [&str; 4] = ["mi300x-8", "gb300-4", "dgx-h100", "pcie-2socket"];

/// A random cluster of `count` nodes: the built-in profiles with random occupancy, every
/// Topology Manager policy, both scopes, a third of the nodes free, and some nodes under
/// the static CPU manager with CPUs held.
fn cluster(rng: &mut Rng, count: usize) -> (ClusterState, Vec<String>) {
    let policies = [
        Policy::Restricted,
        Policy::SingleNumaNode,
        Policy::BestEffort,
        Policy::None,
    ];
    let nodes =
        synth_nodes(count, rng.next_u64(), &PROFILES, &policies).unwrap_or_else(|e| panic!("{e}"));
    let mut interner = Interner::default();
    let mut st = ClusterState::default();
    for n in &nodes {
        let mut entry = n.entry(&mut interner);
        if let NodeEntry::Known(info) = &mut entry {
            if rng.below(3) == 0 {
                // Many free nodes: states that differ only in what the pod does not read.
                info.used.gpus.clear();
                info.used.nics.clear();
            }
            let mut settings = (*info.settings).clone();
            if rng.below(3) == 0 {
                settings.topology_manager_scope = Scope::Pod;
            }
            if rng.below(3) == 0 {
                settings.cpu_manager_policy = CpuPolicy::Static;
                settings.reserved_system_cpus = Some(CpuSet::from_ids([0, 1]));
                // None, or NUMA node 0 all but a few: the pod's CPUs then go elsewhere.
                let cpus: Vec<u32> = info.topology.topology.numa[0].cpus.ids().to_vec();
                if rng.below(2) == 0 {
                    let left = 2 + rng.below(6);
                    let held = cpus.len().saturating_sub(left);
                    info.used.cpus = CpuSet::from_ids(cpus.into_iter().skip(2).take(held));
                }
            }
            info.settings = Arc::new(settings);
        }
        st.upsert_node(&n.name, entry);
    }
    (st, nodes.into_iter().map(|n| n.name).collect())
}

/// A random pod: GPUs of either vendor, VFs or RDMA PFs, sometimes a pair-class bound,
/// Guaranteed CPUs and an init container.
fn pod(rng: &mut Rng) -> PodRequest {
    let gpu = ["amd.com/gpu", "nvidia.com/gpu"][rng.below(2)];
    let nic = ["nvidia.com/sriov-rdma-vf", "rdma/ib"][rng.below(2)];
    let n = 1 + rng.below(4);
    let mut limits = json!({gpu: n, nic: rng.below(n + 1)});
    let guaranteed = rng.below(3) == 0;
    if guaranteed {
        limits["cpu"] = json!(1 + rng.below(8));
        limits["memory"] = json!("1Gi");
    }
    let container = |name: &str| json!({"name": name, "resources": {"limits": limits, "requests": if guaranteed { limits.clone() } else { json!({}) }}});
    let mut spec = json!({"containers": [container("main")]});
    if rng.below(4) == 0 {
        spec["initContainers"] = json!([container("init")]);
    }
    let mut annotations = serde_json::Map::new();
    if rng.below(3) == 0 {
        let class = ["PIX", "PXB", "NODE"][rng.below(3)];
        annotations.insert("topoalign.dev/min-pair-class".into(), Value::from(class));
    }
    let p = json!({"metadata": {"name": "p", "namespace": "t", "annotations": annotations}, "spec": spec});
    pod_request(&p, &ResourceMap::default()).unwrap_or_else(|e| panic!("{e}"))
}

/// Each node judged alone with nothing shared: the straightforward judgement.
fn plain(d: &Decider, st: &ClusterState, req: &PodRequest, names: &[String]) -> Vec<Decision> {
    names
        .iter()
        .map(|n| {
            let slot = st.slot(n).unwrap_or_else(|| panic!("{n}"));
            let Some(NodeView::Known(e)) = st.view(slot) else {
                panic!("{n} is not known");
            };
            match d.judge.judge(e, req, &mut Reuse::plain()) {
                Verdict::Neutral(w) => Decision::Neutral(NeutralReason::Undecided(w)),
                v => Decision::Judged(v),
            }
        })
        .collect()
}

#[test]
fn the_shared_judgement_equals_each_node_judged_alone() {
    let mut kinds: BTreeMap<&str, usize> = BTreeMap::new();
    for seed in 0..6u64 {
        let mut rng = Rng::new(seed);
        let (st, names) = cluster(&mut rng, 160);
        for _ in 0..4 {
            let req = pod(&mut rng);
            let d = Decider::new(ResourceMap::default(), 1 << 20);
            let (fast, _) = d.decide(&st, &req, &names, SystemTime::now());
            let want = plain(&d, &st, &req, &names);
            for (i, (f, w)) in fast.iter().zip(&want).enumerate() {
                assert_eq!(f, w, "seed {seed}, pod {:?}, node {}", req.pod, names[i]);
                let kind = match w {
                    Decision::Judged(Verdict::Fit(_)) => "fit",
                    Decision::Judged(Verdict::Reject { message, .. })
                        if message.starts_with("Topology Manager") =>
                    {
                        "tm-reject"
                    }
                    Decision::Judged(Verdict::Reject { .. }) => "plan-reject",
                    _ => "neutral",
                };
                *kinds.entry(kind).or_default() += 1;
            }
            // Judged again without the cache: the same.
            let uncached = Decider::new(ResourceMap::default(), 0);
            let (again, _) = uncached.decide(&st, &req, &names, SystemTime::now());
            assert_eq!(again, fast, "seed {seed}");
        }
    }
    for k in ["fit", "tm-reject", "plan-reject"] {
        assert!(kinds.get(k).copied().unwrap_or(0) > 50, "{kinds:?}");
    }
}

/// A warm call (every verdict cached) is answered in one pass: the same decisions as the
/// call that judged, for judged, broken, stale and unknown nodes, in any order; a call
/// with a state not yet judged goes the long way.
#[test]
fn a_warm_call_in_one_pass_says_what_the_judging_call_said() {
    let now = SystemTime::now();
    for seed in 0..4u64 {
        let mut rng = Rng::new(100 + seed);
        let (mut st, mut names) = cluster(&mut rng, 120);
        for (i, n) in names.clone().iter().enumerate() {
            let Some(NodeView::Known(e)) = st.slot(n).and_then(|s| st.view(s)) else {
                continue;
            };
            let mut info = e.info.clone();
            match i % 7 {
                0 => st.upsert_node(n, NodeEntry::Broken(format!("bad report {i}"))),
                1 => {
                    info.reported_at = Some(now - std::time::Duration::from_secs(3600));
                    st.upsert_node(n, NodeEntry::Known(info));
                }
                2 => {
                    info.reported_at = Some(now);
                    st.upsert_node(n, NodeEntry::Known(info));
                }
                _ => {}
            }
        }
        names.push("nobody".to_string());
        names.push("nobody-else".to_string());
        let d = Decider::new(ResourceMap::default(), 1 << 20);
        let req = pod(&mut rng);
        // Half the list first: the shape is then held, but not every state of the whole.
        let (half, stats) = d.decide(&st, &req, &names[..60], now);
        assert!(stats.misses > 0, "seed {seed}: the first call judges");
        let (first, stats) = d.decide(&st, &req, &names, now);
        assert!(
            stats.misses > 0,
            "seed {seed}: the second call judges the rest"
        );
        assert_eq!(half, first[..60], "seed {seed}");
        let (warm, stats) = d.decide(&st, &req, &names, now);
        assert_eq!(warm, first, "seed {seed}");
        assert_eq!(stats.misses, 0, "seed {seed}");
        assert!(stats.hits > 50, "seed {seed}: {stats:?}");
        let kinds: std::collections::BTreeSet<String> = warm
            .iter()
            .map(|d| format!("{d:?}").chars().take(16).collect())
            .collect();
        assert!(kinds.len() >= 4, "seed {seed}: {kinds:?}");
        // Another order: the same decision for each name.
        let mut order: Vec<usize> = (0..names.len()).collect();
        rng.shuffle(&mut order);
        let shuffled: Vec<String> = order.iter().map(|&i| names[i].clone()).collect();
        let (again, stats) = d.decide(&st, &req, &shuffled, now);
        assert_eq!(stats.misses, 0, "seed {seed}");
        for (k, &i) in order.iter().enumerate() {
            assert_eq!(again[k], first[i], "seed {seed}, {}", names[i]);
        }
        // A node freed: its new state judged (or found: another node may be in it).
        let changed = names
            .iter()
            .find(|n| {
                matches!(st.slot(n).and_then(|s| st.view(s)), Some(NodeView::Known(e))
                    if e.info.reported_at.is_none() && !e.info.used.gpus.is_empty())
            })
            .cloned();
        if let Some(n) = changed {
            let Some(NodeView::Known(e)) = st.slot(&n).and_then(|s| st.view(s)) else {
                unreachable!()
            };
            let mut info = e.info.clone();
            info.used.gpus.clear();
            info.used.nics.clear();
            st.upsert_node(&n, NodeEntry::Known(info));
            let (after, _) = d.decide(&st, &req, &names, now);
            let fresh = Decider::new(ResourceMap::default(), 1 << 20);
            assert_eq!(after, fresh.decide(&st, &req, &names, now).0, "seed {seed}");
        }
    }
}

#[test]
fn many_node_states_are_judged_on_several_threads_when_cores_allow() {
    let cores = std::thread::available_parallelism().map_or(1, usize::from);
    assert_eq!(super::judging_threads(10), 1);
    assert_eq!(
        super::judging_threads(100_000),
        cores.clamp(1, super::MAX_THREADS)
    );
}
