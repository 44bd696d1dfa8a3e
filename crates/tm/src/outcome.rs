//! What a simulation reports: the decision, every merge with its providers' hints, the
//! devices and CPUs handed out, and the resulting GPU↔NIC paths.

use serde::Serialize;
use topoalign_topology::{Bdf, CpuSet, NcclPath, PcieClass};

use crate::hint::TopologyHint;
use crate::pod::QosClass;
use topoalign_kube_types::kubelet_settings::{Policy, PolicyOptions, Scope};

/// One provider's answer for one resource.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ResourceHints {
    /// The resource.
    pub resource: String,
    /// `None` = nil (no preference); `Some([])` = impossible.
    pub hints: Option<Vec<TopologyHint>>,
}

impl ResourceHints {
    /// The hints as the kubelet's logs would list them: `{0}T {1}T {0,1}F`, `nil (no
    /// preference)` or `[] (impossible)`.
    pub fn hints_text(&self) -> String {
        match &self.hints {
            None => "nil (no preference)".to_string(),
            Some(l) if l.is_empty() => "[] (impossible)".to_string(),
            Some(l) => l
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(" "),
        }
    }
}

/// One provider's answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ProviderRecord {
    /// `devicemanager`, `cpumanager` or `memorymanager`.
    pub provider: String,
    /// Per resource; empty = "no resources" (treated as `[{nil, true}]`).
    pub resources: Vec<ResourceHints>,
}

/// One Topology Manager merge: per container (container scope) or for the pod.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct MergeRecord {
    /// The container name, or `pod` in pod scope.
    pub target: String,
    /// Every provider's hints.
    pub providers: Vec<ProviderRecord>,
    /// The merged (best) hint.
    pub best: TopologyHint,
    /// Whether the policy admits it.
    pub admit: bool,
}

/// One allocated device.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AllocatedDevice {
    /// PCI address (the plugin's device ID).
    pub bdf: Bdf,
    /// Its NUMA node, when it has one.
    pub numa: Option<u32>,
    /// Its RDMA/netdev name, for NICs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
}

/// What one container received.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ContainerAllocation {
    /// The container.
    pub container: String,
    /// The affinity the managers were given (`None` = nil).
    pub affinity: Option<crate::bitmask::NumaMask>,
    /// Devices per resource.
    pub devices: Vec<(String, Vec<AllocatedDevice>)>,
    /// Exclusive CPUs (static CPU manager).
    pub cpus: CpuSet,
    /// Memory per NUMA node in bytes (static memory manager).
    pub memory: Vec<(u32, u64)>,
}

/// An allocated GPU and its best allocated NIC.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct GpuPair {
    /// The GPU.
    pub gpu: Bdf,
    /// Its NUMA node.
    pub gpu_numa: Option<u32>,
    /// The closest NIC the pod received, if any.
    pub nic: Option<Bdf>,
    /// That NIC's NUMA node.
    pub nic_numa: Option<u32>,
    /// nvidia-smi's class of the pair.
    pub class: Option<PcieClass>,
    /// NCCL's path type.
    pub nccl: Option<NcclPath>,
    /// Whether NCCL would use GPUDirect RDMA.
    pub gdr: bool,
}

/// The whole answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Outcome {
    /// The node (topology name).
    pub node: String,
    /// The policy.
    pub policy: Policy,
    /// The scope in effect (`none` policy has no scope).
    pub scope: Option<Scope>,
    /// The options.
    pub options: PolicyOptions,
    /// The pod's QoS class.
    pub qos: QosClass,
    /// Whether the pod was admitted.
    pub admitted: bool,
    /// `TopologyAffinityError` or `UnexpectedAdmissionError` when rejected.
    pub reason: Option<String>,
    /// The rejection message.
    pub message: Option<String>,
    /// The merges, in order.
    pub merges: Vec<MergeRecord>,
    /// What each container received (up to the rejection).
    pub allocations: Vec<ContainerAllocation>,
    /// NUMA nodes of everything allocated.
    pub numa_nodes_used: Vec<u32>,
    /// For each allocated GPU, its best allocated NIC.
    pub pairs: Vec<GpuPair>,
    /// Settings the kubelet accepts but ignores here, and similar notes.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
}
