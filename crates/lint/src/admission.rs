//! The kubelet's admission of a pod on an empty node of the linted kind. The lint asks the
//! context's [`TopologyManagerModel`](crate::finding::TopologyManagerModel) (the binary
//! passes the Topology Manager simulation `topoalign tm` runs: hints, merge, admit,
//! allocate), so that lint never promises an admission `tm` (and the kubelet) refuses,
//! without depending on the simulation itself.

use topoalign_kube_types::Admission;
use topoalign_kube_types::kubelet_settings::{Scope, Settings};

use crate::finding::{LintContext, NodePolicy};
use crate::workloads::PodSpecAt;

/// The simulated admission of `pod` on an empty node described by `ctx`; `None` when
/// the context has no model or the model cannot judge the pod.
pub(crate) fn admit(pod: &PodSpecAt, ctx: &LintContext<'_>) -> Option<Admission> {
    let model = ctx.topology_manager?;
    let spec = serde_json::to_value(&pod.spec).ok()?;
    let manifest = serde_json::json!({"kind": "Pod", "metadata": {"name": "lint"}, "spec": spec});
    model.admit(&manifest, ctx.topology, &settings_of(ctx))
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
pub(crate) fn policy_rejects(policy: NodePolicy) -> bool {
    matches!(policy, NodePolicy::Restricted | NodePolicy::SingleNumaNode)
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::PodSpec;
    use topoalign_tm::admit_on_empty_node;
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
            topology_manager: Some(&admit_on_empty_node),
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

    #[test]
    fn without_a_model_nothing_is_simulated() {
        let topo = topoalign_profiles::get("mi300x-8").unwrap();
        let c = LintContext {
            topology_manager: None,
            ..ctx(&topo, NodePolicy::Restricted)
        };
        let p = pod(serde_json::json!({"amd.com/gpu": 8, "nvidia.com/sriov-rdma-vf": 8}));
        assert!(admit(&p, &c).is_none());
    }
}
