//! The node labels and annotations topoalign's processes write and read: the agent writes
//! them (on Nodes and NodeResourceTopology objects), the extender reads them, `topoalign
//! extender nodes` and `topoalign explain` speak them. One place, so that writer and
//! reader cannot drift.

/// Node label: the built-in profile the node is (synthetic or declared nodes).
pub const PROFILE_LABEL: &str = "topoalign.dev/profile";
/// Node or NRT annotation: devices in use, as `NodeUsage` JSON
/// (`{"gpus": ["0000:11:00.0"], "nics": ["0000:0c:00.1"]}`).
pub const USED_ANNOTATION: &str = "topoalign.dev/used";
/// Node label: `topologyManagerPolicy` of the node's kubelet (declared nodes).
pub const POLICY_LABEL: &str = "topoalign.dev/topology-manager-policy";
/// Node label: `topologyManagerScope` of the node's kubelet (declared nodes).
pub const SCOPE_LABEL: &str = "topoalign.dev/topology-manager-scope";
/// Node label: `cpuManagerPolicy` of the node's kubelet (`static` or `none`, declared
/// nodes; NodeResourceTopology objects say it through their zones' `cpu` resources).
pub const CPU_POLICY_LABEL: &str = "topoalign.dev/cpu-manager-policy";
/// Node annotation: `reservedSystemCPUs` of the node's kubelet (cpulist, `0-1`) for the
/// static CPU manager (declared nodes; default: one CPU, the lowest id).
pub const RESERVED_CPUS_ANNOTATION: &str = "topoalign.dev/reserved-cpus";
/// Node or NRT annotation: `topologyManagerPolicyOptions` as `k=v,k=v`.
pub const POLICY_OPTIONS_ANNOTATION: &str = "topoalign.dev/topology-manager-policy-options";
/// NRT annotation: the node's topology as compact `Topology` JSON.
pub const TOPOLOGY_ANNOTATION: &str = "topoalign.dev/topology";
/// NRT annotation: pods (`namespace/name`, JSON list) the report accounts for.
pub const PODS_ANNOTATION: &str = "topoalign.dev/pods";
/// NRT annotation: when the agent last read the kubelet (RFC 3339).
pub const REPORTED_AT_ANNOTATION: &str = "topoalign.dev/reported-at";
/// NRT annotation: per PCIe switch, its GPUs and NICs (`switch: gpus | nics; …`).
pub const SWITCH_GROUPS_ANNOTATION: &str = "topoalign.dev/switch-groups";
/// NRT annotation: per free GPU, its best free NIC and their class (`gpu>nic:CLASS;…`).
pub const PAIRS_ANNOTATION: &str = "topoalign.dev/free-pairs";
/// Node label and NRT attribute: the best pair class a new pod can still get.
pub const BEST_PAIR_LABEL: &str = "topoalign.dev/best-pair-class";
/// Node label: the GPU fabric (`nvlink`, `xgmi`, `pcie`).
pub const FABRIC_LABEL: &str = "topoalign.dev/gpu-fabric";
/// NodeResourceTopology annotation: each physical NIC's rail (JSON: `rails`, `source`,
/// `nics` from PCI address to rail), from the agent's `--rails` source.
pub const RAILS_ANNOTATION: &str = "topoalign.dev/rails";
