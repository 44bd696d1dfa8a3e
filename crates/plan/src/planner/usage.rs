//! Current usage resolved to device and NUMA indices, and the per-device eligibility and
//! free-memory facts derived from it.

use topoalign_topology::{Bdf, CpuSet};

use crate::error::PlanError;
use crate::request::{Request, Usage};

use super::Planner;

/// The part of a node's usage a plan's devices, score and feasibility depend on: which
/// GPUs and NICs are in use, how many CPUs each NUMA node has free and the memory in use
/// per NUMA node (which CPUs are free only matters to the plan's CPU list). Usages that
/// read alike get the same [`Planner::score`]; it is a key to share it by.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Reading {
    /// Whether each GPU is in use.
    pub(crate) gpus: Vec<bool>,
    /// Whether each NIC is in use.
    pub(crate) nics: Vec<bool>,
    /// Free CPUs per NUMA index.
    pub(crate) free_cpus: Vec<u64>,
    /// Memory in use per NUMA index, in bytes.
    pub(crate) mem: Vec<u64>,
}

/// Usage resolved to indices: its [`Reading`] and the CPUs in use.
pub(crate) struct Taken {
    /// What the search reads.
    pub reading: Reading,
    /// CPUs in use.
    pub cpus: CpuSet,
}

impl std::ops::Deref for Taken {
    type Target = Reading;

    fn deref(&self) -> &Reading {
        &self.reading
    }
}

impl Planner<'_> {
    /// Resolves usage by address and NUMA id; unknown entries are errors.
    pub(crate) fn resolve(&self, usage: &Usage) -> Result<Taken, PlanError> {
        Ok(Taken {
            reading: self.reading(usage)?,
            cpus: usage.cpus.clone(),
        })
    }

    /// The part of `usage` plans depend on but their CPU list (see [`Reading`]);
    /// an entry naming no device or NUMA node of the topology is an error.
    pub fn reading(&self, usage: &Usage) -> Result<Reading, PlanError> {
        let m = &self.model;
        let mut gpus = vec![false; m.gpu_bdf.len()];
        for b in &usage.gpus {
            let i = m
                .gpu_index
                .get(b)
                .ok_or_else(|| unknown("gpus", b, "no GPU has this address"))?;
            gpus[*i] = true;
        }
        let mut nics = vec![false; m.nic_bdf.len()];
        for b in &usage.nics {
            let i = m
                .nic_index
                .get(b)
                .ok_or_else(|| unknown("nics", b, "no NIC has this address"))?;
            nics[*i] = true;
        }
        let mut mem = vec![0u64; m.numa_ids.len()];
        for (node, bytes) in &usage.memory {
            let i = m.numa_ids.iter().position(|x| x == node).ok_or_else(|| {
                PlanError::UnknownDevice {
                    field: "memory",
                    entry: node.to_string(),
                    reason: "no NUMA node has this id".to_string(),
                }
            })?;
            mem[i] = *bytes;
        }
        // Free = the node's CPUs less those of them in use (the usage's few CPUs looked
        // up in the node's, not every CPU of the node in the usage's).
        let free_cpus = m
            .numa_cpus
            .iter()
            .map(|c| {
                let busy = usage.cpus.ids().iter().filter(|&&x| c.contains(x)).count();
                (c.len() - busy) as u64
            })
            .collect();
        Ok(Reading {
            gpus,
            nics,
            free_cpus,
            mem,
        })
    }

    /// Whether GPU `g` is free and passes the request's GPU filters.
    pub(crate) fn gpu_eligible(&self, req: &Request, taken: &Reading, g: usize) -> bool {
        !taken.gpus[g]
            && req.gpu_passes(
                &self.model.gpu_vendor[g],
                self.model.gpu_model[g].as_deref(),
            )
    }

    /// Whether NIC `n` is free and passes the request's NIC filters.
    pub(crate) fn nic_eligible(&self, req: &Request, taken: &Reading, n: usize) -> bool {
        !taken.nics[n] && req.nic_passes(&self.topo.nics[n])
    }

    /// Memory capacity per node, or `None` when no node reports its memory.
    pub(crate) fn free_memory(&self, taken: &Reading) -> Option<Vec<u64>> {
        let m = &self.model;
        if m.numa_mem.iter().all(Option::is_none) {
            return None;
        }
        Some(
            (0..m.numa_ids.len())
                .map(|i| m.numa_mem[i].unwrap_or(0).saturating_sub(taken.mem[i]))
                .collect(),
        )
    }
}

/// The error for a usage entry naming no device of the topology.
fn unknown(field: &'static str, b: &Bdf, reason: &str) -> PlanError {
    PlanError::UnknownDevice {
        field,
        entry: b.to_string(),
        reason: reason.to_string(),
    }
}
