//! The exact branch-and-bound search over device counts per equivalence class.
//!
//! Depth-first over GPU classes (in address order, largest count first), then over NIC
//! classes; at each leaf the NIC assignment is a transportation problem solved exactly
//! by min-cost flow. Every node carries a component-wise lower bound of the cost key
//! (pairs from each GPU's best possible NICs and each NIC's best possible GPU, NUMA nodes
//! already touched, the interconnect still reachable, groups already certainly
//! fragmented) and of the address lists; a node is cut when its bound cannot beat the
//! best plan found so far. The GPU-level span bound counts the extra NUMA nodes the GPUs
//! still to place need. Per GPU choice, P* (the best pair cost over all usable NICs, one
//! flow) replaces the pair part of the NIC-level bound, NIC classes that cannot appear in
//! a P* choice are dropped, and NIC nodes whose capacity-aware pair bound exceeds P* are
//! cut (a P* choice for the same GPUs dominates them); leaves need one flow, at P*'s
//! worst rank.

use std::cmp::Ordering;
use std::collections::HashMap;

use crate::bound::{PairBound, Partial, pair_bound};
use crate::flow::MinCostFlow;
use crate::model::Model;
use crate::types::CostKey;

/// One equivalence class restricted to the free devices that pass the filters.
#[derive(Debug, Clone)]
pub(crate) struct Class {
    /// Eligible free members, in address order.
    pub members: Vec<usize>,
    /// Group memberships shared by the members.
    pub groups: [Option<usize>; 3],
    /// NUMA index shared by the members.
    pub numa: Option<usize>,
}

/// Per-call inputs of the search.
#[derive(Debug, Clone)]
pub(crate) struct Problem {
    pub gpus: usize,
    pub nics: usize,
    /// Maximum allowed pair rank (0 PIX … 4 SYS).
    pub max_rank: u32,
    pub need_link: bool,
    pub gclasses: Vec<Class>,
    pub nclasses: Vec<Class>,
    /// (no-GDR 0/1, rank) per (GPU class, NIC class), `None` when over the bound.
    pub weight: Vec<Vec<Option<(u32, u32)>>>,
    /// Fabric link count between classes (diagonal: inside the class).
    pub link: Vec<Vec<Option<u32>>>,
    /// Devices already in use per group, and free devices never eligible.
    pub group_used: Vec<u32>,
    pub group_never: Vec<u32>,
    pub group_size: Vec<u32>,
    /// Free CPUs and memory per NUMA index; `need_mem` None when memory is unchecked.
    pub free_cpus: Vec<u64>,
    pub free_mem: Vec<u64>,
    pub need_cpus: u64,
    pub need_mem: Option<u64>,
}

/// The best plan found, in class terms.
#[derive(Debug, Clone)]
pub(crate) struct Found {
    pub key: CostKey,
    pub gpu_set: Vec<usize>,
    pub nic_set: Vec<usize>,
    /// Count per GPU class and NIC class.
    pub x: Vec<usize>,
    pub y: Vec<usize>,
    /// (GPU class, NIC class, NICs) flows.
    pub flows: Vec<(usize, usize, usize)>,
    /// NUMA mask spanned (devices plus CPU/memory nodes).
    pub span: u64,
}

/// Per-GPU-class best-case pair statistics for `q` NICs.
#[derive(Debug, Clone, Copy)]
struct BestQ {
    no_gdr: u32,
    rank_sum: u32,
    worst: u32,
}

struct Search<'a> {
    m: &'a Model,
    p: &'a Problem,
    q: usize,
    extra: usize,
    best_q: Vec<Option<BestQ>>,
    suffix_free: Vec<usize>,
    /// Usable GPUs per NUMA index in classes `ci..` (last column: no NUMA node).
    suffix_numa: Vec<Vec<usize>>,
    suffix_best: Vec<BestQ>,
    max_link: u32,
    x: Vec<usize>,
    y: Vec<usize>,
    taken: Vec<u32>,
    untaken: Vec<u32>,
    best: Option<Found>,
    span_memo: HashMap<u64, Option<u64>>,
    mcf: MinCostFlow,
    // NIC-level data for the current GPU choice.
    nic_min: Vec<Option<(u32, u32)>>,
    nic_suffix_free: Vec<usize>,
    nic_suffix_min: Vec<(u32, u32)>,
    nic_usable: Vec<bool>,
    /// The best pair cost any NIC choice reaches for the current GPU choice: NIC
    /// choices that cannot reach it are dominated and cut.
    pstar: PairBound,
    interconnect: u32,
    gpu_mask: u64,
}

/// Runs the search; `None` when no choice meets the bounds.
pub(crate) fn solve(m: &Model, p: &Problem) -> Option<Found> {
    let q = p.nics / p.gpus.max(1);
    let extra = p.nics % p.gpus.max(1);
    let nc = p.gclasses.len();
    let best_q: Vec<Option<BestQ>> = (0..nc).map(|i| best_for(p, i, q)).collect();
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
    let max_link = p
        .link
        .iter()
        .flatten()
        .flatten()
        .copied()
        .max()
        .unwrap_or(0);
    let mut s = Search {
        m,
        p,
        q,
        extra,
        best_q,
        suffix_free,
        suffix_numa,
        suffix_best,
        max_link,
        x: vec![0; nc],
        y: vec![0; p.nclasses.len()],
        taken: vec![0; p.group_size.len()],
        untaken: vec![0; p.group_size.len()],
        best: None,
        span_memo: HashMap::new(),
        mcf: MinCostFlow::default(),
        nic_min: Vec::new(),
        nic_suffix_free: Vec::new(),
        nic_suffix_min: Vec::new(),
        nic_usable: Vec::new(),
        pstar: PairBound::default(),
        interconnect: 0,
        gpu_mask: 0,
    };
    s.gpu_dfs(0, p.gpus, 0, 0, 0, 0, 0, 0);
    s.best
}

/// The best `q` pairs one GPU of class `i` could get, ignoring other GPUs.
fn best_for(p: &Problem, i: usize, q: usize) -> Option<BestQ> {
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

fn bit(i: Option<usize>) -> u64 {
    i.map_or(0, |i| 1u64 << i)
}

impl Search<'_> {
    fn frag_lb(&self) -> u32 {
        let p = self.p;
        (0..p.group_size.len())
            .filter(|&g| {
                p.group_used[g] + self.taken[g] > 0 && p.group_never[g] + self.untaken[g] > 0
            })
            .count() as u32
    }

    fn decide(&mut self, groups: [Option<usize>; 3], take: usize, leave: usize, sign: i64) {
        for g in groups.iter().flatten() {
            if sign > 0 {
                self.taken[*g] += take as u32;
                self.untaken[*g] += leave as u32;
            } else {
                self.taken[*g] -= take as u32;
                self.untaken[*g] -= leave as u32;
            }
        }
    }

    fn worst_key(&self, rank: u32) -> u32 {
        if self.p.nics == 0 { 0 } else { rank + 1 }
    }

    /// Compares a lower bound with the incumbent: `Less` keeps searching, `Greater`
    /// prunes, `Equal` asks the address tie-break.
    fn vs_best(&self, lb: &CostKey) -> Option<Ordering> {
        self.best.as_ref().map(|b| lb.cmp(&b.key))
    }

    #[allow(clippy::too_many_arguments)]
    fn gpu_dfs(
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
        if remaining > self.suffix_free[ci] {
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
            for k in ci..p.gclasses.len() {
                let cl = &p.gclasses[k];
                self.decide(cl.groups, 0, cl.members.len(), 1);
            }
            self.interconnect = inter;
            self.gpu_mask = mask;
            self.nic_phase();
            for k in ci..p.gclasses.len() {
                let cl = &p.gclasses[k];
                self.decide(cl.groups, 0, cl.members.len(), -1);
            }
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
        let mut set: Vec<usize> = Vec::with_capacity(self.p.gpus);
        for (k, cl) in self.p.gclasses.iter().enumerate().take(ci) {
            set.extend_from_slice(&cl.members[..self.x[k]]);
        }
        let mut rest: Vec<usize> = self.p.gclasses[ci.min(self.p.gclasses.len())..]
            .iter()
            .enumerate()
            .filter(|(k, _)| self.best_q[ci + k].is_some())
            .flat_map(|(_, cl)| cl.members.iter().copied())
            .collect();
        rest.sort_unstable();
        set.extend(rest.into_iter().take(remaining));
        set.sort_unstable();
        set.cmp(&best.gpu_set)
    }

    fn chosen_gpus(&self) -> Vec<usize> {
        let mut set = Vec::with_capacity(self.p.gpus);
        for (k, cl) in self.p.gclasses.iter().enumerate() {
            set.extend_from_slice(&cl.members[..self.x[k]]);
        }
        set.sort_unstable();
        set
    }

    fn nic_phase(&mut self) {
        let p = self.p;
        let nn = p.nclasses.len();
        self.nic_min = (0..nn)
            .map(|j| {
                let mut best: Option<(u32, u32)> = None;
                for (i, &xi) in self.x.iter().enumerate() {
                    if xi == 0 {
                        continue;
                    }
                    if let Some((g, r)) = p.weight[i][j] {
                        best = Some(match best {
                            None => (g, r),
                            Some((bg, br)) => (bg.min(g), br.min(r)),
                        });
                    }
                }
                best
            })
            .collect();
        self.nic_suffixes();
        self.nic_usable = self.nic_min.iter().map(Option::is_some).collect();
        if p.nics > self.nic_suffix_free[0] {
            return;
        }
        let gpus = self.chosen_gpus();
        // A cheap bound first: skip the flow for P* when this GPU choice cannot win.
        let root = Partial {
            x: &self.x,
            y: &self.y,
            decided: 0,
            usable: &self.nic_usable,
            q: self.q,
            extra: self.extra,
            remaining: p.nics,
            suffix_min: if p.nics > 0 {
                self.nic_suffix_min[0]
            } else {
                (0, 0)
            },
        };
        let Some(b) = pair_bound(p, &root) else {
            return;
        };
        let lb = CostKey {
            no_gdr: b.no_gdr,
            worst: self.worst_key(b.worst),
            rank_sum: b.rank_sum,
            span: self.gpu_mask.count_ones(),
            distance: self.m.slit(self.gpu_mask),
            neg_interconnect: -i64::from(self.interconnect),
            fragmentation: self.frag_lb(),
        };
        if let Some(best) = &self.best {
            match lb.cmp(&best.key) {
                Ordering::Greater => return,
                Ordering::Equal if gpus > best.gpu_set => return,
                _ => {}
            }
        }
        // P*: the best pairs over every usable NIC.
        for j in 0..nn {
            self.y[j] = if self.nic_usable[j] {
                p.nclasses[j].members.len()
            } else {
                0
            };
        }
        let pstar = self.assign();
        self.y.iter_mut().for_each(|v| *v = 0);
        let Some((no_gdr, worst, rank_sum, _)) = pstar else {
            return;
        };
        self.pstar = PairBound {
            no_gdr,
            worst,
            rank_sum,
        };
        // A NIC class whose every pair with the chosen GPUs is worse than P*'s worst,
        // or lacks GDR when P* has GDR everywhere, is in no undominated choice.
        let mut cut = false;
        for j in 0..nn {
            if let Some((g, r)) = self.nic_min[j]
                && (r > worst || (no_gdr == 0 && g > 0))
            {
                self.nic_min[j] = None;
                self.nic_usable[j] = false;
                cut = true;
            }
        }
        if cut {
            self.nic_suffixes();
        }
        self.nic_dfs(0, p.nics, self.gpu_mask, &gpus);
    }

    /// NICs and their cheapest pair in NIC classes `j..`.
    fn nic_suffixes(&mut self) {
        let p = self.p;
        let nn = p.nclasses.len();
        self.nic_suffix_free = vec![0; nn + 1];
        self.nic_suffix_min = vec![(u32::MAX, u32::MAX); nn + 1];
        for j in (0..nn).rev() {
            let (mut f, mut mn) = (self.nic_suffix_free[j + 1], self.nic_suffix_min[j + 1]);
            if let Some((g, r)) = self.nic_min[j] {
                f += p.nclasses[j].members.len();
                mn = (mn.0.min(g), mn.1.min(r));
            }
            self.nic_suffix_free[j] = f;
            self.nic_suffix_min[j] = mn;
        }
    }

    fn nic_dfs(&mut self, cj: usize, remaining: usize, mask: u64, gpus: &[usize]) {
        let p = self.p;
        if remaining > self.nic_suffix_free[cj] {
            return;
        }
        let partial = Partial {
            x: &self.x,
            y: &self.y,
            decided: cj,
            usable: &self.nic_usable,
            q: self.q,
            extra: self.extra,
            remaining,
            suffix_min: if remaining > 0 {
                self.nic_suffix_min[cj]
            } else {
                (0, 0)
            },
        };
        match pair_bound(p, &partial) {
            Some(b) if !b.exceeds(&self.pstar) => {}
            _ => return,
        }
        let ps = self.pstar;
        let lb = CostKey {
            no_gdr: ps.no_gdr,
            worst: self.worst_key(ps.worst),
            rank_sum: ps.rank_sum,
            span: mask.count_ones(),
            distance: self.m.slit(mask),
            neg_interconnect: -i64::from(self.interconnect),
            fragmentation: self.frag_lb(),
        };
        match self.vs_best(&lb) {
            Some(Ordering::Greater) => return,
            Some(Ordering::Equal) => {
                if let Some(best) = &self.best {
                    match gpus.cmp(&best.gpu_set) {
                        Ordering::Greater => return,
                        Ordering::Equal if self.nic_list_lb(cj, remaining) == Ordering::Greater => {
                            return;
                        }
                        _ => {}
                    }
                }
            }
            _ => {}
        }
        if remaining == 0 || cj >= p.nclasses.len() {
            if remaining != 0 {
                return;
            }
            for k in cj..p.nclasses.len() {
                let cl = &p.nclasses[k];
                self.decide(cl.groups, 0, cl.members.len(), 1);
            }
            self.leaf(mask, gpus);
            for k in cj..p.nclasses.len() {
                let cl = &p.nclasses[k];
                self.decide(cl.groups, 0, cl.members.len(), -1);
            }
            return;
        }
        let cl = &p.nclasses[cj];
        let size = cl.members.len();
        let top = match self.nic_min[cj] {
            Some(_) => size.min(remaining),
            None => 0,
        };
        for k in (0..=top).rev() {
            let m2 = if k > 0 { mask | bit(cl.numa) } else { mask };
            self.y[cj] = k;
            self.decide(cl.groups, k, size - k, 1);
            self.nic_dfs(cj + 1, remaining - k, m2, gpus);
            self.decide(cl.groups, k, size - k, -1);
            self.y[cj] = 0;
        }
    }

    fn nic_list_lb(&self, cj: usize, remaining: usize) -> Ordering {
        let Some(best) = &self.best else {
            return Ordering::Less;
        };
        let mut set: Vec<usize> = Vec::with_capacity(self.p.nics);
        for (k, cl) in self.p.nclasses.iter().enumerate().take(cj) {
            set.extend_from_slice(&cl.members[..self.y[k]]);
        }
        let mut rest: Vec<usize> = self.p.nclasses[cj..]
            .iter()
            .enumerate()
            .filter(|(k, _)| self.nic_min[cj + k].is_some())
            .flat_map(|(_, cl)| cl.members.iter().copied())
            .collect();
        rest.sort_unstable();
        set.extend(rest.into_iter().take(remaining));
        set.sort_unstable();
        set.cmp(&best.nic_set)
    }

    fn leaf(&mut self, device_mask: u64, gpus: &[usize]) {
        let Some(span) = self.span_for(device_mask) else {
            return;
        };
        let Some((no_gdr, worst, rank_sum, flows)) = self.assign_at_best() else {
            return;
        };
        let key = CostKey {
            no_gdr,
            worst: self.worst_key(worst),
            rank_sum,
            span: span.count_ones(),
            distance: self.m.slit(span),
            neg_interconnect: -i64::from(self.interconnect),
            fragmentation: self.frag_lb(),
        };
        let mut nics: Vec<usize> = Vec::with_capacity(self.p.nics);
        for (k, cl) in self.p.nclasses.iter().enumerate() {
            nics.extend_from_slice(&cl.members[..self.y[k]]);
        }
        nics.sort_unstable();
        let better = match &self.best {
            None => true,
            Some(b) => {
                key.cmp(&b.key)
                    .then_with(|| gpus.cmp(&b.gpu_set))
                    .then_with(|| nics.cmp(&b.nic_set))
                    == Ordering::Less
            }
        };
        if better {
            self.best = Some(Found {
                key,
                gpu_set: gpus.to_vec(),
                nic_set: nics,
                x: self.x.clone(),
                y: self.y.clone(),
                flows,
                span,
            });
        }
    }

    /// The NUMA nodes spanned once CPUs and memory are placed: the device nodes plus the
    /// fewest (then closest) extra nodes with enough free CPUs and memory.
    fn span_for(&mut self, devices: u64) -> Option<u64> {
        let p = self.p;
        if p.need_cpus == 0 && p.need_mem.is_none() {
            return Some(devices);
        }
        if let Some(v) = self.span_memo.get(&devices) {
            return *v;
        }
        let nodes = p.free_cpus.len();
        let others: Vec<usize> = (0..nodes).filter(|&i| devices >> i & 1 == 0).collect();
        let fits = |mask: u64| {
            let (mut c, mut mem) = (0u64, 0u64);
            for i in 0..nodes {
                if mask >> i & 1 == 1 {
                    c += p.free_cpus[i];
                    mem = mem.saturating_add(p.free_mem[i]);
                }
            }
            c >= p.need_cpus && p.need_mem.is_none_or(|need| mem >= need)
        };
        let mut best: Option<(u32, u32, u64)> = None;
        for sub in 0u64..(1u64 << others.len().min(20)) {
            let mut mask = devices;
            for (k, &o) in others.iter().enumerate() {
                if sub >> k & 1 == 1 {
                    mask |= 1 << o;
                }
            }
            if !fits(mask) {
                continue;
            }
            let cand = (mask.count_ones(), self.m.slit(mask), mask);
            if best.is_none_or(|b| cand < b) {
                best = Some(cand);
            }
        }
        let out = best.map(|b| b.2);
        self.span_memo.insert(devices, out);
        out
    }

    /// Solves the class-level assignment when it reaches P* (otherwise the NIC choice is
    /// dominated by one that does): one flow limited to P*'s worst rank.
    #[allow(clippy::type_complexity)]
    fn assign_at_best(&mut self) -> Option<(u32, u32, u32, Vec<(usize, usize, usize)>)> {
        if self.p.nics == 0 {
            return Some((0, 0, 0, Vec::new()));
        }
        let gi: Vec<usize> = (0..self.x.len()).filter(|&i| self.x[i] > 0).collect();
        let nj: Vec<usize> = (0..self.y.len()).filter(|&j| self.y[j] > 0).collect();
        let f = self.flow_at(&gi, &nj, self.pstar.worst)?;
        let ps = self.pstar;
        (f.0 == ps.no_gdr && f.2 == ps.rank_sum).then_some(f)
    }

    /// Solves the class-level assignment; returns (no-GDR pairs, worst rank, rank sum,
    /// flows).
    #[allow(clippy::type_complexity)]
    fn assign(&mut self) -> Option<(u32, u32, u32, Vec<(usize, usize, usize)>)> {
        let p = self.p;
        if p.nics == 0 {
            return Some((0, 0, 0, Vec::new()));
        }
        let gi: Vec<usize> = (0..self.x.len()).filter(|&i| self.x[i] > 0).collect();
        let nj: Vec<usize> = (0..self.y.len()).filter(|&j| self.y[j] > 0).collect();
        let full = self.flow_at(&gi, &nj, p.max_rank)?;
        let top = full.1;
        let mut chosen = full;
        // The smallest worst rank that keeps the optimal number of GDR pairs.
        for t in 0..top {
            if let Some(f) = self.flow_at(&gi, &nj, t)
                && f.0 == chosen.0
            {
                chosen = f;
                break;
            }
        }
        Some(chosen)
    }

    #[allow(clippy::type_complexity)]
    fn flow_at(
        &mut self,
        gi: &[usize],
        nj: &[usize],
        limit: u32,
    ) -> Option<(u32, u32, u32, Vec<(usize, usize, usize)>)> {
        let p = self.p;
        let total = p.nics as i64;
        let w1 = 5 * total + 1;
        let big = w1 * (total + 1);
        let (a, b) = (gi.len(), nj.len());
        let (s, t) = (0, a + b + 1);
        self.mcf.reset(a + b + 2);
        let mut mandatory = 0i64;
        for (k, &i) in gi.iter().enumerate() {
            let need = (self.x[i] * self.q) as i64;
            mandatory += need;
            if need > 0 {
                self.mcf.edge(s, 1 + k, need, -big);
            }
            if self.extra > 0 {
                self.mcf.edge(s, 1 + k, self.x[i] as i64, 0);
            }
        }
        let mut pair_edges = Vec::new();
        for (k, &i) in gi.iter().enumerate() {
            for (l, &j) in nj.iter().enumerate() {
                if let Some((g, r)) = p.weight[i][j]
                    && r <= limit
                {
                    let cost = i64::from(g) * w1 + i64::from(r);
                    let e = self.mcf.edge(1 + k, 1 + a + l, total, cost);
                    pair_edges.push((e, i, j, r));
                }
            }
        }
        for (l, &j) in nj.iter().enumerate() {
            self.mcf.edge(1 + a + l, t, self.y[j] as i64, 0);
        }
        let (flow, cost) = self.mcf.run(s, t, total);
        if flow < total {
            return None;
        }
        let pair_cost = cost + big * mandatory;
        if pair_cost < 0 || pair_cost >= big {
            return None; // a mandatory share was not met
        }
        let mut worst = 0;
        let mut flows = Vec::new();
        for (e, i, j, r) in pair_edges {
            let f = self.mcf.flow(e);
            if f > 0 {
                worst = worst.max(r);
                flows.push((i, j, f as usize));
            }
        }
        Some((
            (pair_cost / w1) as u32,
            worst,
            (pair_cost % w1) as u32,
            flows,
        ))
    }
}
