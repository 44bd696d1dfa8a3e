//! Two quick answers the extender asks of one node state many times: whether some
//! choice meets a request (a greedy witness, before the exact search), and the
//! fragmentation a set of devices in use leaves (by the model's groups).

use topoalign_topology::{Bdf, PcieClass};

use crate::request::{GpuLinkBound, Request};

use super::{Planner, Reading};

/// NUMA nodes at most for which the search's host placement tries every subset of the
/// nodes the devices leave out (of 20 such nodes at most): up to this, enough free CPUs
/// and memory in all means some placement fits.
const HOST_SUBSETS_NODES: usize = 20;

impl Planner<'_> {
    /// Whether a greedy pass finds a choice that meets every bound of `req` on `taken`:
    /// the eligible GPUs in address order, each (joined by NVLink/xGMI to those already
    /// taken, when asked) with its ⌊M/N⌋ best free eligible NICs within the pair bound,
    /// then M mod N of them one NIC more; CPUs and memory anywhere (their totals are
    /// checked by `check_counts` first). `true` proves a plan exists; `false` proves
    /// nothing (the exact search decides).
    pub(super) fn witness(&self, req: &Request, taken: &Reading) -> bool {
        let m = &self.model;
        let host = req.cpus > 0 || req.memory.is_some_and(|b| b > 0);
        if req.gpus == 0 || (host && m.numa_ids.len() > HOST_SUBSETS_NODES) {
            return false;
        }
        let max_rank = req.max_pair.map_or(PcieClass::Sys.rank(), PcieClass::rank);
        let nics: Vec<usize> = (0..m.nics())
            .filter(|&n| self.nic_eligible(req, taken, n))
            .collect();
        let mut free = vec![true; nics.len()];
        let total = req.total_nics();
        let (q, extra) = (total / req.gpus, total % req.gpus);
        let mut chosen: Vec<usize> = Vec::with_capacity(req.gpus);
        // (rank, position in `nics`) of the free NICs within the bound of one GPU.
        let mut within: Vec<(u32, usize)> = Vec::with_capacity(nics.len());
        for g in 0..m.gpu_bdf.len() {
            if chosen.len() == req.gpus {
                break;
            }
            if !self.gpu_eligible(req, taken, g)
                || (req.gpu_link == GpuLinkBound::Nvlink
                    && chosen.iter().any(|&c| m.fabric(c, g).is_none()))
            {
                continue;
            }
            within.clear();
            within.extend(nics.iter().enumerate().filter_map(|(k, &n)| {
                let r = m.path(g, n).class.rank();
                (free[k] && r <= max_rank).then_some((r, k))
            }));
            if within.len() < q {
                continue;
            }
            within.sort_unstable();
            for &(_, k) in &within[..q] {
                free[k] = false;
            }
            chosen.push(g);
        }
        if chosen.len() < req.gpus {
            return false;
        }
        let mut more = extra;
        for &g in &chosen {
            if more == 0 {
                break;
            }
            let next = (nics.iter().enumerate())
                .find(|&(k, &n)| free[k] && m.path(g, n).class.rank() <= max_rank);
            if let Some((k, _)) = next {
                free[k] = false;
                more -= 1;
            }
        }
        more == 0
    }

    /// The fragmentation a node is left with when the devices `taken` reads as in use
    /// and those of `also` (addresses; ones the topology lacks are ignored) are in use:
    /// the groups (PCIe switches, NUMA nodes, NVLink/xGMI islands of two or more GPUs)
    /// some but not all of whose devices are in use. The same count as the
    /// `fragmentation` of [`crate::score::device_score`] for those devices, from the
    /// groups made once per topology.
    pub fn fragmentation(&self, taken: &Reading, also: &[Bdf]) -> u32 {
        let m = &self.model;
        let mut gpus_also = Vec::new();
        let mut nics_also = Vec::new();
        for b in also {
            if let Some(&g) = m.gpu_index.get(b) {
                gpus_also.push(g);
            } else if let Some(&n) = m.nic_index.get(b) {
                nics_also.push(n);
            }
        }
        // Counted on the stack for machines of up to 64 groups.
        let mut small = [0u32; 64];
        let mut large = Vec::new();
        let used: &mut [u32] = match small.get_mut(..m.group_size.len()) {
            Some(s) => s,
            None => {
                large.resize(m.group_size.len(), 0);
                &mut large
            }
        };
        let gpus = (taken.gpus.iter().enumerate())
            .filter(|&(g, &busy)| busy || gpus_also.contains(&g))
            .map(|(g, _)| &m.gpu_groups[g]);
        let nics = (taken.nics.iter().enumerate())
            .filter(|&(n, &busy)| busy || nics_also.contains(&n))
            .map(|(n, _)| &m.nic_groups[n]);
        for groups in gpus.chain(nics) {
            for &x in groups.iter().flatten() {
                used[x] += 1;
            }
        }
        (used.iter().zip(&m.group_size))
            .filter(|&(&u, &size)| u > 0 && u < size)
            .count() as u32
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use topoalign_rng::Rng;
    use topoalign_topology::{Bdf, PcieClass, Topology};

    use crate::request::{GpuLinkBound, NicCount, Request, Usage};
    use crate::{PlanError, Planner};

    /// Over every profile, random usages and requests: a witness is never found where
    /// the full planner finds no plan, and both a witness and the exact search's fallback
    /// (no witness, a plan all the same) occur, so the test can fail both ways.
    #[test]
    fn a_witness_always_has_a_plan_and_misses_some() {
        let (mut witnessed, mut fallback, mut none) = (0, 0, 0);
        let mut rng = Rng::new(24);
        for name in topoalign_profiles::NAMES {
            let topo = topoalign_profiles::get(name).unwrap();
            let planner = Planner::new(&topo);
            for _ in 0..400 {
                // Devices in use: a random share of each kind, drawn as one shuffle.
                let busy = rng.below(8);
                let mut usage = Usage::empty();
                for (list, n, bdf) in [
                    (
                        &mut usage.gpus,
                        topo.gpus.len(),
                        Topology::gpu_bdf as fn(&Topology, usize) -> Bdf,
                    ),
                    (&mut usage.nics, topo.nics.len(), Topology::nic_bdf),
                ] {
                    let mut all: Vec<usize> = (0..n).collect();
                    rng.shuffle(&mut all);
                    list.extend(all[..n * busy / 8].iter().map(|&i| bdf(&topo, i)));
                }
                let gpus = 1 + rng.below_u64(topo.gpus.len().max(1) as u64) as usize;
                let nics = match rng.below_u64(3) {
                    0 => NicCount::PerGpu(1 + rng.below_u64(2) as usize),
                    _ => NicCount::Total(rng.below_u64(topo.nics.len() as u64 + 1) as usize),
                };
                let mut req = Request::new(gpus, nics);
                if rng.below_u64(2) == 0 {
                    req.max_pair = Some(PcieClass::ALL[rng.below_u64(5) as usize]);
                }
                if rng.below_u64(3) == 0 {
                    req.gpu_link = GpuLinkBound::Nvlink;
                }
                req.cpus = [0, 0, 4, 64][rng.below_u64(4) as usize];
                let reading = planner.reading(&usage).unwrap();
                let counts = planner.check_counts(&req, &reading).is_ok();
                let plan = planner.plan(&req, &usage);
                match (counts && planner.witness(&req, &reading), &plan) {
                    (true, Ok(_)) => witnessed += 1,
                    (true, Err(e)) => panic!("{name}: a witness for {req:?} on {usage:?}: {e}"),
                    (false, Ok(_)) => fallback += 1,
                    (false, Err(PlanError::Unsatisfiable { .. })) => none += 1,
                    (false, Err(e)) => panic!("{name}: {e}"),
                }
            }
        }
        assert!(
            witnessed > 300 && fallback > 3 && none > 300,
            "witnessed {witnessed}, fallback {fallback}, none {none}"
        );
    }
}
