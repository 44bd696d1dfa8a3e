//! Explanations: every compromise a plan makes, in words.

use topoalign_topology::{PairClass, PcieClass};

use crate::planner::{Planner, Taken};
use crate::problem::Found;
use crate::request::Request;
use crate::types::Plan;

/// Lists the plan's compromises: pairs below PIX (and whether a better NIC was free),
/// pairs without GPUDirect RDMA, GPUs left without a NIC, GPU pairs without a fabric
/// link, NUMA spread and CPUs away from the GPUs.
pub(crate) fn explain(
    planner: &Planner<'_>,
    req: &Request,
    taken: &Taken,
    plan: &Plan,
    f: &Found,
) -> Vec<String> {
    let m = planner.model();
    let mut out = Vec::new();
    for pair in &plan.pairs {
        let (Some(&g), Some(&n)) = (m.gpu_index.get(&pair.gpu), m.nic_index.get(&pair.nic)) else {
            continue;
        };
        if pair.class != PcieClass::Pix {
            let better: Vec<usize> = (0..m.nic_bdf.len())
                .filter(|&o| planner.nic_eligible(req, taken, o) && m.path(g, o).class < pair.class)
                .collect();
            if better.is_empty() {
                out.push(format!(
                    "no free NIC {} GPU {}; best available is {} via {}",
                    closer_phrase(pair.class),
                    pair.gpu,
                    pair.class,
                    m.nic_bdf[n]
                ));
            } else {
                let o = better[0];
                out.push(format!(
                    "GPU {} is paired with {} at {} although {} ({}) is free: it serves a better overall plan",
                    pair.gpu,
                    pair.nic,
                    pair.class,
                    m.nic_bdf[o],
                    m.path(g, o).class
                ));
            }
        }
        if !pair.gdr {
            out.push(format!(
                "GPU {} to NIC {} is {} (NCCL path {}): NCCL will not use GPUDirect RDMA on it",
                pair.gpu, pair.nic, pair.class, pair.nccl
            ));
        }
    }
    let total = req.total_nics();
    if total > 0 {
        for gpu in &plan.gpus {
            if !plan.pairs.iter().any(|p| p.gpu == *gpu) {
                out.push(format!(
                    "GPU {gpu} gets no NIC: {total} NIC(s) for {} GPUs",
                    plan.gpus.len()
                ));
            }
        }
    }
    for (a, &ga) in f.gpu_set.iter().enumerate() {
        for &gb in &f.gpu_set[a + 1..] {
            if let PairClass::Pcie(c) = m.gpu_pair[ga * m.gpu_bdf.len() + gb] {
                out.push(format!(
                    "GPUs {} and {} have no NVLink/xGMI link between them (PCIe {c})",
                    m.gpu_bdf[ga], m.gpu_bdf[gb]
                ));
            }
        }
    }
    if plan.numa_nodes.len() > 1 {
        let ids: Vec<String> = plan.numa_nodes.iter().map(ToString::to_string).collect();
        out.push(format!(
            "the plan spans NUMA nodes {} (SLIT distance sum {})",
            ids.join(","),
            plan.score.numa_distance
        ));
    }
    let gpu_nodes: Vec<u32> = f
        .gpu_set
        .iter()
        .filter_map(|&g| m.gpu_numa[g].map(|i| m.numa_ids[i]))
        .collect();
    for (i, cpus) in m.numa_cpus.iter().enumerate() {
        let here = plan.cpus.intersection(cpus);
        if !here.is_empty() && !gpu_nodes.contains(&m.numa_ids[i]) {
            out.push(format!(
                "{} CPU(s) ({here}) come from NUMA node {}, which holds none of the GPUs",
                here.len(),
                m.numa_ids[i]
            ));
        }
    }
    if req.memory.is_some_and(|b| b > 0) && planner.free_memory(taken).is_none() {
        out.push(
            "the topology reports no memory sizes: the memory request was not checked".to_string(),
        );
    }
    out
}

/// The words for "a NIC closer than `class`" in the no-better-NIC explanation.
fn closer_phrase(class: PcieClass) -> &'static str {
    match class {
        PcieClass::Pix => "is closer to",
        PcieClass::Pxb => "shares a switch with",
        PcieClass::Phb => "sits below the same switches as",
        PcieClass::Node => "shares a host bridge with",
        PcieClass::Sys => "is on the NUMA node of",
    }
}
