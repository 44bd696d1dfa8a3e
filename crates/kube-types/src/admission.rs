//! The kubelet's admission verdict on a pod, as the Topology Manager gives it: admitted or
//! rejected with the pod status reason (`TopologyAffinityError`,
//! `UnexpectedAdmissionError`) and message, the NUMA nodes the pod got, and the merged
//! hint. The simulation (`topoalign-tm`) produces it; the lint reads it through its
//! `TopologyManagerModel` port without depending on the simulation.

/// The reason of a pod the Topology Manager rejects for its NUMA placement.
pub const TOPOLOGY_AFFINITY_ERROR: &str = "TopologyAffinityError";
/// The reason of a pod the device manager cannot allocate after admission.
pub const UNEXPECTED_ADMISSION_ERROR: &str = "UnexpectedAdmissionError";

/// The merged hint of a Topology Manager merge.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MergedHint {
    /// The NUMA nodes of the hint, ascending; `None`: any (no affinity).
    pub numa_nodes: Option<Vec<u32>>,
    /// Whether the hint is preferred.
    pub preferred: bool,
}

/// The admission of one pod.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Admission {
    /// Whether the kubelet admits the pod.
    pub admitted: bool,
    /// The pod status reason when rejected ([`TOPOLOGY_AFFINITY_ERROR`], …).
    pub reason: Option<String>,
    /// The rejection message.
    pub message: Option<String>,
    /// NUMA nodes of everything allocated, ascending.
    pub numa_nodes_used: Vec<u32>,
    /// The best hint of the last merge (`None`: no merge ran).
    pub last_merge: Option<MergedHint>,
}
