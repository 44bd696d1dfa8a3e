//! Up-front checks of a request: well-formed, and enough free GPUs, NICs, CPUs and
//! memory in all (each shortfall named with its counts).

use crate::error::{Bound, PlanError};
use crate::request::Request;

use super::{Planner, Reading};

impl Planner<'_> {
    /// Rejects requests the planner cannot take: no GPUs, or more than 64 NUMA nodes.
    pub(super) fn check_request(&self, req: &Request) -> Result<(), PlanError> {
        if req.gpus == 0 {
            return Err(PlanError::InvalidRequest(
                "gpus must be at least 1".to_string(),
            ));
        }
        if req.gpu_link == crate::request::GpuLinkBound::Nvlink
            && req.gpus > 1
            && self.topo.fabric_status() == topoalign_topology::FabricStatus::Unknown
        {
            return Err(PlanError::FabricUnknown { gpus: req.gpus });
        }
        if self.topo.numa.len() > 64 {
            return Err(PlanError::InvalidRequest(format!(
                "the topology has {} NUMA nodes; the planner handles at most 64",
                self.topo.numa.len()
            )));
        }
        Ok(())
    }

    /// Rejects requests that the node's free, eligible devices, CPUs or memory cannot
    /// meet in total, before any search.
    pub(super) fn check_counts(&self, req: &Request, taken: &Reading) -> Result<(), PlanError> {
        let m = &self.model;
        let free_g = (0..m.gpu_bdf.len()).filter(|&g| !taken.gpus[g]).count();
        let elig_g = (0..m.gpu_bdf.len())
            .filter(|&g| self.gpu_eligible(req, taken, g))
            .count();
        if elig_g < req.gpus {
            return Err(PlanError::Unsatisfiable {
                bound: Bound::Gpus,
                detail: format!(
                    "need {} GPUs; the node has {}, {} free, {} of them pass the filters",
                    req.gpus,
                    m.gpu_bdf.len(),
                    free_g,
                    elig_g
                ),
                relaxation: None,
            });
        }
        let want_n = req.total_nics();
        let free_n = (0..m.nic_bdf.len()).filter(|&n| !taken.nics[n]).count();
        let elig_n = (0..m.nic_bdf.len())
            .filter(|&n| self.nic_eligible(req, taken, n))
            .count();
        if elig_n < want_n {
            return Err(PlanError::Unsatisfiable {
                bound: Bound::Nics,
                detail: format!(
                    "need {} NICs; the node has {}, {} free, {} of them pass the filters",
                    want_n,
                    m.nic_bdf.len(),
                    free_n,
                    elig_n
                ),
                relaxation: None,
            });
        }
        let free_cpus: usize = taken.free_cpus.iter().map(|&c| c as usize).sum();
        if free_cpus < req.cpus {
            return Err(PlanError::Unsatisfiable {
                bound: Bound::Cpus,
                detail: format!("need {} CPUs; {} are free", req.cpus, free_cpus),
                relaxation: None,
            });
        }
        if let (Some(need), Some(free)) = (req.memory.filter(|&b| b > 0), self.free_memory(taken)) {
            let total: u64 = free.iter().fold(0, |a, b| a.saturating_add(*b));
            if total < need {
                return Err(PlanError::Unsatisfiable {
                    bound: Bound::Memory,
                    detail: format!("need {need} bytes of memory; {total} are free"),
                    relaxation: None,
                });
            }
        }
        Ok(())
    }
}
