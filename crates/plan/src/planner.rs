//! [`Planner`]: precompute once, then plan many requests against changing usage.

use topoalign_topology::{Bdf, CpuSet, PcieClass, Topology};

use crate::error::{Bound, PlanError};
use crate::explain;
use crate::model::Model;
use crate::request::{GpuLinkBound, Request, Usage};
use crate::search::{self, Class, Found, Problem};
use crate::types::{NodeMemory, Pairing, Plan, Score};

/// A reusable planner for one topology.
#[derive(Debug, Clone)]
pub struct Planner<'t> {
    topo: &'t Topology,
    model: Model,
}

/// Usage resolved to indices.
pub(crate) struct Taken {
    pub gpus: Vec<bool>,
    pub nics: Vec<bool>,
    pub cpus: CpuSet,
    pub mem: Vec<u64>,
}

impl<'t> Planner<'t> {
    /// Precomputes the class tables of a (valid) topology.
    pub fn new(topo: &'t Topology) -> Self {
        Planner {
            topo,
            model: Model::build(topo),
        }
    }

    /// The topology this planner plans on.
    pub fn topology(&self) -> &'t Topology {
        self.topo
    }

    /// Plans one request: the optimal choice under the crate's lexicographic order, or
    /// why there is none.
    pub fn plan(&self, req: &Request, usage: &Usage) -> Result<Plan, PlanError> {
        let taken = self.resolve(usage)?;
        self.check_request(req)?;
        self.check_counts(req, &taken)?;
        if let Some(found) = self.run(req, &taken) {
            return Ok(self.build(req, &taken, &found));
        }
        // Find the bound to blame and the best plan without it.
        let mut relaxed = req.clone();
        let mut tries: Vec<(Bound, Request)> = Vec::new();
        if req.max_pair.is_some() {
            relaxed.max_pair = None;
            tries.push((Bound::MaxPair, relaxed.clone()));
        }
        if req.gpu_link == GpuLinkBound::Nvlink {
            let mut r = req.clone();
            r.gpu_link = GpuLinkBound::Any;
            tries.push((Bound::GpuLink, r));
            if req.max_pair.is_some() {
                let mut both = relaxed.clone();
                both.gpu_link = GpuLinkBound::Any;
                tries.push((Bound::Combined, both));
            }
        }
        for (bound, r) in tries {
            if let Some(found) = self.run(&r, &taken) {
                let plan = self.build(&r, &taken, &found);
                let detail = match bound {
                    Bound::MaxPair => format!(
                        "no free GPU/NIC choice keeps every pair at {} or better",
                        req.max_pair.map_or("?", PcieClass::as_str)
                    ),
                    Bound::GpuLink => {
                        format!("no {} free GPUs are all joined by NVLink/xGMI", req.gpus)
                    }
                    _ => "max-pair and gpu-link cannot both be met".to_string(),
                };
                return Err(PlanError::Unsatisfiable {
                    bound,
                    detail,
                    relaxation: Some(Box::new(plan)),
                });
            }
        }
        Err(PlanError::Unsatisfiable {
            bound: Bound::Combined,
            detail: "no choice meets every bound".to_string(),
            relaxation: None,
        })
    }

    fn check_request(&self, req: &Request) -> Result<(), PlanError> {
        if req.gpus == 0 {
            return Err(PlanError::InvalidRequest(
                "gpus must be at least 1".to_string(),
            ));
        }
        if self.topo.numa.len() > 64 {
            return Err(PlanError::InvalidRequest(format!(
                "the topology has {} NUMA nodes; the planner handles at most 64",
                self.topo.numa.len()
            )));
        }
        Ok(())
    }

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

    pub(crate) fn gpu_eligible(&self, req: &Request, taken: &Taken, g: usize) -> bool {
        !taken.gpus[g]
            && req.gpu_passes(
                &self.model.gpu_vendor[g],
                self.model.gpu_model[g].as_deref(),
            )
    }

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

    fn check_counts(&self, req: &Request, taken: &Taken) -> Result<(), PlanError> {
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
        let free_cpus: usize = m
            .numa_cpus
            .iter()
            .map(|c| c.difference(&taken.cpus).len())
            .sum();
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

    fn problem(&self, req: &Request, taken: &Taken) -> Problem {
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

    fn run(&self, req: &Request, taken: &Taken) -> Option<(Problem, Found)> {
        let p = self.problem(req, taken);
        search::solve(&self.model, &p).map(|f| (p, f))
    }

    fn build(&self, req: &Request, taken: &Taken, (p, f): &(Problem, Found)) -> Plan {
        let m = &self.model;
        // Concrete NICs per NIC class (lowest addresses first), dealt to GPUs.
        let mut pools: Vec<std::collections::VecDeque<usize>> = p
            .nclasses
            .iter()
            .zip(&f.y)
            .map(|(c, &y)| c.members[..y].iter().copied().collect())
            .collect();
        let q = p.nics / p.gpus;
        let mut pairs: Vec<(usize, usize)> = Vec::new();
        for (i, cl) in p.gclasses.iter().enumerate() {
            let gpus = &cl.members[..f.x[i]];
            if gpus.is_empty() {
                continue;
            }
            let mut nics: Vec<usize> = Vec::new();
            for &(gi, nj, cnt) in &f.flows {
                if gi == i {
                    for _ in 0..cnt {
                        if let Some(n) = pools[nj].pop_front() {
                            nics.push(n);
                        }
                    }
                }
            }
            let extra = nics.len().saturating_sub(q * gpus.len());
            let mut it = nics.into_iter();
            for (k, &g) in gpus.iter().enumerate() {
                let want = q + usize::from(k < extra);
                for n in it.by_ref().take(want) {
                    pairs.push((g, n));
                }
            }
        }
        pairs.sort_unstable();
        let pairings: Vec<Pairing> = pairs
            .iter()
            .map(|&(g, n)| {
                let path = m.path(g, n);
                Pairing {
                    gpu: m.gpu_bdf[g],
                    nic: m.nic_bdf[n],
                    class: path.class,
                    nccl: path.nccl,
                    gdr: path.gdr,
                }
            })
            .collect();
        let (cpus, memory) = self.place_host(req, taken, f);
        let gpus: Vec<Bdf> = f.gpu_set.iter().map(|&g| m.gpu_bdf[g]).collect();
        let nics: Vec<Bdf> = f.nic_set.iter().map(|&n| m.nic_bdf[n]).collect();
        let numa_nodes: Vec<u32> = (0..m.numa_ids.len())
            .filter(|&i| f.span >> i & 1 == 1)
            .map(|i| m.numa_ids[i])
            .collect();
        let score = Score {
            pairs: pairings.len(),
            gdr_pairs: pairings.iter().filter(|x| x.gdr).count(),
            worst_pair: pairings.iter().map(|x| x.class).max(),
            pair_rank_sum: pairings.iter().map(|x| x.class.rank()).sum(),
            numa_span: numa_nodes.len(),
            numa_distance: f.key.distance,
            gpu_interconnect: (-f.key.neg_interconnect) as u32,
            fragmentation: f.key.fragmentation,
        };
        let mut plan = Plan {
            gpus,
            nics,
            cpus,
            memory,
            numa_nodes,
            pairs: pairings,
            score,
            explanations: Vec::new(),
        };
        plan.explanations = explain::explain(self, req, taken, &plan, f);
        plan
    }

    /// CPUs and memory: from the GPUs' nodes first, then the NICs', then the extra nodes.
    fn place_host(&self, req: &Request, taken: &Taken, f: &Found) -> (CpuSet, Vec<NodeMemory>) {
        let m = &self.model;
        let mut order: Vec<usize> = Vec::new();
        let push = |i: usize, order: &mut Vec<usize>| {
            if !order.contains(&i) {
                order.push(i);
            }
        };
        let mut gn: Vec<usize> = f.gpu_set.iter().filter_map(|&g| m.gpu_numa[g]).collect();
        gn.sort_unstable();
        for i in gn {
            push(i, &mut order);
        }
        let mut nn: Vec<usize> = f.nic_set.iter().filter_map(|&n| m.nic_numa[n]).collect();
        nn.sort_unstable();
        for i in nn {
            push(i, &mut order);
        }
        for i in 0..m.numa_ids.len() {
            if f.span >> i & 1 == 1 {
                push(i, &mut order);
            }
        }
        let mut ids = Vec::new();
        let mut left = req.cpus;
        for &i in &order {
            if left == 0 {
                break;
            }
            for &c in m.numa_cpus[i]
                .difference(&taken.cpus)
                .ids()
                .iter()
                .take(left)
            {
                ids.push(c);
            }
            left = req.cpus - ids.len();
        }
        let mut memory = Vec::new();
        if let (Some(mut need), Some(free)) =
            (req.memory.filter(|&b| b > 0), self.free_memory(taken))
        {
            for &i in &order {
                if need == 0 {
                    break;
                }
                let take = need.min(free[i]);
                if take > 0 {
                    memory.push(NodeMemory {
                        node: m.numa_ids[i],
                        bytes: take,
                    });
                    need -= take;
                }
            }
        }
        (CpuSet::from_ids(ids), memory)
    }

    pub(crate) fn model(&self) -> &Model {
        &self.model
    }
}

fn unknown(field: &'static str, b: &Bdf, reason: &str) -> PlanError {
    PlanError::UnknownDevice {
        field,
        entry: b.to_string(),
        reason: reason.to_string(),
    }
}
