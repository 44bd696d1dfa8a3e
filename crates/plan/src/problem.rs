//! The class-level problem the search solves ([`Problem`], built from [`Class`]es by the
//! planner) and the best answer it finds ([`Found`]).

use crate::types::CostKey;

/// One equivalence class restricted to the free devices that pass the filters.
#[derive(Debug, Clone)]
pub(crate) struct Class {
    /// Eligible free members, in address order.
    pub members: Vec<usize>,
    /// Group memberships shared by the members.
    pub groups: [Option<usize>; 3],
    /// NUMA index shared by the members.
    pub numa: Option<usize>,
}

/// Per-call inputs of the search.
#[derive(Debug, Clone)]
pub(crate) struct Problem {
    /// GPUs requested.
    pub gpus: usize,
    /// NICs requested in total.
    pub nics: usize,
    /// Maximum allowed pair rank (0 PIX … 4 SYS).
    pub max_rank: u32,
    /// Whether every chosen GPU pair must be NVLink/xGMI-linked.
    pub need_link: bool,
    /// GPU classes, ordered by their lowest member address.
    pub gclasses: Vec<Class>,
    /// NIC classes, ordered by their lowest member address.
    pub nclasses: Vec<Class>,
    /// (no-GDR 0/1, rank) per (GPU class, NIC class), `None` when over the bound.
    pub weight: Vec<Vec<Option<(u32, u32)>>>,
    /// Fabric link count between classes (diagonal: inside the class).
    pub link: Vec<Vec<Option<u32>>>,
    /// Devices already in use per group.
    pub group_used: Vec<u32>,
    /// Free devices per group that are never eligible (filtered out).
    pub group_never: Vec<u32>,
    /// Devices per group in all.
    pub group_size: Vec<u32>,
    /// Free CPUs per NUMA index.
    pub free_cpus: Vec<u64>,
    /// Free memory per NUMA index (zeros when memory is unchecked).
    pub free_mem: Vec<u64>,
    /// CPUs requested.
    pub need_cpus: u64,
    /// Memory requested; `None` when memory is unchecked.
    pub need_mem: Option<u64>,
}

/// The best plan found, in class terms.
#[derive(Debug, Clone)]
pub(crate) struct Found {
    /// Its cost key.
    pub key: CostKey,
    /// Chosen GPUs, sorted.
    pub gpu_set: Vec<usize>,
    /// Chosen NICs, sorted.
    pub nic_set: Vec<usize>,
    /// Count per GPU class.
    pub x: Vec<usize>,
    /// Count per NIC class.
    pub y: Vec<usize>,
    /// (GPU class, NIC class, NICs) flows.
    pub flows: Vec<(usize, usize, usize)>,
    /// NUMA mask spanned (devices plus CPU/memory nodes).
    pub span: u64,
}

/// The first `counts[k]` members of each class `k`, sorted: the devices a class-level
/// choice takes.
pub(crate) fn chosen_members(classes: &[Class], counts: &[usize]) -> Vec<usize> {
    let mut set = Vec::with_capacity(counts.iter().sum());
    for (cl, &count) in classes.iter().zip(counts) {
        set.extend_from_slice(&cl.members[..count]);
    }
    set.sort_unstable();
    set
}
