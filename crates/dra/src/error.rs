//! Typed errors of the DRA model.

use thiserror::Error;

/// Everything that can go wrong while turning a topology into DRA objects, building a
/// claim, or checking an allocation.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum DraError {
    /// A node name that cannot be used in a ResourceSlice (`spec.nodeName`, pool name).
    #[error("node name {name:?} is not a valid Kubernetes node name: {why}")]
    BadNodeName {
        /// The name given.
        name: String,
        /// What is wrong with it.
        why: String,
    },
    /// A claim or template name that is not a DNS subdomain.
    #[error("name {name:?} is not a valid object name: {why}")]
    BadObjectName {
        /// The name given.
        name: String,
        /// What is wrong with it.
        why: String,
    },
    /// A claim that the API or the allocator refuses (too many requests, devices, ...).
    #[error("impossible claim: {0}")]
    BadClaim(String),
    /// The topology has more devices than one pool can describe within the API limits.
    #[error("topology too large for one pool: {0}")]
    TooLarge(String),
    /// A ResourceSlice read from outside (file or cluster) that does not have the shape
    /// the API requires.
    #[error("ResourceSlice {slice}: {what}")]
    BadSlice {
        /// The slice's name (or its position when it has none).
        slice: String,
        /// What is wrong, and what was expected.
        what: String,
    },
    /// A `--pairs-per-gpu` value that is not `auto`, `all` or a positive number.
    #[error("pairs per GPU {0:?}: expected `auto`, `all` or a number of pairs per GPU (1 or more)")]
    BadPairsPerGpu(String),
    /// Two drivers' slices that do not say which NIC is near which GPU (no NUMA node
    /// published), so any pairing would be a guess.
    #[error(
        "node {node}: cannot tell which NICs are near which GPUs from the slices alone: {why}; give the node's topology with {}",
        crate::foreign::topology::TOPOLOGY_FLAGS
    )]
    Blind {
        /// The node.
        node: String,
        /// What is missing.
        why: String,
    },
    /// A MIG state that does not fit the node's topology.
    #[error(transparent)]
    Mig(#[from] crate::publish::MigJoinError),
    /// The planner could not answer (used by the mixed-driver claim writer).
    #[error("planner: {0}")]
    Plan(String),
    /// No node of the slices read has devices of both drivers of a ladder template.
    #[error(
        "no node has devices of both {gpu_driver} and {nic_driver} in the slices read (drivers seen: {seen})"
    )]
    NoLadderNode {
        /// The GPU driver.
        gpu_driver: String,
        /// The NIC driver.
        nic_driver: String,
        /// The drivers of the slices read (`none`).
        seen: String,
    },
    /// A node's ladder report failed.
    #[error("node {node}")]
    LadderNode {
        /// The node.
        node: String,
        /// Why.
        #[source]
        source: Box<DraError>,
    },
}

/// Why an allocation handed to the kubelet plugin cannot be prepared on this node. Each
/// variant names the device so that the gRPC error the plugin returns is actionable.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum AllocationError {
    /// The allocation names a pool other than this node's.
    #[error("device {device:?} is in pool {pool:?}, but this node's pool is {expected:?}")]
    ForeignPool {
        /// The device named.
        device: String,
        /// The pool the allocation names.
        pool: String,
        /// This node's pool.
        expected: String,
    },
    /// The allocation names a device this node does not publish.
    #[error("device {device:?} is not published by this node (pool {pool:?})")]
    UnknownDevice {
        /// The device named.
        device: String,
        /// This node's pool.
        pool: String,
    },
    /// A GPU is allocated twice: twice in this claim, or already held by another claim.
    #[error("GPU {gpu} (device {device:?}) is already {holder}")]
    GpuTaken {
        /// The device that asked for it.
        device: String,
        /// The GPU's PCI address.
        gpu: String,
        /// Who holds it ("used by device X of this claim", "held by claim U").
        holder: String,
    },
    /// A physical NIC has no free function left for this device.
    #[error(
        "NIC {nic} has no free function for device {device:?}: all {functions} functions are taken (by {holders})"
    )]
    NicExhausted {
        /// The device that asked for it.
        device: String,
        /// The physical NIC's PCI address.
        nic: String,
        /// How many functions it has.
        functions: usize,
        /// Who holds them ("claim U", "device X of this claim").
        holders: String,
    },
    /// The device itself is already prepared for another claim (a device is allocated
    /// at most once; an allocation written outside the scheduler can repeat it).
    #[error("device {device:?} is already prepared for claim {holder}")]
    DeviceTaken {
        /// The device.
        device: String,
        /// The claim UID holding it.
        holder: String,
    },
    /// The allocation result is malformed (empty device name, wrong driver, ...).
    #[error("allocation result {index}: {what}")]
    Malformed {
        /// Position in `status.allocation.devices.results`.
        index: usize,
        /// What is wrong.
        what: String,
    },
}
