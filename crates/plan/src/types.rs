//! The planner's answer: devices, pairing, score and explanations.

use serde::Serialize;
use topoalign_topology::{Bdf, CpuSet, NcclPath, PcieClass};

/// One GPU↔NIC pair of a plan.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Pairing {
    /// The GPU.
    pub gpu: Bdf,
    /// The NIC assigned to it.
    pub nic: Bdf,
    /// nvidia-smi's class of the pair.
    pub class: PcieClass,
    /// NCCL's path type.
    pub nccl: NcclPath,
    /// Whether NCCL would use GPUDirect RDMA.
    pub gdr: bool,
}

/// Memory taken from one NUMA node.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeMemory {
    /// NUMA node id.
    pub node: u32,
    /// Bytes taken from it.
    pub bytes: u64,
}

/// The score of a plan, one field per optimality criterion (see the crate docs).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Score {
    /// Number of GPU↔NIC pairs.
    pub pairs: usize,
    /// (2) Pairs with GPUDirect RDMA (maximised).
    pub gdr_pairs: usize,
    /// (3) The worst pair class (minimised; `None` without NICs).
    pub worst_pair: Option<PcieClass>,
    /// (3) Sum of pair class ranks, PIX 0 … SYS 4 (minimised).
    pub pair_rank_sum: u32,
    /// (4) NUMA nodes spanned by the GPUs, NICs, CPUs and memory (minimised).
    pub numa_span: usize,
    /// (4) Sum of SLIT distances over unordered pairs of spanned nodes (minimised).
    pub numa_distance: u32,
    /// (5) Sum over chosen GPU pairs of NVLink / xGMI link counts (maximised).
    pub gpu_interconnect: u32,
    /// (6) Partially used switches + NUMA nodes + NVLink/xGMI islands after the
    /// allocation (minimised).
    pub fragmentation: u32,
}

impl Score {
    /// The numeric part of the lexicographic cost: smaller is better.
    pub fn key(&self) -> CostKey {
        CostKey {
            no_gdr: (self.pairs - self.gdr_pairs.min(self.pairs)) as u32,
            worst: self.worst_pair.map_or(0, |c| c.rank() + 1),
            rank_sum: self.pair_rank_sum,
            span: self.numa_span as u32,
            distance: self.numa_distance,
            neg_interconnect: -i64::from(self.gpu_interconnect),
            fragmentation: self.fragmentation,
        }
    }
}

/// The lexicographic cost of a plan before the address tie-break; derived `Ord` compares
/// the fields in declaration order, which is the optimality order of the crate docs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default, Hash)]
pub struct CostKey {
    /// Pairs without GPUDirect RDMA.
    pub no_gdr: u32,
    /// Worst pair class rank + 1 (0 without pairs).
    pub worst: u32,
    /// Sum of pair class ranks.
    pub rank_sum: u32,
    /// NUMA nodes spanned.
    pub span: u32,
    /// SLIT distance sum of the spanned nodes.
    pub distance: u32,
    /// Minus the GPU interconnect.
    pub neg_interconnect: i64,
    /// Fragmentation.
    pub fragmentation: u32,
}

/// A placement for one pod.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Plan {
    /// Chosen GPUs, by address.
    pub gpus: Vec<Bdf>,
    /// Chosen NICs, by address.
    pub nics: Vec<Bdf>,
    /// Exclusive CPUs, taken from the chosen GPUs' NUMA nodes first.
    pub cpus: CpuSet,
    /// Memory per NUMA node (empty when none was asked).
    pub memory: Vec<NodeMemory>,
    /// NUMA nodes spanned by GPUs, NICs, CPUs and memory.
    pub numa_nodes: Vec<u32>,
    /// Each NIC with the GPU it serves, ordered by GPU then NIC.
    pub pairs: Vec<Pairing>,
    /// The score, criterion by criterion.
    pub score: Score,
    /// Every compromise the plan makes, in words.
    pub explanations: Vec<String>,
}
