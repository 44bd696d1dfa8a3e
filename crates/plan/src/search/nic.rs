//! The NIC side of the search: for one complete GPU choice, P* (the best pair cost over
//! every usable NIC), the NIC classes that can appear in an undominated choice, the
//! depth-first choice of NICs per NIC class and the leaves that update the incumbent.

use std::cmp::Ordering;

use super::{Search, bit, list_lower_bound};
use crate::bound::{PairBound, Partial, pair_bound};
use crate::problem::{Found, chosen_members};

impl Search<'_> {
    /// Searches the NIC choices of the current GPU choice (`x`).
    pub(super) fn nic_phase(&mut self) {
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
        let gpus = chosen_members(&p.gclasses, &self.x);
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
        let lb = self.key_at(b, self.gpu_mask);
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

    /// Chooses how many NICs to take from NIC class `cj` onwards (`remaining` still to
    /// choose, `mask` the NUMA nodes touched, `gpus` the chosen GPUs).
    fn nic_dfs(&mut self, cj: usize, remaining: usize, mask: u64, gpus: &[usize]) {
        let p = self.p;
        if remaining > self.nic_suffix_free[cj] || self.done() {
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
        let lb = self.key_at(self.pstar, mask);
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
            self.decide_none(&p.nclasses[cj..], 1);
            self.leaf(mask, gpus);
            self.decide_none(&p.nclasses[cj..], -1);
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

    /// The NIC address list bound against the incumbent's list.
    fn nic_list_lb(&self, cj: usize, remaining: usize) -> Ordering {
        let Some(best) = &self.best else {
            return Ordering::Less;
        };
        let set = list_lower_bound(
            &self.p.nclasses,
            &self.y,
            cj,
            |k| self.nic_min[k].is_some(),
            remaining,
            self.p.nics,
        );
        set.cmp(&best.nic_set)
    }

    /// A complete choice: places CPUs and memory, pairs at P*, and keeps it when it
    /// beats the incumbent (cost key, then GPU list, then NIC list).
    fn leaf(&mut self, device_mask: u64, gpus: &[usize]) {
        let Some(span) = self.span_for(device_mask) else {
            return;
        };
        let Some((no_gdr, worst, rank_sum, flows)) = self.assign_at_best() else {
            return;
        };
        let pair = PairBound {
            no_gdr,
            worst,
            rank_sum,
        };
        let key = self.key_at(pair, span);
        let nics = chosen_members(&self.p.nclasses, &self.y);
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
}
