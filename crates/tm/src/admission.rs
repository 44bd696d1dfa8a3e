//! The kubelet's admission of a pod on an empty node: the same simulation `topoalign tm`
//! runs (hints, merge, admit, allocate), summed up as the kubelet's verdict. The lint
//! asks for it through its `TopologyManagerModel` port, so that it never promises an
//! admission `tm` (and the kubelet) refuses.

use serde_json::Value;
use topoalign_kube_types::kubelet_settings::Settings;
use topoalign_kube_types::{Admission, MergedHint};
use topoalign_topology::Topology;

use crate::node::Usage;
use crate::outcome::Outcome;
use crate::pod::Pod;
use crate::resources::{DeviceKind, ResourceMap};
use crate::simulate::{Case, simulate};

impl Outcome {
    /// The kubelet's verdict in this outcome.
    pub fn admission(&self) -> Admission {
        Admission {
            admitted: self.admitted,
            reason: self.reason.clone(),
            message: self.message.clone(),
            numa_nodes_used: self.numa_nodes_used.clone(),
            last_merge: self.merges.last().map(|m| MergedHint {
                numa_nodes: m.best.affinity.map(|a| a.bits()),
                preferred: m.best.preferred,
            }),
        }
    }
}

/// The admission of `pod` (a Pod manifest) on an empty node of `topology` under
/// `settings`, seed 0; `None` when it cannot be simulated (no device requests, a resource
/// the simulator does not know such as a MIG slice, or a pod spec the simulator refuses).
/// A node without VFs serves an SR-IOV resource name with its physical NICs.
pub fn admit_on_empty_node(
    pod: &Value,
    topology: &Topology,
    settings: &Settings,
) -> Option<Admission> {
    let tm_pod = Pod::from_manifest(pod).ok()?;
    let mut resources = ResourceMap::default();
    let names = tm_pod.extended_resources();
    if names.is_empty() {
        return None;
    }
    let has_vfs = topology.nics.iter().any(|n| n.is_vf());
    for name in &names {
        match resources.resolve(name) {
            None => return None,
            Some(DeviceKind::Vfs { .. }) if !has_vfs => {
                resources.add_spec(&format!("{name}=pfs"), "lint").ok()?;
            }
            Some(_) => {}
        }
    }
    simulate(&Case {
        topology,
        settings,
        resources: &resources,
        pod: &tm_pod,
        usage: &Usage::default(),
        seed: 0,
    })
    .ok()
    .map(|o| o.admission())
}

#[cfg(test)]
mod tests {
    use topoalign_kube_types::TOPOLOGY_AFFINITY_ERROR;
    use topoalign_kube_types::kubelet_settings::Policy;

    use super::*;

    fn pod(limits: Value) -> Value {
        serde_json::json!({"kind": "Pod", "metadata": {"name": "p"}, "spec": {"containers": [
            {"name": "c", "resources": {"limits": limits.clone(), "requests": limits}}
        ]}})
    }

    fn under(policy: Policy) -> Settings {
        Settings {
            topology_manager_policy: policy,
            ..Settings::default()
        }
    }

    #[test]
    fn eight_gpus_and_eight_vfs_are_rejected_under_restricted() {
        let topo = topoalign_profiles::get("mi300x-8").unwrap();
        let p = pod(
            serde_json::json!({"amd.com/gpu": 8, "nvidia.com/sriov-rdma-vf": 8,
            "cpu": "16", "memory": "64Gi"}),
        );
        let a = admit_on_empty_node(&p, &topo, &under(Policy::Restricted)).unwrap();
        assert!(!a.admitted, "{a:?}");
        assert_eq!(a.reason.as_deref(), Some(TOPOLOGY_AFFINITY_ERROR));
        assert!(a.last_merge.is_some_and(|m| !m.preferred));
        let a = admit_on_empty_node(&p, &topo, &under(Policy::BestEffort)).unwrap();
        assert!(a.admitted);
        assert_eq!(a.numa_nodes_used, [0, 1]);
    }

    #[test]
    fn mig_devices_are_admitted_without_hints_and_said_so() {
        let topo = topoalign_profiles::get("dgx-h100").unwrap();
        let s = under(Policy::SingleNumaNode);
        let m = pod(serde_json::json!({"nvidia.com/mig-1g.10gb": 2, "nvidia.com/gpu": 1}));
        let tm_pod = Pod::from_manifest(&m).unwrap();
        let out = simulate(&Case {
            topology: &topo,
            settings: &s,
            resources: &ResourceMap::default(),
            pod: &tm_pod,
            usage: &Usage::default(),
            seed: 0,
        })
        .unwrap();
        assert!(out.admitted, "{out:?}");
        let note = out
            .warnings
            .iter()
            .find(|w| w.contains("nvidia.com/mig-1g.10gb"));
        assert!(
            note.is_some_and(|w| w.contains("no topology hints")),
            "{:?}",
            out.warnings
        );
        // The whole GPU is still aligned; the MIG devices are not in the allocation.
        let given: Vec<&String> = out
            .allocations
            .iter()
            .flat_map(|a| a.devices.iter().map(|(n, _)| n))
            .collect();
        assert_eq!(given, ["nvidia.com/gpu"]);
        // Names that only start like a MIG resource are still unknown.
        let bad = Pod::from_manifest(&pod(serde_json::json!({"nvidia.com/mig-": 1}))).unwrap();
        let e = simulate(&Case {
            topology: &topo,
            settings: &s,
            resources: &ResourceMap::default(),
            pod: &bad,
            usage: &Usage::default(),
            seed: 0,
        });
        assert!(e.is_err());
    }

    #[test]
    fn pods_the_simulator_cannot_judge_are_none() {
        let topo = topoalign_profiles::get("mi300x-8").unwrap();
        let s = under(Policy::Restricted);
        assert!(admit_on_empty_node(&pod(serde_json::json!({"cpu": "1"})), &topo, &s).is_none());
        let mig = pod(serde_json::json!({"nvidia.com/mig-2g.45gb": 2}));
        assert!(admit_on_empty_node(&mig, &topo, &s).is_none());
    }
}
