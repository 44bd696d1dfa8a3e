//! The lean Topology Manager merge of the device manager's hints.

use topoalign_kube_types::kubelet_settings::Policy;

use super::{Bits, LeanPlan};
use crate::bitmask::NumaMask;
use crate::hint::TopologyHint;
use crate::merge::merge_lists;

impl LeanPlan {
    /// The Topology Manager's merge of the device manager's hints for `requests` (the
    /// CPU and memory managers are off on the lean path: no hints, "don't care"); `sets`
    /// gives each pool's allocated devices and those kept for reuse (`None`: none).
    pub(super) fn merge<'s>(
        &self,
        requests: &[(usize, u64)],
        sets: impl Fn(usize) -> (&'s Bits, Option<&'s Bits>),
    ) -> (TopologyHint, bool) {
        let mut owned: Vec<Vec<TopologyHint>> = Vec::with_capacity(requests.len());
        const ANY: [TopologyHint; 1] = [TopologyHint {
            affinity: None,
            preferred: true,
        }];
        const NONE: [TopologyHint; 1] = [TopologyHint {
            affinity: None,
            preferred: false,
        }];
        for &(pi, n) in requests {
            let (allocated, reuse) = sets(pi);
            owned.push(self.device_hints(pi, n, allocated, reuse));
        }
        let single = self.tm.policy == Policy::SingleNumaNode;
        if single {
            for l in &mut owned {
                l.retain(|h| h.preferred && h.affinity.is_none_or(|m| m.count() == 1));
            }
        }
        let mut lists: Vec<&[TopologyHint]> = Vec::with_capacity(requests.len() + 2);
        for (k, &(pi, _)) in requests.iter().enumerate() {
            lists.push(match &owned[k] {
                _ if !self.pools[pi].has_topology => &ANY,
                l if l.is_empty() && !single => &NONE,
                l => l,
            });
        }
        if requests.is_empty() {
            lists.push(&ANY);
        }
        // The CPU and memory managers' "no resources".
        lists.push(&ANY);
        lists.push(&ANY);
        let numa = &self.tm.numa;
        let mut best = merge_lists(numa, &lists, self.comparison);
        match self.tm.policy {
            Policy::None => (TopologyHint::any(false), true),
            Policy::BestEffort => (best, true),
            Policy::Restricted => (best, best.preferred),
            Policy::SingleNumaNode => {
                if best.affinity == Some(numa.default_affinity()) {
                    best = TopologyHint::any(best.preferred);
                }
                (best, best.preferred)
            }
        }
    }

    /// `GetTopologyHints` of the device manager for one pool: `[]` for "impossible"
    /// (shortage), the generated hints otherwise (a pool without topology is read as
    /// nil by the caller).
    fn device_hints(
        &self,
        pi: usize,
        requested: u64,
        allocated: &Bits,
        reuse: Option<&Bits>,
    ) -> Vec<TopologyHint> {
        let p = &self.pools[pi];
        if !p.has_topology {
            return Vec::new();
        }
        let mut free = [0u64; 64];
        let mut reused_mask = 0u64;
        let mut reused_outside = false;
        let mut reused = 0u64;
        for (x, b) in &p.on {
            if *x <= NumaMask::MAX_ID {
                free[*x as usize] = b.count_and_not(allocated) as u64;
            }
            if let Some(r) = reuse {
                let k = b.count_and(r) as u64;
                reused += k;
                if k > 0 {
                    if *x <= NumaMask::MAX_ID {
                        reused_mask |= 1 << x;
                    } else {
                        reused_outside = true;
                    }
                }
            }
        }
        let union = match reuse {
            Some(r) => p.all.count_and_not_or(allocated, r),
            None => p.all.count_and_not(allocated),
        } as u64;
        if union < requested {
            return Vec::new();
        }
        let sum_in = |counts: &[u64; 64], mask: NumaMask| -> u64 {
            let mut m = mask.0;
            let mut s = 0;
            while m != 0 {
                s += counts[m.trailing_zeros() as usize];
                m &= m - 1;
            }
            s
        };
        let mut min_affinity_size = self.tm.numa.nodes.len() as u32;
        let mut hints = Vec::new();
        for &mask in &self.masks {
            if sum_in(&p.total, mask) >= requested && mask.count() < min_affinity_size {
                min_affinity_size = mask.count();
            }
            if reused_outside || reused_mask & !mask.0 != 0 {
                continue;
            }
            if reused + sum_in(&free, mask) < requested {
                continue;
            }
            hints.push(TopologyHint::new(mask, false));
        }
        TopologyHint::prefer_size(&mut hints, min_affinity_size);
        hints
    }
}
