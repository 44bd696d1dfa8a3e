//! GPU↔NIC pairing inside the search: the class-level transportation problem (every GPU
//! gets ⌊M/N⌋ NICs, M mod N GPUs one more) solved exactly by min-cost flow.

use super::Search;

/// A class-level assignment: (no-GDR pairs, worst rank, rank sum, (GPU class, NIC class,
/// NICs) flows).
pub(super) type Assignment = (u32, u32, u32, Vec<(usize, usize, usize)>);

impl Search<'_> {
    /// Solves the class-level assignment when it reaches P* (otherwise the NIC choice is
    /// dominated by one that does): one flow limited to P*'s worst rank.
    pub(super) fn assign_at_best(&mut self) -> Option<Assignment> {
        if self.p.nics == 0 {
            return Some((0, 0, 0, Vec::new()));
        }
        let (gi, nj) = self.classes_in_use();
        let f = self.flow_at(&gi, &nj, self.pstar.worst)?;
        let ps = self.pstar;
        (f.0 == ps.no_gdr && f.2 == ps.rank_sum).then_some(f)
    }

    /// Solves the class-level assignment: the most GDR pairs, then the smallest worst
    /// rank that keeps them, then the smallest rank sum.
    pub(super) fn assign(&mut self) -> Option<Assignment> {
        let p = self.p;
        if p.nics == 0 {
            return Some((0, 0, 0, Vec::new()));
        }
        let (gi, nj) = self.classes_in_use();
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

    /// The GPU classes and NIC classes the current choice takes devices from.
    fn classes_in_use(&self) -> (Vec<usize>, Vec<usize>) {
        let gi: Vec<usize> = (0..self.x.len()).filter(|&i| self.x[i] > 0).collect();
        let nj: Vec<usize> = (0..self.y.len()).filter(|&j| self.y[j] > 0).collect();
        (gi, nj)
    }

    /// Solves the transportation problem between the chosen GPU classes `gi` and NIC
    /// classes `nj` as a min-cost flow, using only pairs of rank at most `limit`; `None`
    /// when no assignment meets the per-GPU shares.
    fn flow_at(&mut self, gi: &[usize], nj: &[usize], limit: u32) -> Option<Assignment> {
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
