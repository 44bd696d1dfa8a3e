//! CPU-manager hints in the filter: on a node whose kubelet runs the static CPU manager,
//! a Guaranteed pod with integer CPUs has its CPUs in the Topology Manager merge, so a
//! restricted / single-numa-node node that has the GPUs and NICs on one NUMA node but
//! not the CPUs there is filtered. Node data in both forms: declared (labels) and the
//! agent's NodeResourceTopology (per-NUMA `cpu` zone resources).

use std::time::SystemTime;

use crate::common::*;
use serde_json::{Value, json};
use topoalign_extender::Decider;
use topoalign_extender::{ClusterState, NodeEntry, RejectKind, pod_request};
use topoalign_extender::{Interner, from_node_labels, from_nrt};
use topoalign_kube_types::labels::*;
use topoalign_kube_types::nrt::*;
use topoalign_tm::ResourceMap;

const AMD: &str = "amd.com/gpu";
const VF: &str = "nvidia.com/sriov-rdma-vf";

/// mi300x-8: NUMA 0 holds CPUs 0-55,112-167 and GPUs 0-3; NUMA 1 the rest. Every NUMA 1
/// GPU is in use, so a 4-GPU pod must take NUMA 0's GPUs; CPU 0 is reserved and
/// 1-55,112-160 are held by other pods: 7 CPUs left on NUMA 0.
const HELD_CPUS: &str = "1-55,112-160";

fn used_json(cpus: Option<&str>) -> String {
    let mut u = json!({"gpus": MI_GPUS_N1, "nics": []});
    if let Some(c) = cpus {
        u["cpus"] = json!(c);
    }
    u.to_string()
}

fn declared(policy: &str, cpu_policy: Option<&str>) -> Value {
    let mut labels = json!({PROFILE_LABEL: "mi300x-8", POLICY_LABEL: policy});
    let mut annotations = json!({USED_ANNOTATION: used_json(cpu_policy.map(|_| HELD_CPUS))});
    if let Some(c) = cpu_policy {
        labels[CPU_POLICY_LABEL] = json!(c);
        annotations[RESERVED_CPUS_ANNOTATION] = json!("0");
    }
    json!({"metadata": {"name": "n", "labels": labels, "annotations": annotations}})
}

/// The agent's object: topology, used devices, and per-NUMA CPU zones (allocatable 0 on
/// every zone: the kubelet's CPU manager is `none`).
fn nrt(policy: &str, static_cpus: bool) -> Value {
    let topo = topoalign_profiles::get("mi300x-8").unwrap();
    let zone = |id: u32, alloc: u64, avail: u64| {
        json!({"name": format!("node-{id}"), "type": NRT_ZONE_NUMA, "resources": [
            {"name": "cpu", "capacity": "112", "allocatable": alloc.to_string(), "available": avail.to_string()},
            {"name": AMD, "capacity": "4", "allocatable": "4", "available": if id == 0 { "4" } else { "0" }},
        ]})
    };
    let zones = if static_cpus {
        vec![zone(0, 111, 7), zone(1, 112, 112)]
    } else {
        vec![zone(0, 0, 0), zone(1, 0, 0)]
    };
    json!({
        "metadata": {"name": "n", "annotations": {
            TOPOLOGY_ANNOTATION: serde_json::to_string(&topo).unwrap(),
            USED_ANNOTATION: used_json(None),
        }},
        "attributes": [{"name": NRT_POLICY_ATTRIBUTE, "value": policy}],
        "zones": zones,
    })
}

/// A Guaranteed pod (requests = limits) with 4 GPUs, 4 VFs and `cpu` CPUs.
fn guaranteed(cpu: &str) -> Value {
    let limits = json!({AMD: 4, VF: 4, "cpu": cpu, "memory": "8Gi"});
    pod("p", limits, json!({}))
}

fn passes(entry: NodeEntry, pod: &Value) -> (bool, String) {
    let mut st = ClusterState::default();
    st.upsert_node("n", entry);
    let d = Decider::new(ResourceMap::default(), 0);
    let req = pod_request(pod, d.resources()).unwrap();
    let (f, _) = d.filter(&st, &req, &["n"], SystemTime::now());
    let msg = f
        .failed
        .get("n")
        .or(f.unresolvable.get("n"))
        .cloned()
        .unwrap_or_default();
    (f.passed[0], msg)
}

#[test]
fn static_cpu_manager_cpus_join_the_merge_on_declared_nodes() {
    let mut i = Interner::default();
    for policy in ["restricted", "single-numa-node"] {
        let node = from_node_labels(&declared(policy, Some("static")), &mut i).unwrap();
        let (ok, msg) = passes(node, &guaranteed("16"));
        assert!(!ok, "{policy}: 16 CPUs cannot join NUMA 0's GPUs");
        assert!(msg.contains("TopologyAffinityError"), "{policy}: {msg}");
        // 7 CPUs still fit next to the GPUs.
        let node = from_node_labels(&declared(policy, Some("static")), &mut i).unwrap();
        assert!(passes(node, &guaranteed("7")).0, "{policy}: 7 CPUs fit");
        // Without the static CPU manager the CPUs have no NUMA affinity.
        let node = from_node_labels(&declared(policy, None), &mut i).unwrap();
        assert!(
            passes(node, &guaranteed("16")).0,
            "{policy}: no CPU manager"
        );
        let node = from_node_labels(&declared(policy, Some("none")), &mut i).unwrap();
        assert!(
            passes(node, &guaranteed("16")).0,
            "{policy}: cpu manager none"
        );
        // Fractional CPUs and Burstable pods get shared CPUs: no CPU hints.
        let node = from_node_labels(&declared(policy, Some("static")), &mut i).unwrap();
        assert!(
            passes(node, &guaranteed("15500m")).0,
            "{policy}: fractional"
        );
        let mut burstable = guaranteed("16");
        burstable["spec"]["containers"][0]["resources"]["requests"]["cpu"] = json!("1");
        let node = from_node_labels(&declared(policy, Some("static")), &mut i).unwrap();
        assert!(passes(node, &burstable).0, "{policy}: burstable");
    }
    // best-effort admits whatever the merge says.
    let node = from_node_labels(&declared("best-effort", Some("static")), &mut i).unwrap();
    assert!(passes(node, &guaranteed("16")).0);
}

#[test]
fn static_cpu_manager_is_read_from_the_agents_cpu_zones() {
    let mut i = Interner::default();
    let entry = from_nrt(&nrt("restricted", true), &mut i);
    let NodeEntry::Known(info) = &entry else {
        panic!("{entry:?}");
    };
    assert_eq!(info.used.cpus.to_string(), HELD_CPUS);
    assert_eq!(
        info.settings
            .reserved_system_cpus
            .as_ref()
            .unwrap()
            .to_string(),
        "0"
    );
    let (ok, msg) = passes(entry, &guaranteed("16"));
    assert!(!ok);
    assert!(msg.starts_with("Topology Manager (restricted"), "{msg}");
    assert!(passes(from_nrt(&nrt("restricted", true), &mut i), &guaranteed("4")).0);
    // Allocatable 0 everywhere: the CPU manager is `none`.
    assert!(
        passes(
            from_nrt(&nrt("restricted", false), &mut i),
            &guaranteed("16")
        )
        .0
    );
}

#[test]
fn the_verdict_kind_and_the_cache_key_follow_the_cpus() {
    let mut i = Interner::default();
    let mut st = ClusterState::default();
    st.upsert_node(
        "n",
        from_node_labels(&declared("restricted", Some("static")), &mut i).unwrap(),
    );
    let d = Decider::new(ResourceMap::default(), 100);
    let req = pod_request(&guaranteed("16"), d.resources()).unwrap();
    let (decisions, _) = d.decide(&st, &req, &["n"], SystemTime::now());
    assert!(
        matches!(
            &decisions[0],
            topoalign_extender::Decision::Judged(topoalign_extender::Verdict::Reject {
                kind: RejectKind::TopologyManager,
                unresolvable: false,
                ..
            })
        ),
        "{decisions:?}"
    );
    // The held CPUs are released: same devices, other CPUs, another verdict.
    let mut freed = declared("restricted", Some("static"));
    freed["metadata"]["annotations"][USED_ANNOTATION] = json!(used_json(Some("1-3")));
    st.upsert_node("n", from_node_labels(&freed, &mut i).unwrap());
    let (f, _) = d.filter(&st, &req, &["n"], SystemTime::now());
    assert_eq!(f.passed, [true], "{:?}", f.failed);
}

#[test]
fn bad_cpu_data_is_named() {
    let mut i = Interner::default();
    let mut bad = declared("restricted", Some("static"));
    bad["metadata"]["annotations"][RESERVED_CPUS_ANNOTATION] = json!("999");
    let NodeEntry::Broken(why) = from_node_labels(&bad, &mut i).unwrap() else {
        panic!("accepted a reserved CPU the node lacks");
    };
    assert!(why.contains(RESERVED_CPUS_ANNOTATION), "{why}");
    let mut bad = declared("restricted", Some("dynamic"));
    bad["metadata"]["labels"][CPU_POLICY_LABEL] = json!("dynamic");
    let NodeEntry::Broken(why) = from_node_labels(&bad, &mut i).unwrap() else {
        panic!("accepted an unknown CPU manager policy");
    };
    assert!(why.contains(CPU_POLICY_LABEL), "{why}");
    let mut bad = nrt("restricted", true);
    bad["zones"][0]["resources"][0]["available"] = json!("500");
    let NodeEntry::Broken(why) = from_nrt(&bad, &mut i) else {
        panic!("accepted more available than allocatable CPUs");
    };
    assert!(why.contains("zones[0].resources[cpu].available"), "{why}");
}
