//! Why the kubelet would refuse a setting (or ignore it).

use thiserror::Error;

/// A kubelet setting that the kubelet would refuse (or that has no effect).
#[derive(Debug, Clone, Error, PartialEq, Eq)]
pub enum ConfigError {
    /// `topologyManagerPolicy` is not one of the four.
    #[error(
        "topologyManagerPolicy: unknown policy `{0}` (expected none, best-effort, restricted or single-numa-node)"
    )]
    UnknownPolicy(String),
    /// `topologyManagerScope` is not container or pod.
    #[error("topologyManagerScope: unknown scope `{0}` (expected container or pod)")]
    UnknownScope(String),
    /// An unknown `topologyManagerPolicyOptions` key.
    #[error(
        "topologyManagerPolicyOptions: unknown Topology Manager Policy option `{0}` (expected prefer-closest-numa-nodes or max-allowable-numa-nodes)"
    )]
    UnknownOption(String),
    /// An option value of the wrong type.
    #[error("topologyManagerPolicyOptions.{option}: bad value `{value}`, expected {expected}")]
    BadOptionValue {
        /// The option.
        option: String,
        /// The value given.
        value: String,
        /// What was expected.
        expected: &'static str,
    },
    /// `max-allowable-numa-nodes` below the default.
    #[error(
        "topologyManagerPolicyOptions.max-allowable-numa-nodes: {0} is below 8, the smallest value the kubelet accepts"
    )]
    MaxAllowableTooLow(i64),
    /// A `NAME=VALUE` option argument without `=` or without a name.
    #[error("`{0}` is not NAME=VALUE (e.g. prefer-closest-numa-nodes=true)")]
    BadOptionArg(String),
    /// More NUMA nodes than `max-allowable-numa-nodes`: the kubelet fails to start.
    #[error(
        "the Topology Manager is unsupported on machines with more than {max} NUMA nodes (this one has {nodes}); the kubelet would fail to start (raise max-allowable-numa-nodes or use policy none)"
    )]
    TooManyNumaNodes {
        /// Nodes on the machine.
        nodes: usize,
        /// The limit.
        max: usize,
    },
    /// `cpuManagerPolicy` unknown.
    #[error(
        "cpuManagerPolicy: unknown policy `{0}` (expected none or static; the kubelet matches it exactly)"
    )]
    UnknownCpuPolicy(String),
    /// `memoryManagerPolicy` unknown.
    #[error(
        "memoryManagerPolicy: unknown policy `{0}` (expected None or Static; the kubelet matches it exactly)"
    )]
    UnknownMemoryPolicy(String),
    /// Static CPU manager without reserved CPUs.
    #[error(
        "cpuManagerPolicy static needs reserved CPUs: set reservedSystemCPUs or a non-zero kubeReserved/systemReserved cpu"
    )]
    StaticCpuWithoutReserved,
    /// Static memory manager without reservedMemory.
    #[error(
        "memoryManagerPolicy Static needs reservedMemory (a list of {{numaNode, limits: {{memory}}}})"
    )]
    StaticMemoryWithoutReserved,
    /// A malformed field.
    #[error("{field}: {reason}")]
    Field {
        /// The field path.
        field: String,
        /// What is wrong.
        reason: String,
    },
}
