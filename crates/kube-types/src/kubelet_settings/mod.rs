//! The KubeletConfiguration's topology settings as the kubelet reads them: the field
//! names ([`keys`](crate::kubelet_settings::keys)), the Topology Manager's policy, scope and options, the CPU and memory
//! manager policies, and [`Settings`](crate::kubelet_settings::Settings), all of them decoded from a file with the kubelet's
//! defaults. The Topology Manager simulation (`topoalign-tm`) runs on these; the
//! KubeletConfiguration editor (`topoalign-kubelet`), the lint and the node agent read and
//! write them without it.

mod error;
mod policy;
mod settings;

pub use error::ConfigError;
pub use policy::{
    DEFAULT_MAX_ALLOWABLE_NUMA_NODES, MAX_ALLOWABLE_NUMA_NODES, PREFER_CLOSEST_NUMA_NODES, Policy,
    PolicyOptions, Scope, parse_go_bool, parse_go_int, parse_option_arg,
};
pub use settings::{CpuPolicy, MemoryPolicy, Settings};

/// Top-level KubeletConfiguration field names.
pub mod keys {
    /// `topologyManagerPolicy`.
    pub const TM_POLICY: &str = "topologyManagerPolicy";
    /// `topologyManagerScope`.
    pub const TM_SCOPE: &str = "topologyManagerScope";
    /// `topologyManagerPolicyOptions`.
    pub const TM_OPTIONS: &str = "topologyManagerPolicyOptions";
    /// `cpuManagerPolicy`.
    pub const CPU_POLICY: &str = "cpuManagerPolicy";
    /// `memoryManagerPolicy`.
    pub const MEMORY_POLICY: &str = "memoryManagerPolicy";
    /// `reservedSystemCPUs`.
    pub const RESERVED_CPUS: &str = "reservedSystemCPUs";
    /// `kubeReserved`.
    pub const KUBE_RESERVED: &str = "kubeReserved";
    /// `systemReserved`.
    pub const SYSTEM_RESERVED: &str = "systemReserved";
    /// `featureGates`.
    pub const FEATURE_GATES: &str = "featureGates";
}
