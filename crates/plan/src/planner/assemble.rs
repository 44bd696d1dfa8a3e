//! Turns the search's class-level answer into a concrete [`Plan`]: NICs dealt to GPUs,
//! addresses, NUMA nodes, the score and the explanations.

use topoalign_topology::{Bdf, PcieClass};

use crate::problem::{Found, Problem};
use crate::request::Request;
use crate::types::{Pairing, Plan, Score};

use super::{Planner, Taken, explain};

impl Planner<'_> {
    /// The concrete plan of a class-level answer.
    pub(super) fn build(&self, req: &Request, taken: &Taken, (p, f): &(Problem, Found)) -> Plan {
        let m = &self.model;
        let pairs = deal(p, f);
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
        let score = score(
            pairings.iter().map(|x| (x.class, x.gdr)),
            numa_nodes.len(),
            f,
        );
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

    /// The score of the plan [`Planner::build`] makes of a class-level answer, without
    /// making it.
    pub(super) fn score_of(&self, (p, f): &(Problem, Found)) -> Score {
        let m = &self.model;
        let pairs = deal(p, f);
        let span = (0..m.numa_ids.len())
            .filter(|&i| f.span >> i & 1 == 1)
            .count();
        score(
            pairs.iter().map(|&(g, n)| {
                let path = m.path(g, n);
                (path.class, path.gdr)
            }),
            span,
            f,
        )
    }
}

/// The concrete (GPU, NIC) pairs of a class-level answer, sorted: the NICs of each NIC
/// class (lowest addresses first) dealt to the GPUs as the flows say.
fn deal(p: &Problem, f: &Found) -> Vec<(usize, usize)> {
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
    pairs
}

/// A plan's score from its pairs' (class, GPUDirect RDMA) and its NUMA span.
fn score(pairs: impl Iterator<Item = (PcieClass, bool)>, numa_span: usize, f: &Found) -> Score {
    let mut s = Score {
        pairs: 0,
        gdr_pairs: 0,
        worst_pair: None,
        pair_rank_sum: 0,
        numa_span,
        numa_distance: f.key.distance,
        gpu_interconnect: (-f.key.neg_interconnect) as u32,
        fragmentation: f.key.fragmentation,
    };
    for (class, gdr) in pairs {
        s.pairs += 1;
        s.gdr_pairs += usize::from(gdr);
        s.worst_pair = s.worst_pair.max(Some(class));
        s.pair_rank_sum += class.rank();
    }
    s
}
