//! An obviously-correct brute force: every GPU subset × every NIC subset × every
//! assignment of NICs to GPUs × every set of NUMA nodes for CPUs and memory. Exponential;
//! for property tests and benchmark ratios on small nodes only.

use std::collections::BTreeSet;

use topoalign_topology::{Bdf, Topology};

use crate::oracle::{full_score, spread_ok};
use crate::request::{GpuLinkBound, Request, Usage};
use crate::score::device_score;
use crate::types::{CostKey, Score};

/// The optimum found by brute force: its score, cost key and address lists.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BruteBest {
    /// The score.
    pub score: Score,
    /// Its lexicographic key.
    pub key: CostKey,
    /// Sorted GPU addresses.
    pub gpus: Vec<Bdf>,
    /// Sorted NIC addresses.
    pub nics: Vec<Bdf>,
}

fn subsets(items: &[usize], k: usize) -> Vec<Vec<usize>> {
    let mut out = Vec::new();
    let mut cur = Vec::new();
    fn rec(
        items: &[usize],
        k: usize,
        start: usize,
        cur: &mut Vec<usize>,
        out: &mut Vec<Vec<usize>>,
    ) {
        if cur.len() == k {
            out.push(cur.clone());
            return;
        }
        for i in start..items.len() {
            cur.push(items[i]);
            rec(items, k, i + 1, cur, out);
            cur.pop();
        }
    }
    rec(items, k, 0, &mut cur, &mut out);
    out
}

/// Finds the optimum by enumeration; `None` when nothing meets the bounds. Unknown
/// addresses in `usage` are ignored.
pub fn brute_force(topo: &Topology, req: &Request, usage: &Usage) -> Option<BruteBest> {
    let cls = topo.classifier();
    let used_g: Vec<bool> = (0..topo.gpus.len())
        .map(|g| usage.gpus.contains(&topo.gpu_bdf(g)))
        .collect();
    let used_n: Vec<bool> = (0..topo.nics.len())
        .map(|n| usage.nics.contains(&topo.nic_bdf(n)))
        .collect();
    let elig_g: Vec<usize> = (0..topo.gpus.len())
        .filter(|&g| {
            !used_g[g]
                && req.gpu_passes(
                    &topo.gpus[g].vendor.to_string(),
                    topo.gpus[g].model.as_deref(),
                )
        })
        .collect();
    let elig_n: Vec<usize> = (0..topo.nics.len())
        .filter(|&n| !used_n[n] && req.nic_passes(&topo.nics[n]))
        .collect();
    // Host capacity per node.
    let free_cpu: Vec<u64> = topo
        .numa
        .iter()
        .map(|n| n.cpus.difference(&usage.cpus).len() as u64)
        .collect();
    let mem_known = topo.numa.iter().any(|n| n.memory_kib.is_some());
    let free_mem: Vec<u64> = topo
        .numa
        .iter()
        .map(|n| {
            n.memory_kib
                .unwrap_or(0)
                .saturating_mul(1024)
                .saturating_sub(usage.memory.get(&n.id).copied().unwrap_or(0))
        })
        .collect();
    let need_mem = req.memory.filter(|&m| m > 0 && mem_known);
    let total = req.total_nics();
    let islands = topo.fabric_islands();
    let mut best: Option<BruteBest> = None;
    for gpus in subsets(&elig_g, req.gpus) {
        if req.gpu_link == GpuLinkBound::Nvlink
            && gpus.iter().enumerate().any(|(k, &a)| {
                gpus[k + 1..]
                    .iter()
                    .any(|&b| !cls.gpu_gpu(a, b).is_fabric())
            })
        {
            continue;
        }
        for nics in subsets(&elig_n, total) {
            // Every assignment NIC k -> GPU slot.
            let mut slot = vec![0usize; total];
            loop {
                let per_gpu: Vec<usize> = (0..gpus.len())
                    .map(|s| slot.iter().filter(|&&x| x == s).count())
                    .collect();
                let pairs: Vec<(usize, usize)> = slot
                    .iter()
                    .zip(&nics)
                    .map(|(&s, &n)| (gpus[s], n))
                    .collect();
                let within = req
                    .max_pair
                    .is_none_or(|m| pairs.iter().all(|&(g, n)| cls.gpu_nic(g, n).class <= m));
                if spread_ok(req, &per_gpu) && within {
                    let d = device_score(topo, &cls, &used_g, &used_n, &islands, &gpus, &pairs);
                    // Every choice of host nodes.
                    for hmask in 0u64..(1u64 << topo.numa.len()) {
                        let (mut c, mut m) = (0u64, 0u64);
                        let mut span: BTreeSet<u32> = d.device_nodes.clone();
                        for (i, node) in topo.numa.iter().enumerate() {
                            if hmask >> i & 1 == 1 {
                                c += free_cpu[i];
                                m = m.saturating_add(free_mem[i]);
                                span.insert(node.id);
                            }
                        }
                        let host_needed = req.cpus > 0 || need_mem.is_some();
                        if !host_needed && hmask != 0 {
                            continue;
                        }
                        if c < req.cpus as u64 || need_mem.is_some_and(|need| m < need) {
                            continue;
                        }
                        let score = full_score(topo, &d, &span);
                        let key = score.key();
                        let gb: Vec<Bdf> = gpus.iter().map(|&g| topo.gpu_bdf(g)).collect();
                        let mut nb: Vec<Bdf> = nics.iter().map(|&n| topo.nic_bdf(n)).collect();
                        nb.sort();
                        let better = best
                            .as_ref()
                            .is_none_or(|b| (key, &gb, &nb) < (b.key, &b.gpus, &b.nics));
                        if better {
                            best = Some(BruteBest {
                                score,
                                key,
                                gpus: gb,
                                nics: nb,
                            });
                        }
                    }
                }
                // Next assignment.
                let mut k = 0;
                while k < total {
                    slot[k] += 1;
                    if slot[k] < gpus.len() {
                        break;
                    }
                    slot[k] = 0;
                    k += 1;
                }
                if k == total {
                    break;
                }
            }
        }
    }
    best
}
