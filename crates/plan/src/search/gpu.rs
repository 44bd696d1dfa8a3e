//! The GPU side of the search: how many GPUs to take from each GPU class, with the
//! per-class best-case pair statistics, the NUMA span bound and the address-list bound
//! that cut it.

use std::cmp::Ordering;

use super::{Search, bit, list_lower_bound};
use crate::problem::Problem;
use crate::types::CostKey;

/// Per-GPU-class best-case pair statistics for `q` NICs.
#[derive(Debug, Clone, Copy)]
pub(super) struct BestQ {
    /// Fewest pairs without GPUDirect RDMA.
    pub no_gdr: u32,
    /// Smallest sum of pair ranks.
    pub rank_sum: u32,
    /// Smallest worst pair rank.
    pub worst: u32,
}

/// The best `q` pairs one GPU of class `i` could get, ignoring other GPUs.
pub(super) fn best_for(p: &Problem, i: usize, q: usize) -> Option<BestQ> {
    let mut by_gdr: Vec<(u32, usize)> = Vec::new();
    let mut by_rank: Vec<(u32, usize)> = Vec::new();
    let mut total = 0;
    for (j, w) in p.weight[i].iter().enumerate() {
        if let Some((g, r)) = w {
            let k = p.nclasses[j].members.len();
            total += k;
            by_gdr.push((*g, k));
            by_rank.push((*r, k));
        }
    }
    if total < q {
        return None;
    }
    let take = |v: &mut Vec<(u32, usize)>| -> (u32, u32) {
        v.sort_unstable();
        let (mut left, mut sum, mut last) = (q, 0u32, 0u32);
        for &(val, k) in v.iter() {
            if left == 0 {
                break;
            }
            let t = left.min(k);
            sum += val * t as u32;
            last = val;
            left -= t;
        }
        (sum, last)
    };
    let (no_gdr, _) = take(&mut by_gdr);
    let (rank_sum, worst) = take(&mut by_rank);
    Some(BestQ {
        no_gdr,
        rank_sum,
        worst,
    })
}

/// Suffix tables over GPU classes `ci..` (one extra row for the empty suffix): usable
/// GPUs, the component-wise best [`BestQ`], and usable GPUs per NUMA index (last column:
/// no NUMA node).
#[allow(clippy::type_complexity)]
pub(super) fn suffix_tables(
    p: &Problem,
    best_q: &[Option<BestQ>],
) -> (Vec<usize>, Vec<BestQ>, Vec<Vec<usize>>) {
    let nc = p.gclasses.len();
    let mut suffix_free = vec![0; nc + 1];
    let inf = BestQ {
        no_gdr: u32::MAX,
        rank_sum: u32::MAX,
        worst: u32::MAX,
    };
    let mut suffix_best = vec![inf; nc + 1];
    for i in (0..nc).rev() {
        let usable = best_q[i].is_some();
        suffix_free[i] = suffix_free[i + 1]
            + if usable {
                p.gclasses[i].members.len()
            } else {
                0
            };
        let mut s = suffix_best[i + 1];
        if let Some(b) = best_q[i] {
            s.no_gdr = s.no_gdr.min(b.no_gdr);
            s.rank_sum = s.rank_sum.min(b.rank_sum);
            s.worst = s.worst.min(b.worst);
        }
        suffix_best[i] = s;
    }
    let nodes = p.free_cpus.len();
    let mut suffix_numa = vec![vec![0usize; nodes + 1]; nc + 1];
    for i in (0..nc).rev() {
        suffix_numa[i] = suffix_numa[i + 1].clone();
        if best_q[i].is_some() {
            let col = p.gclasses[i].numa.unwrap_or(nodes);
            suffix_numa[i][col] += p.gclasses[i].members.len();
        }
    }
    (suffix_free, suffix_best, suffix_numa)
}

impl Search<'_> {
    /// Chooses how many GPUs to take from GPU class `ci` onwards (`remaining` still to
    /// place, `chosen` placed), carrying the pair statistics, NUMA mask and interconnect
    /// of the classes decided so far; hands each complete GPU choice to the NIC side.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn gpu_dfs(
        &mut self,
        ci: usize,
        remaining: usize,
        chosen: usize,
        no_gdr: u32,
        rank_sum: u32,
        worst: u32,
        mask: u64,
        inter: u32,
    ) {
        let p = self.p;
        if remaining > self.suffix_free[ci] || self.done() {
            return;
        }
        // Lower bound of this node.
        let (rg, rr, rw) = if remaining > 0 {
            let s = self.suffix_best[ci];
            (
                no_gdr + s.no_gdr * remaining as u32,
                rank_sum + s.rank_sum * remaining as u32,
                worst.max(s.worst),
            )
        } else {
            (no_gdr, rank_sum, worst)
        };
        let r = remaining as u32;
        let c = chosen as u32;
        let (span_lb, distance_lb) = self.gpu_span_lb(ci, remaining, mask);
        let lb = CostKey {
            no_gdr: rg,
            worst: self.worst_key(rw),
            rank_sum: rr,
            span: span_lb,
            distance: distance_lb,
            neg_interconnect: -i64::from(
                inter + self.max_link * (r * c + r * r.saturating_sub(1) / 2),
            ),
            fragmentation: self.frag_lb(),
        };
        match self.vs_best(&lb) {
            Some(Ordering::Greater) => return,
            Some(Ordering::Equal) if self.gpu_list_lb(ci, remaining) == Ordering::Greater => {
                return;
            }
            _ => {}
        }
        if remaining == 0 {
            // Every later class takes nothing.
            self.decide_none(&p.gclasses[ci..], 1);
            self.interconnect = inter;
            self.gpu_mask = mask;
            self.nic_phase();
            self.decide_none(&p.gclasses[ci..], -1);
            return;
        }
        if ci >= p.gclasses.len() {
            return;
        }
        let cl = &p.gclasses[ci];
        let size = cl.members.len();
        let top = match self.best_q[ci] {
            Some(_) => size.min(remaining),
            None => 0,
        };
        for k in (0..=top).rev() {
            if k > 0 && p.need_link && !self.links_ok(ci, k) {
                continue;
            }
            let b = self.best_q[ci];
            let (g2, r2, w2) = match (k, b) {
                (0, _) | (_, None) => (no_gdr, rank_sum, worst),
                (_, Some(b)) => (
                    no_gdr + b.no_gdr * k as u32,
                    rank_sum + b.rank_sum * k as u32,
                    worst.max(b.worst),
                ),
            };
            let mut add = 0;
            if k > 0 {
                let kk = k as u32;
                add += p.link[ci][ci].unwrap_or(0) * (kk * kk.saturating_sub(1) / 2);
                for (j, &xj) in self.x.iter().enumerate().take(ci) {
                    add += p.link[ci][j].unwrap_or(0) * kk * xj as u32;
                }
            }
            let m2 = if k > 0 { mask | bit(cl.numa) } else { mask };
            self.x[ci] = k;
            self.decide(cl.groups, k, size - k, 1);
            self.gpu_dfs(
                ci + 1,
                remaining - k,
                chosen + k,
                g2,
                r2,
                w2,
                m2,
                inter + add,
            );
            self.decide(cl.groups, k, size - k, -1);
            self.x[ci] = 0;
        }
    }

    /// Lower bounds of the NUMA span and SLIT sum: the `remaining` GPUs still to place
    /// that the classes on already touched nodes cannot hold need the fewest untouched
    /// nodes with the most usable GPUs, and at least one of them adds its distances.
    fn gpu_span_lb(&self, ci: usize, remaining: usize, mask: u64) -> (u32, u32) {
        let (span, distance) = (mask.count_ones(), self.m.slit(mask));
        if remaining == 0 || ci >= self.suffix_numa.len() {
            return (span, distance);
        }
        let caps = &self.suffix_numa[ci];
        let nodes = caps.len() - 1;
        let inside: usize = caps[nodes]
            + (0..nodes)
                .filter(|&i| mask >> i & 1 == 1)
                .map(|i| caps[i])
                .sum::<usize>();
        if inside >= remaining {
            return (span, distance);
        }
        let mut outside: Vec<usize> = (0..nodes)
            .filter(|&i| mask >> i & 1 == 0 && caps[i] > 0)
            .map(|i| caps[i])
            .collect();
        outside.sort_unstable_by(|a, b| b.cmp(a));
        let (mut left, mut extra) = (remaining - inside, 0u32);
        for c in outside {
            if left == 0 {
                break;
            }
            left = left.saturating_sub(c);
            extra += 1;
        }
        let added = (0..nodes)
            .filter(|&u| mask >> u & 1 == 0 && caps[u] > 0)
            .map(|u| {
                (0..nodes)
                    .filter(|&v| mask >> v & 1 == 1)
                    .map(|v| self.m.numa_dist[u][v])
                    .sum::<u32>()
            })
            .min()
            .unwrap_or(0);
        (span + extra, distance + added)
    }

    /// Whether taking `k` GPUs of class `ci` keeps every chosen GPU pair fabric-linked.
    fn links_ok(&self, ci: usize, k: usize) -> bool {
        let p = self.p;
        if k >= 2 && p.link[ci][ci].is_none() {
            return false;
        }
        (0..ci).all(|j| self.x[j] == 0 || p.link[ci][j].is_some())
    }

    /// The GPU address list bound against the incumbent's list.
    fn gpu_list_lb(&self, ci: usize, remaining: usize) -> Ordering {
        let Some(best) = &self.best else {
            return Ordering::Less;
        };
        let set = list_lower_bound(
            &self.p.gclasses,
            &self.x,
            ci,
            |k| self.best_q[k].is_some(),
            remaining,
            self.p.gpus,
        );
        set.cmp(&best.gpu_set)
    }
}
