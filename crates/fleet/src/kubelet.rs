//! The `blind` and `tm-restricted` policies on one node, decided by the kubelet model of
//! [`topoalign_tm`]: the pod's GPU and NIC resources, its CPUs, the node's current usage
//! and the kubelet settings go in; the Topology Manager's admission and the device and
//! CPU managers' allocation come out.

use topoalign_kube_types::kubelet_settings::{
    CpuPolicy, PREFER_CLOSEST_NUMA_NODES, Policy, Settings,
};
use topoalign_tm::gpu_resource;
use topoalign_tm::{Case, DeviceKind, Outcome, Pod, Quantity, ResourceMap, Usage};
use topoalign_topology::{CpuSet, GpuNicPath};

use crate::error::FleetError;
use crate::node::{Assignment, NodeModel, NodeState};
use crate::workload::PodArrival;

/// The resource name of the SR-IOV VF pool (seed 000's `nvidia.com/sriov-rdma-vf`).
pub(crate) const VF_RESOURCE: &str = "nvidia.com/sriov-rdma-vf";
/// The resource name of the RDMA physical-function pool on nodes without VFs.
pub(crate) const PF_RESOURCE: &str = "rdma/rdma_pf";
/// Memory each GPU of a pod asks for (it makes the pod Guaranteed; no memory manager runs).
const MEMORY_PER_GPU: i64 = 16 << 30;

/// Which kubelet configuration admits the pod.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KubeletPolicy {
    /// Today's defaults: `topologyManagerPolicy: none`, `cpuManagerPolicy: none`. The GPU
    /// plugin's devices come in the device manager's (seeded, unsorted) order, the
    /// SR-IOV plugin packs the lowest VF addresses, CPUs come from the shared pool.
    Blind,
    /// `topologyManagerPolicy: restricted` with `prefer-closest-numa-nodes`, scope
    /// `container`, `cpuManagerPolicy: static` with the node's reserved CPUs.
    Restricted,
}

/// What the kubelet did with a pod.
#[derive(Debug, Clone, PartialEq)]
pub enum Admission {
    /// Admitted: the devices and CPUs it got and each GPU's best NIC of the pod.
    Admitted {
        /// Devices and CPUs.
        assignment: Assignment,
        /// One path per GPU: the GPU with its best NIC of the pod.
        pairs: Vec<GpuNicPath>,
    },
    /// Refused at admission (`TopologyAffinityError`, or `UnexpectedAdmissionError`).
    Rejected(String),
}

/// One node type's kubelet: settings and resource names, built once.
#[derive(Debug, Clone)]
pub struct KubeletNode {
    blind: Settings,
    restricted: Settings,
    resources: ResourceMap,
    gpu_resource: &'static str,
    nic_resource: &'static str,
}

impl KubeletNode {
    /// The kubelet of a node type: GPUs under the vendor's resource name, NICs under
    /// [`VF_RESOURCE`] (VFs) or [`PF_RESOURCE`] (RDMA PFs), as the model offers them.
    pub fn new(model: &NodeModel) -> Self {
        let gpu_res = gpu_resource(&model.topology);
        let (nic_res, nic_kind) = if model.nics_are_vfs {
            (VF_RESOURCE, DeviceKind::Vfs { per_pf: None })
        } else {
            (PF_RESOURCE, DeviceKind::Pfs)
        };
        let mut resources = ResourceMap::default();
        resources.add(gpu_res, DeviceKind::Gpus(None));
        resources.add(nic_res, nic_kind);
        let mut restricted = Settings {
            topology_manager_policy: Policy::Restricted,
            cpu_manager_policy: CpuPolicy::Static,
            reserved_system_cpus: Some(model.reserved_cpus.clone()),
            ..Settings::default()
        };
        restricted
            .topology_manager_policy_options
            .insert(PREFER_CLOSEST_NUMA_NODES.to_string(), "true".to_string());
        KubeletNode {
            blind: Settings::default(),
            restricted,
            resources,
            gpu_resource: gpu_res,
            nic_resource: nic_res,
        }
    }

    /// The pod as the kubelet sees it: one container with the GPU and NIC resources and,
    /// when it asks for CPUs, integer CPU and memory limits (a Guaranteed pod).
    pub fn pod(&self, pod: &PodArrival) -> Result<Pod, FleetError> {
        let devices = [
            (self.gpu_resource.to_string(), u64::from(pod.gpus)),
            (self.nic_resource.to_string(), u64::from(pod.nics)),
        ];
        let (cpus, memory) = if pod.cpus > 0 {
            (
                Some(Quantity::from_units(i64::from(pod.cpus))),
                Some(Quantity::from_units(
                    MEMORY_PER_GPU * i64::from(pod.gpus.max(1)),
                )),
            )
        } else {
            (None, None)
        };
        Pod::from_flags(&devices, cpus, memory).map_err(|e| FleetError::Kubelet(e.to_string()))
    }

    /// Admits `pod` on a node of this type in `state`; `seed` drives the device manager's
    /// unsorted GPU order.
    pub fn admit(
        &self,
        policy: KubeletPolicy,
        model: &NodeModel,
        state: &NodeState,
        pod: &PodArrival,
        seed: u64,
    ) -> Result<Admission, FleetError> {
        let settings = match policy {
            KubeletPolicy::Blind => &self.blind,
            KubeletPolicy::Restricted => &self.restricted,
        };
        let usage = Usage {
            gpus: state.used_gpu_bdfs(model),
            nics: state.used_nic_bdfs(model),
            cpus: state.pinned_cpus.clone(),
            memory: Default::default(),
        };
        let kube_pod = self.pod(pod)?;
        let case = Case {
            topology: &model.topology,
            settings,
            resources: &self.resources,
            pod: &kube_pod,
            usage: &usage,
            seed,
        };
        let outcome =
            topoalign_tm::simulate(&case).map_err(|e| FleetError::Kubelet(e.to_string()))?;
        self.read(model, pod, &outcome)
    }

    /// Turns the simulator's outcome into positions of the model.
    fn read(
        &self,
        model: &NodeModel,
        pod: &PodArrival,
        outcome: &Outcome,
    ) -> Result<Admission, FleetError> {
        if !outcome.admitted {
            return Ok(Admission::Rejected(
                outcome
                    .reason
                    .clone()
                    .unwrap_or_else(|| "rejected".to_string()),
            ));
        }
        let mut a = Assignment::default();
        let mut pinned = CpuSet::new();
        for alloc in &outcome.allocations {
            pinned = pinned.union(&alloc.cpus);
            for (name, devices) in &alloc.devices {
                for d in devices {
                    let pos = if name == self.gpu_resource {
                        model.gpu_position(d.bdf).map(|p| a.gpus.push(p))
                    } else {
                        model.nic_position(d.bdf).map(|p| a.nics.push(p))
                    };
                    if pos.is_none() {
                        return Err(FleetError::Kubelet(format!(
                            "the kubelet model allocated {} from `{name}`, which the node does not offer",
                            d.bdf
                        )));
                    }
                }
            }
        }
        a.shared_cpus = pod
            .cpus
            .saturating_sub(u32::try_from(pinned.len()).unwrap_or(u32::MAX));
        a.pinned_cpus = pinned;
        let pairs = outcome
            .pairs
            .iter()
            .filter_map(|p| {
                Some(GpuNicPath {
                    class: p.class?,
                    nccl: p.nccl?,
                    gdr: p.gdr,
                })
            })
            .collect();
        Ok(Admission::Admitted {
            assignment: a,
            pairs,
        })
    }
}

#[cfg(test)]
mod tests {
    use topoalign_topology::PcieClass;

    use super::*;
    use crate::testing::{model, pod};

    fn admitted(a: Admission) -> (Assignment, Vec<GpuNicPath>) {
        match a {
            Admission::Admitted { assignment, pairs } => (assignment, pairs),
            Admission::Rejected(r) => panic!("rejected: {r}"),
        }
    }

    #[test]
    fn restricted_aligns_numa_but_packs_the_vfs() {
        let m = model("mi300x-8");
        let k = KubeletNode::new(&m);
        let s = NodeState::new(&m);
        let (a, pairs) = admitted(
            k.admit(KubeletPolicy::Restricted, &m, &s, &pod(4), 1)
                .unwrap(),
        );
        let mut gpus = a.gpus.clone();
        gpus.sort_unstable();
        assert_eq!(gpus, vec![0, 1, 2, 3]);
        assert_eq!(a.nics, vec![0, 1, 2, 3], "the packed allocator: PF0's VFs");
        // 32 exclusive CPUs on NUMA node 0, none of the reserved ones.
        assert_eq!(a.pinned_cpus.len(), 32);
        assert_eq!(a.shared_cpus, 0);
        assert!(a.pinned_cpus.intersection(&m.reserved_cpus).is_empty());
        let count = |c| pairs.iter().filter(|p| p.class == c).count();
        assert_eq!((count(PcieClass::Pix), count(PcieClass::Node)), (1, 3));
    }

    #[test]
    fn restricted_rejects_what_one_numa_node_cannot_hold() {
        let m = model("mi300x-8");
        let k = KubeletNode::new(&m);
        let mut s = NodeState::new(&m);
        // Two GPUs busy on each NUMA node: 4 GPUs fit only across both.
        for g in [0, 1, 4, 5] {
            s.gpu_used[g] = true;
        }
        assert_eq!(
            k.admit(KubeletPolicy::Restricted, &m, &s, &pod(4), 1)
                .unwrap(),
            Admission::Rejected("TopologyAffinityError".to_string())
        );
        // An 8+8 pod on an empty node: the GPUs need both NUMA nodes, the 8 VFs (16 per
        // NUMA node) and 64 CPUs fit on one, so no merged hint is preferred.
        let s = NodeState::new(&m);
        assert!(matches!(
            k.admit(KubeletPolicy::Restricted, &m, &s, &pod(8), 1)
                .unwrap(),
            Admission::Rejected(_)
        ));
        // Topology Manager `none` admits both, blind to the split.
        let (a, _) = admitted(k.admit(KubeletPolicy::Blind, &m, &s, &pod(8), 1).unwrap());
        assert_eq!((a.gpus.len(), a.nics.len()), (8, 8));
        assert!(a.pinned_cpus.is_empty());
        assert_eq!(a.shared_cpus, 64);
    }

    #[test]
    fn blind_draws_are_seeded_and_vfs_packed() {
        let m = model("mi300x-8");
        let k = KubeletNode::new(&m);
        let s = NodeState::new(&m);
        let draw = |seed| {
            admitted(
                k.admit(KubeletPolicy::Blind, &m, &s, &pod(4), seed)
                    .unwrap(),
            )
            .0
        };
        assert_eq!(draw(5), draw(5));
        let distinct: std::collections::HashSet<Vec<usize>> =
            (0..20).map(|s| draw(s).gpus).collect();
        assert!(distinct.len() > 5);
        assert_eq!(draw(5).nics, vec![0, 1, 2, 3]);
    }

    #[test]
    fn usage_is_respected_and_pfs_offered_without_vfs() {
        let d = model("dgx-h100");
        let k = KubeletNode::new(&d);
        let mut s = NodeState::new(&d);
        for g in 0..d.gpus.len() - 1 {
            s.gpu_used[g] = true;
        }
        let (a, pairs) = admitted(k.admit(KubeletPolicy::Blind, &d, &s, &pod(1), 3).unwrap());
        assert_eq!(a.gpus, vec![d.gpus.len() - 1]);
        assert_eq!(a.nics, vec![0]);
        assert_eq!(pairs.len(), 1);
        s.gpu_used[0] = false;
        let p = k.pod(&pod(2)).unwrap();
        assert_eq!(p.containers[0].limit_value(PF_RESOURCE), 2);
    }
}
