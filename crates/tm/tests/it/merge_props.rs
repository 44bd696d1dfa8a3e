//! Property tests of the merge against invariants that hold in the kubelet.

use proptest::prelude::*;
use topoalign_kube_types::kubelet_settings::{Policy, PolicyOptions};
use topoalign_tm::NumaInfo;
use topoalign_tm::NumaMask;
use topoalign_tm::merge_with_policy;
use topoalign_tm::{ProviderHints, TopologyHint};
use topoalign_tm::{filter_providers_hints, iterate_all_provider_topology_hints};

const NODES: u32 = 4;

fn numa() -> NumaInfo {
    let rows = [
        vec![10, 12, 20, 22],
        vec![12, 10, 22, 20],
        vec![20, 22, 10, 12],
        vec![22, 20, 12, 10],
    ];
    NumaInfo::new(
        (0..NODES).collect(),
        rows.into_iter()
            .enumerate()
            .map(|(i, r)| (i as u32, r))
            .collect(),
    )
}

fn hint() -> impl Strategy<Value = TopologyHint> {
    (0u64..16, any::<bool>()).prop_map(|(m, p)| {
        if m == 0 {
            TopologyHint::any(p)
        } else {
            TopologyHint::new(NumaMask(m), p)
        }
    })
}

fn providers() -> impl Strategy<Value = Vec<ProviderHints>> {
    proptest::collection::vec(
        proptest::collection::vec(
            proptest::option::of(proptest::collection::vec(hint(), 0..4)),
            0..3,
        ),
        1..4,
    )
    .prop_map(|ps| {
        ps.into_iter()
            .map(|rs| {
                rs.into_iter()
                    .enumerate()
                    .map(|(i, l)| (format!("r{i}"), l))
                    .collect()
            })
            .collect()
    })
}

fn opts(closest: bool) -> PolicyOptions {
    PolicyOptions {
        prefer_closest_numa: closest,
        ..PolicyOptions::default()
    }
}

proptest! {
    #[test]
    fn merged_mask_is_inside_a_permutation_of_chosen_masks(p in providers(), closest in any::<bool>()) {
        let info = numa();
        let (best, _) = merge_with_policy(Policy::BestEffort, opts(closest), &info, &p);
        let best_mask = best.affinity.unwrap();
        prop_assert!(!best_mask.is_empty());
        let lists = filter_providers_hints(&p);
        let mut witnessed = best == TopologyHint::new(info.default_affinity(), false);
        iterate_all_provider_topology_hints(&lists, &mut |perm| {
            let inside = perm.iter().all(|h| h.affinity.is_none_or(|m| best_mask.is_subset_of(m)));
            let and = perm
                .iter()
                .filter_map(|h| h.affinity)
                .fold(info.default_affinity(), NumaMask::and);
            if inside && and == best_mask {
                witnessed = true;
            }
        });
        prop_assert!(witnessed, "no permutation yields {best}");
    }

    #[test]
    fn restricted_admits_iff_best_effort_is_preferred(p in providers(), closest in any::<bool>()) {
        let info = numa();
        let (be, be_admit) = merge_with_policy(Policy::BestEffort, opts(closest), &info, &p);
        let (r, r_admit) = merge_with_policy(Policy::Restricted, opts(closest), &info, &p);
        prop_assert!(be_admit);
        prop_assert_eq!(be, r);
        prop_assert_eq!(r_admit, be.preferred);
    }

    #[test]
    fn single_numa_node_admits_at_most_one_node(p in providers()) {
        let info = numa();
        let (h, admit) = merge_with_policy(Policy::SingleNumaNode, opts(false), &info, &p);
        if admit {
            prop_assert!(h.preferred);
            prop_assert!(h.affinity.is_none_or(|m| m.count() == 1));
        }
    }

    #[test]
    fn preferred_result_is_never_wider_than_another_preferred_candidate(p in providers()) {
        let info = numa();
        let (best, _) = merge_with_policy(Policy::BestEffort, opts(false), &info, &p);
        if best.preferred {
            let lists = filter_providers_hints(&p);
            let width = best.affinity.unwrap().count();
            iterate_all_provider_topology_hints(&lists, &mut |perm| {
                let m = topoalign_tm::merge_permutation(info.default_affinity(), perm);
                if m.preferred && !m.affinity.unwrap().is_empty() {
                    assert!(m.affinity.unwrap().count() >= width);
                }
            });
        }
    }

    #[test]
    fn none_policy_admits_with_nil(p in providers()) {
        // policy_none.go: `return TopologyHint{}, true` — nil affinity, not preferred.
        let (h, admit) = merge_with_policy(Policy::None, opts(false), &numa(), &p);
        prop_assert!(admit);
        prop_assert_eq!(h, TopologyHint::any(false));
    }
}
