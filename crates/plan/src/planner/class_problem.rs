//! Builds the class-level [`Problem`] of a request: eligible members per equivalence
//! class, pair weights, fabric links, fragmentation groups and free host capacity.

use topoalign_topology::PcieClass;

use crate::problem::{Class, Problem};
use crate::request::{GpuLinkBound, Request};

use super::{Planner, Taken};

impl Planner<'_> {
    /// The search problem of `req` against the resolved usage.
    pub(super) fn problem(&self, req: &Request, taken: &Taken) -> Problem {
        let m = &self.model;
        let gclass_of = |members: &[usize], groups: [Option<usize>; 3], numa| Class {
            members: members.to_vec(),
            groups,
            numa,
        };
        let mut gmap: Vec<(usize, Class)> = Vec::new();
        for (k, members) in m.gpu_classes.iter().enumerate() {
            let elig: Vec<usize> = members
                .iter()
                .copied()
                .filter(|&g| self.gpu_eligible(req, taken, g))
                .collect();
            if !elig.is_empty() {
                let g0 = elig[0];
                gmap.push((k, gclass_of(&elig, m.gpu_groups[g0], m.gpu_numa[g0])));
            }
        }
        gmap.sort_by_key(|(_, c)| c.members[0]);
        let mut nmap: Vec<(usize, Class)> = Vec::new();
        for (k, members) in m.nic_classes.iter().enumerate() {
            let elig: Vec<usize> = members
                .iter()
                .copied()
                .filter(|&n| self.nic_eligible(req, taken, n))
                .collect();
            if !elig.is_empty() {
                let n0 = elig[0];
                nmap.push((k, gclass_of(&elig, m.nic_groups[n0], m.nic_numa[n0])));
            }
        }
        nmap.sort_by_key(|(_, c)| c.members[0]);
        let max_rank = req.max_pair.map_or(PcieClass::Sys.rank(), PcieClass::rank);
        let weight = gmap
            .iter()
            .map(|(_, gc)| {
                nmap.iter()
                    .map(|(_, nc)| {
                        let p = m.path(gc.members[0], nc.members[0]);
                        let r = p.class.rank();
                        (r <= max_rank).then_some((u32::from(!p.gdr), r))
                    })
                    .collect()
            })
            .collect();
        let link = gmap
            .iter()
            .map(|(ka, ga)| {
                gmap.iter()
                    .map(|(kb, gb)| {
                        if ka == kb {
                            m.class_intra[*ka]
                        } else {
                            m.fabric(ga.members[0], gb.members[0])
                        }
                    })
                    .collect()
            })
            .collect();
        let groups = m.group_size.len();
        let mut group_used = vec![0u32; groups];
        let mut group_never = vec![0u32; groups];
        for g in 0..m.gpu_bdf.len() {
            for x in m.gpu_groups[g].iter().flatten() {
                if taken.gpus[g] {
                    group_used[*x] += 1;
                } else if !self.gpu_eligible(req, taken, g) {
                    group_never[*x] += 1;
                }
            }
        }
        for n in 0..m.nic_bdf.len() {
            for x in m.nic_groups[n].iter().flatten() {
                if taken.nics[n] {
                    group_used[*x] += 1;
                } else if !self.nic_eligible(req, taken, n) {
                    group_never[*x] += 1;
                }
            }
        }
        let free_mem = self.free_memory(taken);
        Problem {
            gpus: req.gpus,
            nics: req.total_nics(),
            max_rank,
            need_link: req.gpu_link == GpuLinkBound::Nvlink,
            gclasses: gmap.into_iter().map(|x| x.1).collect(),
            nclasses: nmap.into_iter().map(|x| x.1).collect(),
            weight,
            link,
            group_used,
            group_never,
            group_size: m.group_size.clone(),
            free_cpus: m
                .numa_cpus
                .iter()
                .map(|c| c.difference(&taken.cpus).len() as u64)
                .collect(),
            need_mem: req.memory.filter(|&b| b > 0 && free_mem.is_some()),
            free_mem: free_mem.unwrap_or_else(|| vec![0; m.numa_ids.len()]),
            need_cpus: req.cpus as u64,
        }
    }
}
