//! The kubelet's admission of a pod on an empty node of the linted kind, by the same
//! Topology Manager simulation `topoalign tm` runs (hints, merge, admit, allocate), so
//! that lint never promises an admission `tm` (and the kubelet) refuses.

use topoalign_tm::{Case, DeviceKind, Outcome, Pod, ResourceMap, Scope, Settings, Usage};

use crate::finding::{LintContext, NodePolicy};
use crate::workloads::PodSpecAt;

/// The simulated admission of `pod` on an empty node described by `ctx`; `None` when it
/// cannot be simulated (no device requests, a resource the simulator does not know such
/// as a MIG slice, or a pod spec the simulator refuses: other rules report those).
pub fn admit(pod: &PodSpecAt, ctx: &LintContext<'_>) -> Option<Outcome> {
    let spec = serde_json::to_value(&pod.spec).ok()?;
    let manifest = serde_json::json!({"kind": "Pod", "metadata": {"name": "lint"}, "spec": spec});
    let tm_pod = Pod::from_manifest(&manifest).ok()?;
    let mut resources = ResourceMap::default();
    let names = tm_pod.extended_resources();
    if names.is_empty() {
        return None;
    }
    // A node kind without VFs serves an SR-IOV resource name with its physical NICs, as
    // the single-NUMA capacity rule counts them.
    let has_vfs = ctx.topology.nics.iter().any(|n| n.is_vf());
    for name in &names {
        match resources.resolve(name) {
            None => return None,
            Some(DeviceKind::Vfs { .. }) if !has_vfs => {
                resources.add_spec(&format!("{name}=pfs"), "lint").ok()?;
            }
            Some(_) => {}
        }
    }
    let settings = settings_of(ctx);
    topoalign_tm::simulate(&Case {
        topology: ctx.topology,
        settings: &settings,
        resources: &resources,
        pod: &tm_pod,
        usage: &Usage::default(),
        seed: 0,
    })
    .ok()
}

/// The kubelet settings the manifests are linted against: the KubeletConfiguration's,
/// with the lint's policy and scope.
fn settings_of(ctx: &LintContext<'_>) -> Settings {
    let mut s = ctx.settings.cloned().unwrap_or_default();
    s.topology_manager_policy = ctx.policy;
    s.topology_manager_scope = if ctx.pod_scope {
        Scope::Pod
    } else {
        Scope::Container
    };
    s
}

/// True when the policy can refuse a pod for its NUMA placement.
pub fn policy_rejects(policy: NodePolicy) -> bool {
    matches!(policy, NodePolicy::Restricted | NodePolicy::SingleNumaNode)
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::PodSpec;
    use topoalign_topology::Topology;

    use super::*;

    fn pod(limits: serde_json::Value) -> PodSpecAt {
        let spec: PodSpec = serde_json::from_value(serde_json::json!({"containers": [
            {"name": "c", "resources": {"limits": limits.clone(), "requests": limits}}
        ]}))
        .unwrap();
        PodSpecAt {
            path: "spec".into(),
            spec,
            annotations: Default::default(),
        }
    }

    fn ctx(topo: &Topology, policy: NodePolicy) -> LintContext<'_> {
        LintContext {
            topology: topo,
            policy,
            pod_scope: false,
            kubelet_config: None,
            settings: None,
        }
    }

    #[test]
    fn eight_gpus_and_eight_vfs_are_rejected_under_restricted_as_tm_rejects_them() {
        let topo = topoalign_profiles::get("mi300x-8").unwrap();
        let p = pod(
            serde_json::json!({"amd.com/gpu": 8, "nvidia.com/sriov-rdma-vf": 8,
            "cpu": "16", "memory": "64Gi"}),
        );
        let o = admit(&p, &ctx(&topo, NodePolicy::Restricted)).unwrap();
        assert!(!o.admitted, "{o:?}");
        assert_eq!(o.reason.as_deref(), Some("TopologyAffinityError"));
        let o = admit(&p, &ctx(&topo, NodePolicy::BestEffort)).unwrap();
        assert!(o.admitted);
        let four = pod(serde_json::json!({"amd.com/gpu": 4, "nvidia.com/sriov-rdma-vf": 4}));
        assert!(
            admit(&four, &ctx(&topo, NodePolicy::Restricted))
                .unwrap()
                .admitted
        );
    }

    #[test]
    fn pods_the_simulator_cannot_judge_are_left_to_other_rules() {
        let topo = topoalign_profiles::get("mi300x-8").unwrap();
        let c = ctx(&topo, NodePolicy::Restricted);
        assert!(admit(&pod(serde_json::json!({"cpu": "1"})), &c).is_none());
        let mig = pod(serde_json::json!({"nvidia.com/mig-2g.45gb": 2}));
        assert!(admit(&mig, &c).is_none());
    }
}
