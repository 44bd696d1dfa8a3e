//! Builds the class-level [`Problem`] of a request: eligible members per equivalence
//! class, pair weights, fabric links, fragmentation groups and free host capacity.

use topoalign_topology::PcieClass;

use crate::model::Groups;
use crate::problem::{Class, Problem};
use crate::request::{GpuLinkBound, Request};

use super::{Planner, Reading};

impl Planner<'_> {
    /// The search problem of `req` against the resolved usage.
    pub(super) fn problem(&self, req: &Request, taken: &Reading) -> Problem {
        let m = &self.model;
        let gmap = eligible_classes(&m.gpu_classes, &m.gpu_groups, &m.gpu_numa, |g| {
            self.gpu_eligible(req, taken, g)
        });
        let nmap = eligible_classes(&m.nic_classes, &m.nic_groups, &m.nic_numa, |n| {
            self.nic_eligible(req, taken, n)
        });
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
        count_groups(
            &m.gpu_groups,
            &taken.gpus,
            |g| self.gpu_eligible(req, taken, g),
            &mut group_used,
            &mut group_never,
        );
        count_groups(
            &m.nic_groups,
            &taken.nics,
            |n| self.nic_eligible(req, taken, n),
            &mut group_used,
            &mut group_never,
        );
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
            free_cpus: taken.free_cpus.clone(),
            need_mem: req.memory.filter(|&b| b > 0 && free_mem.is_some()),
            free_mem: free_mem.unwrap_or_else(|| vec![0; m.numa_ids.len()]),
            need_cpus: req.cpus as u64,
        }
    }
}

/// Restricts each equivalence class (paired with its index) to its `eligible` members,
/// sharing the groups and NUMA index of its first one; classes left empty are dropped and
/// the rest ordered by their lowest member.
fn eligible_classes(
    classes: &[Vec<usize>],
    groups: &[Groups],
    numa: &[Option<usize>],
    eligible: impl Fn(usize) -> bool,
) -> Vec<(usize, Class)> {
    let mut out: Vec<(usize, Class)> = Vec::new();
    for (k, members) in classes.iter().enumerate() {
        let elig: Vec<usize> = members.iter().copied().filter(|&d| eligible(d)).collect();
        if !elig.is_empty() {
            let d0 = elig[0];
            out.push((
                k,
                Class {
                    groups: groups[d0],
                    numa: numa[d0],
                    members: elig,
                },
            ));
        }
    }
    out.sort_by_key(|(_, c)| c.members[0]);
    out
}

/// Adds every device to its groups' counts: to `used` when it is in use, to `never` when
/// it is free but not `eligible`.
fn count_groups(
    groups: &[Groups],
    in_use: &[bool],
    eligible: impl Fn(usize) -> bool,
    used: &mut [u32],
    never: &mut [u32],
) {
    for (d, &busy) in in_use.iter().enumerate() {
        for x in groups[d].iter().flatten() {
            if busy {
                used[*x] += 1;
            } else if !eligible(d) {
                never[*x] += 1;
            }
        }
    }
}
