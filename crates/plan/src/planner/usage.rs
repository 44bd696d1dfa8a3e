//! Current usage resolved to device and NUMA indices, and the per-device eligibility and
//! free-memory facts derived from it.

use topoalign_topology::{Bdf, CpuSet};

use crate::error::PlanError;
use crate::request::{Request, Usage};

use super::Planner;

/// Usage resolved to indices.
pub(crate) struct Taken {
    /// Whether each GPU is in use.
    pub gpus: Vec<bool>,
    /// Whether each NIC is in use.
    pub nics: Vec<bool>,
    /// CPUs in use.
    pub cpus: CpuSet,
    /// Memory in use per NUMA index, in bytes.
    pub mem: Vec<u64>,
}

impl Planner<'_> {
    /// Resolves usage by address and NUMA id; unknown entries are errors.
    pub(crate) fn resolve(&self, usage: &Usage) -> Result<Taken, PlanError> {
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
        Ok(Taken {
            gpus,
            nics,
            cpus: usage.cpus.clone(),
            mem,
        })
    }

    /// Whether GPU `g` is free and passes the request's GPU filters.
    pub(crate) fn gpu_eligible(&self, req: &Request, taken: &Taken, g: usize) -> bool {
        !taken.gpus[g]
            && req.gpu_passes(
                &self.model.gpu_vendor[g],
                self.model.gpu_model[g].as_deref(),
            )
    }

    /// Whether NIC `n` is free and passes the request's NIC filters.
    pub(crate) fn nic_eligible(&self, req: &Request, taken: &Taken, n: usize) -> bool {
        !taken.nics[n] && req.nic_passes(&self.topo.nics[n])
    }

    /// Memory capacity per node, or `None` when no node reports its memory.
    pub(crate) fn free_memory(&self, taken: &Taken) -> Option<Vec<u64>> {
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
