//! Hint merging, mirroring kubernetes `pkg/kubelet/cm/topologymanager/policy.go`.
//!
//! Resources are visited in name order where the kubelet ranges over a Go map. The merge
//! does not depend on that order: among preferred candidates the comparison is a total
//! order on masks (narrowest, or closest then smaller); among non-preferred ones the
//! steering to `best_non_preferred_affinity_count` ends on the best mask of that width
//! whenever one exists, whatever the visiting order.

use crate::bitmask::NumaMask;
use crate::hint::{ProviderHints, TopologyHint};
use crate::numa_info::NumaInfo;

/// Mirrors `filterProvidersHints`: one hint list per (provider, resource). A provider
/// with no resources and a resource with a nil list give `[{nil, true}]`; a resource with
/// an empty list gives `[{nil, false}]`.
pub fn filter_providers_hints(providers: &[ProviderHints]) -> Vec<Vec<TopologyHint>> {
    let mut all = Vec::new();
    for hints in providers {
        if hints.is_empty() {
            all.push(vec![TopologyHint::any(true)]);
            continue;
        }
        for list in hints.values() {
            match list {
                None => all.push(vec![TopologyHint::any(true)]),
                Some(l) if l.is_empty() => all.push(vec![TopologyHint::any(false)]),
                Some(l) => all.push(l.clone()),
            }
        }
    }
    all
}

/// Mirrors `mergePermutation`: AND of the non-nil masks (and the default mask);
/// preferred iff every hint is preferred and every non-nil mask equals the first one.
pub fn merge_permutation(default_affinity: NumaMask, permutation: &[TopologyHint]) -> TopologyHint {
    let mut preferred = true;
    let mut first: Option<NumaMask> = None;
    let mut merged = default_affinity;
    for hint in permutation {
        if let Some(m) = hint.affinity {
            let f = *first.get_or_insert(m);
            if m != f {
                preferred = false;
            }
            merged = merged.and(m);
        }
        if !hint.preferred {
            preferred = false;
        }
    }
    TopologyHint::new(merged, preferred)
}

/// Mirrors `iterateAllProviderTopologyHints`: calls `f` on every permutation (one hint
/// per list), the first list varying slowest.
pub fn iterate_all_provider_topology_hints(
    lists: &[Vec<TopologyHint>],
    f: &mut dyn FnMut(&[TopologyHint]),
) {
    fn rec(
        lists: &[Vec<TopologyHint>],
        i: usize,
        accum: &mut Vec<TopologyHint>,
        f: &mut dyn FnMut(&[TopologyHint]),
    ) {
        if i == lists.len() {
            f(accum);
            return;
        }
        for h in &lists[i] {
            accum.push(*h);
            rec(lists, i + 1, accum, f);
            accum.pop();
        }
    }
    rec(lists, 0, &mut Vec::new(), f);
}

/// Mirrors `narrowestHint`: the narrowest non-nil mask of a list.
fn narrowest_mask(hints: &[TopologyHint]) -> Option<NumaMask> {
    let mut best: Option<NumaMask> = None;
    for m in hints.iter().filter_map(|h| h.affinity) {
        match best {
            Some(b) if !m.is_narrower_than(b) => {}
            _ => best = Some(m),
        }
    }
    best
}

/// Mirrors `maxOfMinAffinityCounts`: the largest, over lists, of the narrowest width.
pub(crate) fn max_of_min_affinity_counts(lists: &[Vec<TopologyHint>]) -> u32 {
    lists
        .iter()
        .filter_map(|l| narrowest_mask(l))
        .map(NumaMask::count)
        .max()
        .unwrap_or(0)
}

/// How equally-preferred masks are compared (`NewHintMerger`'s `compareNumaAffinityMasks`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum MaskComparison {
    /// `NUMAInfo.Narrowest` (the default, and always for `single-numa-node`).
    Narrowest,
    /// `NUMAInfo.Closest` (`prefer-closest-numa-nodes` outside `single-numa-node`).
    Closest,
}

/// Mirrors `HintMerger`.
#[derive(Debug, Clone)]
pub(crate) struct HintMerger<'a> {
    numa: &'a NumaInfo,
    lists: Vec<Vec<TopologyHint>>,
    /// `BestNonPreferredAffinityCount`.
    pub best_non_preferred_affinity_count: u32,
    comparison: MaskComparison,
}

impl<'a> HintMerger<'a> {
    /// Mirrors `NewHintMerger`.
    pub(crate) fn new(
        numa: &'a NumaInfo,
        lists: Vec<Vec<TopologyHint>>,
        comparison: MaskComparison,
    ) -> Self {
        let best_non_preferred_affinity_count = max_of_min_affinity_counts(&lists);
        HintMerger {
            numa,
            lists,
            best_non_preferred_affinity_count,
            comparison,
        }
    }

    /// `compareNumaAffinityMasks`: keeps `current` on equal masks.
    fn compare_masks(&self, current: TopologyHint, candidate: TopologyHint) -> TopologyHint {
        let (c, k) = (
            current.affinity.unwrap_or_default(),
            candidate.affinity.unwrap_or_default(),
        );
        if c == k {
            return current;
        }
        let best = match self.comparison {
            MaskComparison::Narrowest => self.numa.narrowest(c, k),
            MaskComparison::Closest => self.numa.closest(c, k),
        };
        if best == c { current } else { candidate }
    }

    /// Mirrors `HintMerger.compare`, cases 1, 2, 3a, 3b, 3ca, 3cb, 3cc included.
    fn compare(
        &self,
        current: Option<TopologyHint>,
        candidate: TopologyHint,
    ) -> Option<TopologyHint> {
        let cand_count = candidate.affinity.map_or(0, NumaMask::count);
        if cand_count == 0 {
            return current;
        }
        let Some(cur) = current else {
            return Some(candidate);
        };
        if !cur.preferred && candidate.preferred {
            return Some(candidate);
        }
        if cur.preferred && !candidate.preferred {
            return Some(cur);
        }
        if cur.preferred && candidate.preferred {
            return Some(self.compare_masks(cur, candidate));
        }
        let target = self.best_non_preferred_affinity_count;
        let cur_count = cur.affinity.map_or(0, NumaMask::count);
        Some(if cur_count > target {
            self.compare_masks(cur, candidate)
        } else if cur_count == target {
            if cand_count != target {
                cur
            } else {
                self.compare_masks(cur, candidate)
            }
        } else if cand_count > target {
            cur
        } else if cand_count == target || cand_count > cur_count {
            // Cases 3b and 3ca.
            candidate
        } else if cand_count < cur_count {
            cur
        } else {
            self.compare_masks(cur, candidate)
        })
    }

    /// Mirrors `HintMerger.Merge`: the best merged permutation, or `{all nodes, false}`.
    pub(crate) fn merge(&self) -> TopologyHint {
        let default_affinity = self.numa.default_affinity();
        let mut best: Option<TopologyHint> = None;
        iterate_all_provider_topology_hints(&self.lists, &mut |perm| {
            let merged = merge_permutation(default_affinity, perm);
            best = self.compare(best, merged);
        });
        best.unwrap_or(TopologyHint::new(default_affinity, false))
    }
}

/// `HintMerger.Merge` over borrowed lists (the lean admission's merge, no list copied):
/// the same answer as [`HintMerger::merge`] of the same lists.
pub(crate) fn merge_lists(
    numa: &NumaInfo,
    lists: &[&[TopologyHint]],
    comparison: MaskComparison,
) -> TopologyHint {
    let merger = HintMerger {
        numa,
        lists: Vec::new(),
        best_non_preferred_affinity_count: (lists.iter())
            .filter_map(|l| narrowest_mask(l))
            .map(NumaMask::count)
            .max()
            .unwrap_or(0),
        comparison,
    };
    let default_affinity = numa.default_affinity();
    let mut best: Option<TopologyHint> = None;
    // The permutations in `iterate_all_provider_topology_hints` order (the first list
    // varies slowest), as an odometer over the lists' positions.
    if lists.iter().all(|l| !l.is_empty()) {
        let mut at = [0usize; 16];
        let mut perm = [TopologyHint::any(true); 16];
        let n = lists.len();
        if n > at.len() {
            let owned: Vec<Vec<TopologyHint>> = lists.iter().map(|l| l.to_vec()).collect();
            return HintMerger::new(numa, owned, comparison).merge();
        }
        for (i, l) in lists.iter().enumerate() {
            perm[i] = l[0];
        }
        loop {
            let merged = merge_permutation(default_affinity, &perm[..n]);
            best = merger.compare(best, merged);
            // Advance the last list fastest.
            let mut i = n;
            loop {
                if i == 0 {
                    return best.unwrap_or(TopologyHint::new(default_affinity, false));
                }
                i -= 1;
                at[i] += 1;
                if at[i] < lists[i].len() {
                    perm[i] = lists[i][at[i]];
                    break;
                }
                at[i] = 0;
                perm[i] = lists[i][0];
            }
        }
    }
    best.unwrap_or(TopologyHint::new(default_affinity, false))
}

#[cfg(test)]
mod tests {
    //! The merge cases of kubernetes `topologymanager/policy_test.go` (REFERENCE.md §4).
    use super::*;
    use crate::policy::merge_with_policy;
    use std::collections::BTreeMap;
    use topoalign_kube_types::kubelet_settings::{Policy, PolicyOptions};

    fn h(ids: &[u32], p: bool) -> TopologyHint {
        TopologyHint::new(NumaMask::of(ids.iter().copied()).unwrap(), p)
    }

    fn two() -> NumaInfo {
        NumaInfo::new(
            vec![0, 1],
            [(0, vec![10, 20]), (1, vec![20, 10])].into_iter().collect(),
        )
    }

    fn providers(lists: Vec<(&str, Vec<TopologyHint>)>) -> Vec<ProviderHints> {
        lists
            .into_iter()
            .map(|(name, l)| {
                let mut m = ProviderHints::new();
                m.insert(name.to_string(), Some(l));
                m
            })
            .collect()
    }

    fn best_effort(p: &[ProviderHints]) -> TopologyHint {
        merge_with_policy(Policy::BestEffort, PolicyOptions::default(), &two(), p).0
    }

    #[test]
    fn same_single_node_preferred() {
        let p = providers(vec![
            ("r1", vec![h(&[0], true)]),
            ("r2", vec![h(&[0], true)]),
        ]);
        assert_eq!(best_effort(&p), h(&[0], true));
    }

    #[test]
    fn preferred_single_node_wins_over_wider() {
        let p = providers(vec![
            ("r1", vec![h(&[0], true), h(&[1], true)]),
            ("r2", vec![h(&[0], true), h(&[0, 1], false)]),
        ]);
        assert_eq!(best_effort(&p), h(&[0], true));
        let q = providers(vec![
            ("r1", vec![h(&[1], true), h(&[0, 1], false)]),
            ("r2", vec![h(&[0], true), h(&[1], true), h(&[0, 1], false)]),
        ]);
        assert_eq!(best_effort(&q), h(&[1], true));
    }

    #[test]
    fn disjoint_preferred_nodes_fall_back_to_all_nodes() {
        let p = providers(vec![
            ("r1", vec![h(&[0], true)]),
            ("r2", vec![h(&[1], true)]),
        ]);
        assert_eq!(best_effort(&p), h(&[0, 1], false));
        let (hint, admit) =
            merge_with_policy(Policy::Restricted, PolicyOptions::default(), &two(), &p);
        assert_eq!((hint, admit), (h(&[0, 1], false), false));
    }

    #[test]
    fn different_masks_are_not_preferred() {
        let p = providers(vec![
            ("r1", vec![h(&[0], true)]),
            ("r2", vec![h(&[0, 1], true)]),
        ]);
        assert_eq!(best_effort(&p), h(&[0], false));
    }

    #[test]
    fn non_preferred_steers_to_max_of_min_width() {
        let four = NumaInfo::new(vec![0, 1, 2, 3], BTreeMap::new());
        let p = providers(vec![
            ("r1", vec![h(&[0, 1, 2, 3], false), h(&[0, 1], false)]),
            ("r2", vec![h(&[0, 3], false)]),
        ]);
        let got = merge_with_policy(Policy::BestEffort, PolicyOptions::default(), &four, &p).0;
        assert_eq!(got, h(&[0, 3], false));
    }

    #[test]
    fn nil_and_empty_lists() {
        let mut dont_care = ProviderHints::new();
        dont_care.insert("r0".into(), None);
        let mut p = providers(vec![("r1", vec![h(&[1], true)])]);
        p.push(dont_care);
        p.push(ProviderHints::new());
        assert_eq!(best_effort(&p), h(&[1], true));
        let mut impossible = ProviderHints::new();
        impossible.insert("r2".into(), Some(vec![]));
        p.push(impossible);
        assert_eq!(best_effort(&p), h(&[1], false));
    }

    #[test]
    fn single_numa_node_turns_all_nodes_into_nil() {
        let p = providers(vec![("r1", vec![h(&[0, 1], true)])]);
        let (hint, admit) =
            merge_with_policy(Policy::SingleNumaNode, PolicyOptions::default(), &two(), &p);
        assert_eq!(hint, TopologyHint::any(false));
        assert!(!admit);
        let q = providers(vec![("r1", vec![h(&[1], true), h(&[0, 1], false)])]);
        let (hint, admit) =
            merge_with_policy(Policy::SingleNumaNode, PolicyOptions::default(), &two(), &q);
        assert_eq!((hint, admit), (h(&[1], true), true));
    }

    #[test]
    fn prefer_closest_breaks_equal_width_ties_by_distance() {
        let rows = [
            vec![10, 11, 21, 21],
            vec![11, 10, 21, 21],
            vec![21, 21, 10, 11],
            vec![21, 21, 11, 10],
        ];
        let four = NumaInfo::new(
            vec![0, 1, 2, 3],
            rows.into_iter()
                .enumerate()
                .map(|(i, r)| (i as u32, r))
                .collect(),
        );
        let p = providers(vec![("r1", vec![h(&[0, 2], true), h(&[2, 3], true)])]);
        let narrow = merge_with_policy(Policy::BestEffort, PolicyOptions::default(), &four, &p).0;
        assert_eq!(narrow, h(&[0, 2], true));
        let opts = PolicyOptions {
            prefer_closest_numa: true,
            ..PolicyOptions::default()
        };
        let close = merge_with_policy(Policy::BestEffort, opts, &four, &p).0;
        assert_eq!(close, h(&[2, 3], true));
        // single-numa-node ignores the option.
        let q = providers(vec![("r1", vec![h(&[3], true), h(&[1], true)])]);
        assert_eq!(
            merge_with_policy(Policy::SingleNumaNode, opts, &four, &q).0,
            h(&[1], true)
        );
    }
}
