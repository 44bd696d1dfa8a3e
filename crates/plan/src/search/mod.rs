//! The exact branch-and-bound search over device counts per equivalence class.
//!
//! Depth-first over GPU classes (in address order, largest count first, see [`gpu`]),
//! then over NIC classes (see [`nic`]); at each leaf the NIC assignment is a
//! transportation problem solved exactly by min-cost flow (see [`pairing`]), and CPUs
//! and memory widen the NUMA span as little as possible (see [`host_span`]). Every node
//! carries a component-wise lower bound of the cost key (pairs from each GPU's best
//! possible NICs and each NIC's best possible GPU, NUMA nodes already touched, the
//! interconnect still reachable, groups already certainly fragmented) and of the address
//! lists; a node is cut when its bound cannot beat the best plan found so far. The
//! GPU-level span bound counts the extra NUMA nodes the GPUs still to place need. Per
//! GPU choice, P* (the best pair cost over all usable NICs, one flow) replaces the pair
//! part of the NIC-level bound, NIC classes that cannot appear in a P* choice are
//! dropped, and NIC nodes whose capacity-aware pair bound exceeds P* are cut (a P*
//! choice for the same GPUs dominates them); leaves need one flow, at P*'s worst rank.

mod gpu;
mod host_span;
mod nic;
mod pairing;

use std::cmp::Ordering;
use std::collections::HashMap;

use crate::bound::PairBound;
use crate::flow::MinCostFlow;
use crate::model::Model;
use crate::problem::{Class, Found, Problem};
use crate::types::CostKey;

use gpu::BestQ;

/// The state of one search: the problem, precomputed suffix tables, the partial choice
/// being explored and the incumbent.
struct Search<'a> {
    /// The topology's class tables.
    m: &'a Model,
    /// The problem being solved.
    p: &'a Problem,
    /// NICs every GPU gets (⌊M/N⌋).
    q: usize,
    /// GPUs that get one NIC more (M mod N).
    extra: usize,
    /// Per GPU class, the best `q` pairs one of its GPUs could get; `None` when unusable.
    best_q: Vec<Option<BestQ>>,
    /// Usable GPUs in GPU classes `ci..`.
    suffix_free: Vec<usize>,
    /// Usable GPUs per NUMA index in classes `ci..` (last column: no NUMA node).
    suffix_numa: Vec<Vec<usize>>,
    /// Component-wise best of `best_q` over GPU classes `ci..`.
    suffix_best: Vec<BestQ>,
    /// The largest fabric link count between any two GPU classes.
    max_link: u32,
    /// GPUs taken per GPU class.
    x: Vec<usize>,
    /// NICs taken per NIC class.
    y: Vec<usize>,
    /// Devices taken per group by the partial choice.
    taken: Vec<u32>,
    /// Eligible devices left untaken per group by the partial choice.
    untaken: Vec<u32>,
    /// The best plan found so far.
    best: Option<Found>,
    /// Whether any plan will do: the search stops at the first one found.
    any: bool,
    /// NUMA span with CPUs and memory placed, per device NUMA mask.
    span_memo: HashMap<u64, Option<u64>>,
    /// The reusable min-cost flow solver.
    mcf: MinCostFlow,
    /// Per NIC class, its cheapest (no-GDR, rank) pair with the chosen GPU classes.
    nic_min: Vec<Option<(u32, u32)>>,
    /// Usable NICs in NIC classes `j..`.
    nic_suffix_free: Vec<usize>,
    /// Cheapest (no-GDR, rank) pair offered by NIC classes `j..`.
    nic_suffix_min: Vec<(u32, u32)>,
    /// Whether a NIC class may appear in an undominated choice for the current GPUs.
    nic_usable: Vec<bool>,
    /// The best pair cost any NIC choice reaches for the current GPU choice: NIC
    /// choices that cannot reach it are dominated and cut.
    pstar: PairBound,
    /// Interconnect of the current GPU choice.
    interconnect: u32,
    /// NUMA mask of the current GPU choice.
    gpu_mask: u64,
}

/// Runs the search; `None` when no choice meets the bounds.
pub(crate) fn solve(m: &Model, p: &Problem) -> Option<Found> {
    search(m, p, false)
}

/// Some choice that meets the bounds (the first the search meets, not the best), or
/// `None` exactly when [`solve`] finds none.
pub(crate) fn solve_any(m: &Model, p: &Problem) -> Option<Found> {
    search(m, p, true)
}

/// Runs the search for the best choice, or (`any`) for the first one found.
fn search(m: &Model, p: &Problem, any: bool) -> Option<Found> {
    let q = p.nics / p.gpus.max(1);
    let extra = p.nics % p.gpus.max(1);
    let nc = p.gclasses.len();
    let best_q: Vec<Option<BestQ>> = (0..nc).map(|i| gpu::best_for(p, i, q)).collect();
    let (suffix_free, suffix_best, suffix_numa) = gpu::suffix_tables(p, &best_q);
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
        any,
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

/// The single-bit mask of a NUMA index (0 when there is none).
fn bit(i: Option<usize>) -> u64 {
    i.map_or(0, |i| 1u64 << i)
}

/// The smallest sorted address list any completion of a partial class-level choice can
/// have: the first `counts[k]` members of the `decided` classes plus the `remaining`
/// lowest addresses of the undecided classes `usable` accepts.
fn list_lower_bound(
    classes: &[Class],
    counts: &[usize],
    decided: usize,
    usable: impl Fn(usize) -> bool,
    remaining: usize,
    capacity: usize,
) -> Vec<usize> {
    let mut set: Vec<usize> = Vec::with_capacity(capacity);
    for (k, cl) in classes.iter().enumerate().take(decided) {
        set.extend_from_slice(&cl.members[..counts[k]]);
    }
    let mut rest: Vec<usize> = classes[decided.min(classes.len())..]
        .iter()
        .enumerate()
        .filter(|(k, _)| usable(decided + k))
        .flat_map(|(_, cl)| cl.members.iter().copied())
        .collect();
    rest.sort_unstable();
    set.extend(rest.into_iter().take(remaining));
    set.sort_unstable();
    set
}

impl Search<'_> {
    /// Groups certainly fragmented by the partial choice: some member used or taken and
    /// some member never eligible or left untaken.
    fn frag_lb(&self) -> u32 {
        let p = self.p;
        (0..p.group_size.len())
            .filter(|&g| {
                p.group_used[g] + self.taken[g] > 0 && p.group_never[g] + self.untaken[g] > 0
            })
            .count() as u32
    }

    /// Records (`sign` > 0) or undoes taking `take` and leaving `leave` devices of a
    /// class in its groups.
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

    /// Records (`sign` > 0) or undoes leaving every device of `classes` untaken.
    fn decide_none(&mut self, classes: &[Class], sign: i64) {
        for cl in classes {
            self.decide(cl.groups, 0, cl.members.len(), sign);
        }
    }

    /// The cost-key component of a worst pair rank (0 when no NICs are asked).
    fn worst_key(&self, rank: u32) -> u32 {
        if self.p.nics == 0 { 0 } else { rank + 1 }
    }

    /// The cost key (or its lower bound) of the current GPU choice with pair cost `pair`
    /// and NUMA span `mask`.
    fn key_at(&self, pair: PairBound, mask: u64) -> CostKey {
        CostKey {
            no_gdr: pair.no_gdr,
            worst: self.worst_key(pair.worst),
            rank_sum: pair.rank_sum,
            span: mask.count_ones(),
            distance: self.m.slit(mask),
            neg_interconnect: -i64::from(self.interconnect),
            fragmentation: self.frag_lb(),
        }
    }

    /// Whether the search is over: any plan will do and one was found.
    fn done(&self) -> bool {
        self.any && self.best.is_some()
    }

    /// Compares a lower bound with the incumbent: `Less` keeps searching, `Greater`
    /// prunes, `Equal` asks the address tie-break.
    fn vs_best(&self, lb: &CostKey) -> Option<Ordering> {
        self.best.as_ref().map(|b| lb.cmp(&b.key))
    }
}
