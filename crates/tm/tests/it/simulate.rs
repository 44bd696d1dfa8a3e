//! End-to-end admissions on the built-in profiles.

use serde_json::json;
use topoalign_kube_types::kubelet_settings::{ConfigError, CpuPolicy, Policy, Scope, Settings};
use topoalign_kube_types::{TOPOLOGY_AFFINITY_ERROR, UNEXPECTED_ADMISSION_ERROR};
use topoalign_tm::{Case, Pod, ResourceMap, SimError, Usage, simulate};

fn mi300x() -> topoalign_topology::Topology {
    topoalign_profiles::get("mi300x-8").unwrap()
}

fn settings(policy: Policy) -> Settings {
    Settings {
        topology_manager_policy: policy,
        ..Settings::default()
    }
}

/// Simulates `pod` with the default resource map.
fn try_run(
    topo: &topoalign_topology::Topology,
    s: &Settings,
    pod: &Pod,
    usage: &Usage,
    seed: u64,
) -> Result<topoalign_tm::Outcome, SimError> {
    let resources = ResourceMap::default();
    simulate(&Case {
        topology: topo,
        settings: s,
        resources: &resources,
        pod,
        usage,
        seed,
    })
}

/// Simulates `pod` with seed 7; the simulation must not fail.
fn run(
    topo: &topoalign_topology::Topology,
    s: &Settings,
    pod: &Pod,
    usage: &Usage,
) -> topoalign_tm::Outcome {
    try_run(topo, s, pod, usage, 7).unwrap()
}

fn flags_pod(gpus: u64, vfs: u64) -> Pod {
    Pod::from_flags(
        &[
            ("amd.com/gpu".to_string(), gpus),
            ("nvidia.com/sriov-rdma-vf".to_string(), vfs),
        ],
        None,
        None,
    )
    .unwrap()
}

#[test]
fn used_devices_push_the_pod_to_the_other_node() {
    let topo = mi300x();
    let usage: Usage = serde_json::from_value(json!({"gpus": ["0000:11:00.0"]})).unwrap();
    let out = run(
        &topo,
        &settings(Policy::Restricted),
        &flags_pod(4, 4),
        &usage,
    );
    assert!(out.admitted);
    assert_eq!(out.numa_nodes_used, [1]);
    let merge = &out.merges[0];
    let gpu = &merge.providers[0].resources[0];
    assert_eq!(gpu.resource, "amd.com/gpu");
    let shown: Vec<String> = gpu
        .hints
        .as_ref()
        .unwrap()
        .iter()
        .map(ToString::to_string)
        .collect();
    assert_eq!(shown, ["{1}T", "{0,1}F"]);
}

#[test]
fn impossible_request_is_rejected_by_restricted_and_fails_allocation_under_best_effort() {
    let topo = mi300x();
    let out = run(
        &topo,
        &settings(Policy::Restricted),
        &flags_pod(9, 1),
        &Usage::default(),
    );
    assert_eq!(out.reason.as_deref(), Some(TOPOLOGY_AFFINITY_ERROR));
    let be = run(
        &topo,
        &settings(Policy::BestEffort),
        &flags_pod(9, 1),
        &Usage::default(),
    );
    assert!(!be.admitted);
    assert_eq!(be.reason.as_deref(), Some(UNEXPECTED_ADMISSION_ERROR));
}

#[test]
fn static_cpu_manager_joins_the_merge() {
    let topo = mi300x();
    let mut s = settings(Policy::SingleNumaNode);
    s.cpu_manager_policy = CpuPolicy::Static;
    s.reserved_cpu_millis = 637;
    let pod = Pod::from_flags(
        &[("amd.com/gpu".to_string(), 2)],
        Some("8".parse().unwrap()),
        Some("16Gi".parse().unwrap()),
    )
    .unwrap();
    let out = run(&topo, &s, &pod, &Usage::default());
    assert!(out.admitted, "{out:?}");
    assert_eq!(out.allocations[0].cpus.len(), 8);
    assert_eq!(out.numa_nodes_used.len(), 1);
    assert!(!out.allocations[0].cpus.contains(0), "CPU 0 is reserved");
    // 120 CPUs cannot fit one node (112 each): single-numa-node rejects.
    let big = Pod::from_flags(
        &[],
        Some("120".parse().unwrap()),
        Some("1Gi".parse().unwrap()),
    )
    .unwrap();
    assert!(!run(&topo, &s, &big, &Usage::default()).admitted);
}

#[test]
fn init_container_devices_are_reused_in_container_scope() {
    let topo = mi300x();
    let pod = Pod::from_manifest(&json!({"spec": {
        "initContainers": [{"name": "init", "resources": {"limits": {"amd.com/gpu": 2}}}],
        "containers": [{"name": "app", "resources": {"limits": {"amd.com/gpu": 2}}}]
    }}))
    .unwrap();
    let out = run(
        &topo,
        &settings(Policy::Restricted),
        &pod,
        &Usage::default(),
    );
    assert!(out.admitted);
    assert_eq!(out.merges.len(), 2, "one merge per container");
    let init = &out.allocations[0].devices[0].1;
    let app = &out.allocations[1].devices[0].1;
    assert_eq!(
        init, app,
        "the app container reuses the init container's GPUs"
    );
    let mut pod_scope = settings(Policy::Restricted);
    pod_scope.topology_manager_scope = Scope::Pod;
    let out = run(&topo, &pod_scope, &pod, &Usage::default());
    assert_eq!(out.merges.len(), 1);
    assert_eq!(out.merges[0].target, "pod");
}

#[test]
fn max_allowable_numa_nodes_and_options_are_checked() {
    let topo = mi300x();
    let mut s = settings(Policy::Restricted);
    s.topology_manager_policy_options
        .insert("max-allowable-numa-nodes".into(), "4".into());
    let pod = flags_pod(1, 1);
    assert_eq!(
        try_run(&topo, &s, &pod, &Usage::default(), 0).unwrap_err(),
        SimError::Config(ConfigError::MaxAllowableTooLow(4))
    );
    let mut t = settings(Policy::SingleNumaNode);
    t.topology_manager_policy_options
        .insert("prefer-closest-numa-nodes".into(), "true".into());
    // The kubelet accepts the option with single-numa-node and ignores it: so does the
    // simulator, and it says so.
    let out = try_run(&topo, &t, &pod, &Usage::default(), 0).unwrap();
    assert!(
        out.warnings
            .iter()
            .any(|w| w.contains("prefer-closest-numa-nodes") && w.contains("single-numa-node")),
        "{:?}",
        out.warnings
    );
}

#[test]
fn more_numa_nodes_than_allowed_fails_unless_policy_none() {
    let mut topo = mi300x();
    let base = topo.numa[0].clone();
    for id in 2..10 {
        let mut n = base.clone();
        n.id = id;
        n.cpus = Default::default();
        topo.numa.push(n);
    }
    let pod = flags_pod(1, 0);
    let usage = Usage::default();
    assert_eq!(
        try_run(&topo, &settings(Policy::BestEffort), &pod, &usage, 0).unwrap_err(),
        SimError::Config(ConfigError::TooManyNumaNodes { nodes: 10, max: 8 })
    );
    assert!(
        try_run(&topo, &settings(Policy::None), &pod, &usage, 0)
            .unwrap()
            .admitted
    );
}
