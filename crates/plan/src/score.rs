//! Scoring from first principles, independent of the planner's tables and search: the
//! device part of a score, which the extender reads too; the rest of a score and the
//! check of a whole plan are the test oracle's (`oracle`, feature `brute`).

use std::collections::BTreeSet;

use topoalign_topology::{Classifier, PairClass, Topology};

/// The device-only part of a score (everything but the NUMA nodes of CPUs and memory).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceScore {
    /// GPU↔NIC pairs.
    pub pairs: usize,
    /// Pairs with GPUDirect RDMA.
    pub gdr_pairs: usize,
    /// Worst pair class.
    pub worst_pair: Option<topoalign_topology::PcieClass>,
    /// Sum of pair ranks.
    pub rank_sum: u32,
    /// NUMA ids of the GPUs and NICs.
    pub device_nodes: BTreeSet<u32>,
    /// Sum of fabric link counts over GPU pairs.
    pub interconnect: u32,
    /// Partially used switches + NUMA nodes + islands after the allocation.
    pub fragmentation: u32,
}

/// Scores chosen GPUs and NICs (indices) and their pairs, with `used_*` marking what the
/// node had already handed out and `islands` from [`Topology::fabric_islands`].
pub fn device_score(
    topo: &Topology,
    cls: &Classifier<'_>,
    used_gpus: &[bool],
    used_nics: &[bool],
    islands: &[Vec<usize>],
    gpus: &[usize],
    pairs: &[(usize, usize)],
) -> DeviceScore {
    let mut gdr = 0;
    let mut worst = None;
    let mut rank_sum = 0;
    for &(g, n) in pairs {
        let p = cls.gpu_nic(g, n);
        gdr += usize::from(p.gdr);
        worst = worst.max(Some(p.class));
        rank_sum += p.class.rank();
    }
    let nics: Vec<usize> = pairs.iter().map(|p| p.1).collect();
    let mut device_nodes = BTreeSet::new();
    for &g in gpus {
        device_nodes.extend(cls.numa_of(topo.gpus[g].pci));
    }
    for &n in &nics {
        device_nodes.extend(cls.numa_of(topo.nics[n].pci));
    }
    let mut interconnect = 0;
    for (k, &a) in gpus.iter().enumerate() {
        for &b in &gpus[k + 1..] {
            if let PairClass::NvLink(c) | PairClass::Xgmi(c) = cls.gpu_gpu(a, b) {
                interconnect += c;
            }
        }
    }
    // Groups: (kind, id) -> (taken, total).
    let mut groups: std::collections::BTreeMap<(u8, usize), (u32, u32)> = Default::default();
    let mut count = |key: (u8, usize), taken: bool| {
        let e = groups.entry(key).or_insert((0, 0));
        e.1 += 1;
        e.0 += u32::from(taken);
    };
    // Every GPU and NIC counts in its switch and NUMA node; GPUs also in their island.
    let gpu_functions = used_gpus
        .iter()
        .enumerate()
        .take(topo.gpus.len())
        .map(|(g, &used)| (topo.gpus[g].pci, used || gpus.contains(&g), Some(g)));
    let nic_functions = used_nics
        .iter()
        .enumerate()
        .take(topo.nics.len())
        .map(|(n, &used)| (topo.nics[n].pci, used || nics.contains(&n), None));
    for (pci, t, gpu) in gpu_functions.chain(nic_functions) {
        if let Some(s) = topo.nearest_switch(pci) {
            count((0, s), t);
        }
        if let Some(nn) = cls.numa_of(pci) {
            count((1, nn as usize), t);
        }
        if let Some(g) = gpu
            && let Some(k) = islands.iter().position(|i| i.len() >= 2 && i.contains(&g))
        {
            count((2, k), t);
        }
    }
    let fragmentation = groups
        .values()
        .filter(|(t, total)| *t > 0 && t < total)
        .count() as u32;
    DeviceScore {
        pairs: pairs.len(),
        gdr_pairs: gdr,
        worst_pair: worst,
        rank_sum,
        device_nodes,
        interconnect,
        fragmentation,
    }
}
