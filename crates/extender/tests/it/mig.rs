//! Device-plugin MIG: a pod asking `nvidia.com/mig-<profile>` is filtered off nodes whose
//! GFD labels or allocatable resources cannot hold its MIG set, kept where they can.

use std::time::SystemTime;

use crate::common::*;
use serde_json::{Value, json};
use topoalign_extender::Interner;
use topoalign_extender::{Decider, pod_request};
use topoalign_kube_types::kubelet_settings::Policy;
use topoalign_mig::NodeMig;
use topoalign_tm::ResourceMap;

fn gfd_node(name: &str, gpus: &str, counts: &[(&str, &str)], alloc: Value) -> Value {
    let mut labels = json!({
        "nvidia.com/mig.strategy": "mixed",
        "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3",
        "nvidia.com/gpu.count": gpus,
    });
    for (p, c) in counts {
        labels[format!("nvidia.com/mig-{p}.count")] = json!(c);
    }
    json!({"kind": "Node", "metadata": {"name": name, "labels": labels},
           "status": {"allocatable": alloc}})
}

#[test]
fn a_mig_set_is_filtered_where_the_node_cannot_hold_it() {
    let mut st = state();
    let nodes = [
        // Offers the set now.
        gfd_node(
            "fits",
            "1",
            &[("3g.40gb", "2"), ("1g.10gb", "0")],
            json!({}),
        ),
        // Labels say two 3g, but one is in use: allocatable wins.
        gfd_node(
            "busy",
            "1",
            &[("3g.40gb", "2")],
            json!({"nvidia.com/mig-3g.40gb": "1", "cpu": "64"}),
        ),
        // Seven 1g: a new geometry of its one GPU could hold two 3g (preemption can help).
        gfd_node("small", "1", &[("1g.10gb", "7")], json!({})),
        // Too small for ever: two 3g need one whole GPU, this one is GPU-less.
        gfd_node("none", "0", &[], json!({"nvidia.com/mig-1g.10gb": 0})),
    ];
    for n in &nodes {
        let name = n["metadata"]["name"].as_str().unwrap();
        st.set_mig(name, NodeMig::from_node(n).map(Result::unwrap));
    }
    // A plain node (no MIG labels) is judged as today: a topoalign profile node passes an
    // unmanaged pod; a name the state does not know at all passes too.
    let mut i = Interner::default();
    st.upsert_node("plain", node(&mut i, "dgx-h100", Policy::None, &[], &[]));
    let d = Decider::new(ResourceMap::default(), 100);
    let p = pod("m", json!({"nvidia.com/mig-3g.40gb": 2}), json!({}));
    let req = pod_request(&p, d.resources()).unwrap();
    let cands: Vec<String> = ["fits", "busy", "small", "plain", "nobody"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    let (f, _) = d.filter(&st, &req, &cands, SystemTime::now());
    assert_eq!(f.passed, [true, false, false, true, true]);
    let busy = &f.failed["busy"];
    assert!(
        busy.contains("2 × nvidia.com/mig-3g.40gb, the node has 1"),
        "{busy}"
    );
    assert!(f.failed.contains_key("small"), "{f:?}");
    assert!(f.unresolvable.is_empty(), "{f:?}");

    // Three 3g on a one-GPU node: no geometry holds them, preemption cannot help.
    let p = pod("big", json!({"nvidia.com/mig-3g.40gb": 3}), json!({}));
    let req = pod_request(&p, d.resources()).unwrap();
    let (f, _) = d.filter(&st, &req, &cands[..2], SystemTime::now());
    assert_eq!(f.passed, [false, false]);
    let m = &f.unresolvable["fits"];
    assert!(
        m.contains("3 × nvidia.com/mig-3g.40gb, the node has 2"),
        "{m}"
    );

    // A profile the node's model lacks: named with the known ones, unresolvable.
    let p = pod("b200", json!({"nvidia.com/mig-2g.45gb": 1}), json!({}));
    let req = pod_request(&p, d.resources()).unwrap();
    let (f, _) = d.filter(&st, &req, &cands[..1], SystemTime::now());
    let m = &f.unresolvable["fits"];
    assert!(
        m.contains("unknown MIG profile `2g.45gb` for h100-80gb"),
        "{m}"
    );
    // A GPU-less node with a zero-count MIG resource shows MIG but offers nothing.
    let (f, _) = d.filter(&st, &req, &["none".to_string()], SystemTime::now());
    assert_eq!(f.passed, [false]);
}

#[test]
fn unreadable_mig_labels_are_errors_not_panics() {
    let mut n = gfd_node("x", "1", &[("1g.10gb", "many")], json!({}));
    let e = NodeMig::from_node(&n).unwrap().unwrap_err().to_string();
    assert!(e.contains("nvidia.com/mig-1g.10gb.count"), "{e}");
    n["metadata"]["labels"]["nvidia.com/mig-1g.10gb.count"] = json!("1");
    n["metadata"]["labels"]["nvidia.com/mig.strategy"] = json!("Mixed!");
    let e = NodeMig::from_node(&n).unwrap().unwrap_err().to_string();
    assert!(e.contains("nvidia.com/mig.strategy"), "{e}");
    assert!(NodeMig::from_node(&json!({"metadata": {"name": "plain"}})).is_none());
    assert!(NodeMig::from_node(&json!([])).is_none());
}

/// Under the single strategy the device plugin serves `nvidia.com/gpu` as MIG instances
/// of the node's one profile: a pod asking more than the node has is filtered off it;
/// one that fits passes without the whole-GPU topology judging (which would count 8
/// GPUs, not 14 instances); mixed and plain nodes judge `nvidia.com/gpu` as before.
#[test]
fn single_strategy_nodes_hold_nvidia_gpu_as_instances() {
    let mut st = state();
    let single = |name: &str, count: &str| {
        json!({"kind": "Node", "metadata": {"name": name, "labels": {
            "nvidia.com/mig.strategy": "single",
            "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3-MIG-1g.10gb",
            "nvidia.com/gpu.count": count,
        }}, "status": {"allocatable": {"nvidia.com/gpu": count}}})
    };
    for n in [single("s14", "14"), single("s4", "4")] {
        let name = n["metadata"]["name"].as_str().unwrap();
        st.set_mig(name, NodeMig::from_node(&n).map(Result::unwrap));
    }
    let mixed = gfd_node("mixed", "1", &[("1g.10gb", "7")], json!({}));
    st.set_mig("mixed", NodeMig::from_node(&mixed).map(Result::unwrap));
    let mut i = Interner::default();
    st.upsert_node("plain", node(&mut i, "dgx-h100", Policy::None, &[], &[]));
    let d = Decider::new(ResourceMap::default(), 100);
    let p = pod("g", json!({"nvidia.com/gpu": 10}), json!({}));
    let req = pod_request(&p, d.resources()).unwrap();
    let cands: Vec<String> = ["s14", "s4", "mixed"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    let (f, _) = d.filter(&st, &req, &cands, SystemTime::now());
    assert_eq!(f.passed, [true, false, true], "{f:?}");
    // Asked again, the call is answered in one pass from the cache: the same answer.
    let (again, stats) = d.filter(&st, &req, &cands, SystemTime::now());
    assert_eq!(stats.misses, 0);
    assert_eq!(
        (&again.passed, &again.failed, &again.unresolvable),
        (&f.passed, &f.failed, &f.unresolvable)
    );
    let m = f
        .failed
        .get("s4")
        .or_else(|| f.unresolvable.get("s4"))
        .unwrap();
    assert!(
        m.contains("10 × nvidia.com/gpu (1g.10gb instances), the node has 4"),
        "{m}"
    );
    // A MIG profile by name on a single-strategy node: never (the plugin offers none).
    let p = pod("p", json!({"nvidia.com/mig-1g.10gb": 1}), json!({}));
    let req = pod_request(&p, d.resources()).unwrap();
    let (f, _) = d.filter(&st, &req, &cands[..1], SystemTime::now());
    assert_eq!(f.passed, [false]);
    assert!(f.unresolvable["s14"].contains("single strategy"), "{f:?}");
}
