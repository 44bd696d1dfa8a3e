//! Capacity-aware lower bounds on the pair part of the cost (no-GDR pairs, worst rank,
//! rank sum) for a partial NIC choice, used to cut the NIC search.
//!
//! Two independent relaxations of the transportation problem, each a valid component-wise
//! lower bound:
//!
//! * GPU side: every chosen GPU class must get at least ⌊M/N⌋ NICs per GPU; it takes its
//!   cheapest ones from the NICs still available to it (decided classes at their chosen
//!   count, undecided classes in full), ignoring the other GPU classes.
//! * NIC side: every NIC already chosen must go to some GPU class, which can take at most
//!   ⌈M/N⌉ NICs per GPU; each decided NIC class is placed on its cheapest GPU classes,
//!   ignoring the other NIC classes. NICs still to be chosen cost at least the cheapest
//!   pair any undecided class offers.

use crate::problem::Problem;

/// Ranks run PIX 0 … SYS 4.
const RANKS: usize = 5;

/// A component-wise lower bound of the pair cost.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct PairBound {
    /// Pairs without GPUDirect RDMA.
    pub no_gdr: u32,
    /// Worst pair rank.
    pub worst: u32,
    /// Sum of pair ranks.
    pub rank_sum: u32,
}

impl PairBound {
    /// Raises every component to at least `other`'s.
    fn raise(&mut self, other: PairBound) {
        self.no_gdr = self.no_gdr.max(other.no_gdr);
        self.worst = self.worst.max(other.worst);
        self.rank_sum = self.rank_sum.max(other.rank_sum);
    }

    /// Whether some component exceeds `best`'s (so every completion is worse than a
    /// completion reaching `best`).
    pub(crate) fn exceeds(&self, best: &PairBound) -> bool {
        self.no_gdr > best.no_gdr || self.worst > best.worst || self.rank_sum > best.rank_sum
    }
}

/// The state of the NIC search the bound looks at.
pub(crate) struct Partial<'a> {
    /// GPUs per GPU class.
    pub x: &'a [usize],
    /// NICs per NIC class; only the first `decided` entries are meaningful.
    pub y: &'a [usize],
    /// NIC classes decided so far.
    pub decided: usize,
    /// Whether a NIC class can pair with some chosen GPU class.
    pub usable: &'a [bool],
    /// NICs per GPU: `q` each, `extra` GPUs get one more.
    pub q: usize,
    /// GPUs that get one NIC more than `q`.
    pub extra: usize,
    /// NICs still to choose.
    pub remaining: usize,
    /// The cheapest (no-GDR, rank) any undecided class offers.
    pub suffix_min: (u32, u32),
}

/// Takes `need` units from rank buckets, cheapest first: (rank sum, worst rank), or
/// `None` when the buckets hold fewer than `need`.
fn take_by_rank(buckets: &[usize; RANKS], need: usize) -> Option<(u32, u32)> {
    let (mut left, mut sum, mut worst) = (need, 0u32, 0u32);
    for (r, &k) in buckets.iter().enumerate() {
        if left == 0 {
            break;
        }
        let t = left.min(k);
        if t > 0 {
            sum += r as u32 * t as u32;
            worst = r as u32;
            left -= t;
        }
    }
    (left == 0).then_some((sum, worst))
}

/// Units one side of the pairing can draw on: how many come with GPUDirect RDMA, and how
/// many at each rank.
#[derive(Default)]
struct Offer {
    /// Units whose pair has GPUDirect RDMA.
    gdr: usize,
    /// Units per pair rank.
    by_rank: [usize; RANKS],
}

impl Offer {
    /// Adds `units` whose pair has weight (no-GDR 0/1, rank).
    fn add(&mut self, (no_gdr, rank): (u32, u32), units: usize) {
        if no_gdr == 0 {
            self.gdr += units;
        }
        self.by_rank[rank as usize] += units;
    }

    /// Charges the cheapest `need` units to `side`: the ones beyond the GDR units lack
    /// GDR, and ranks are taken cheapest first. `None` when fewer than `need` are offered.
    fn charge(&self, need: usize, side: &mut PairBound) -> Option<()> {
        let (sum, worst) = take_by_rank(&self.by_rank, need)?;
        side.no_gdr += need.saturating_sub(self.gdr) as u32;
        side.rank_sum += sum;
        side.worst = side.worst.max(worst);
        Some(())
    }
}

/// The pair bound of a partial NIC choice; `None` when no completion can be feasible.
pub(crate) fn pair_bound(p: &Problem, s: &Partial<'_>) -> Option<PairBound> {
    let mut out = PairBound::default();
    let nn = p.nclasses.len();
    let pool = |j: usize| -> usize {
        if !s.usable[j] {
            0
        } else if j < s.decided {
            s.y[j]
        } else {
            p.nclasses[j].members.len()
        }
    };
    // GPU side.
    if s.q > 0 {
        let mut side = PairBound::default();
        for (i, &xi) in s.x.iter().enumerate() {
            if xi == 0 {
                continue;
            }
            let need = xi * s.q;
            let mut offer = Offer::default();
            for j in 0..nn {
                if let Some(w) = p.weight[i][j] {
                    offer.add(w, pool(j));
                }
            }
            offer.charge(need, &mut side)?;
        }
        out.raise(side);
    }
    // NIC side.
    let mut side = PairBound::default();
    for j in 0..s.decided {
        let units = s.y[j];
        if units == 0 {
            continue;
        }
        let mut offer = Offer::default();
        for (i, &xi) in s.x.iter().enumerate() {
            if xi == 0 {
                continue;
            }
            if let Some(w) = p.weight[i][j] {
                offer.add(w, xi * s.q + xi.min(s.extra));
            }
        }
        offer.charge(units, &mut side)?;
    }
    if s.remaining > 0 {
        let r = s.remaining as u32;
        side.no_gdr = side.no_gdr.saturating_add(s.suffix_min.0.saturating_mul(r));
        side.rank_sum = side
            .rank_sum
            .saturating_add(s.suffix_min.1.saturating_mul(r));
        side.worst = side.worst.max(s.suffix_min.1);
    }
    out.raise(side);
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn takes_cheapest_ranks_first_and_reports_shortfall() {
        let b = [1, 0, 2, 0, 5];
        assert_eq!(take_by_rank(&b, 0), Some((0, 0)));
        assert_eq!(take_by_rank(&b, 1), Some((0, 0)));
        assert_eq!(take_by_rank(&b, 3), Some((4, 2)));
        assert_eq!(take_by_rank(&b, 4), Some((8, 4)));
        assert_eq!(take_by_rank(&b, 9), None);
    }

    #[test]
    fn exceeds_compares_every_component() {
        let best = PairBound {
            no_gdr: 1,
            worst: 2,
            rank_sum: 3,
        };
        assert!(!best.exceeds(&best));
        let mut b = best;
        b.rank_sum = 4;
        assert!(b.exceeds(&best));
        b = best;
        b.worst = 3;
        assert!(b.exceeds(&best));
        b = PairBound::default();
        assert!(!b.exceeds(&best));
    }
}
