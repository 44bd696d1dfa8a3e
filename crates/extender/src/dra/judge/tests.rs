//! Unit tests of the DRA judgement: allocation search, scores, capacity levels.

use super::*;
use topoalign_dra::{
    claim::{ClaimSpec, claim_spec},
    publish::{PublishOptions, device_classes, resource_slices},
};

fn slices(profile: &str, node: &str) -> Vec<ResourceSlice> {
    let topo = topoalign_profiles::get(profile).unwrap();
    resource_slices(&topo, node, &PublishOptions::default()).unwrap()
}

fn pairs(n: u32, max_rank: Option<u32>) -> ResourceClaimSpec {
    let mut c = ClaimSpec::pairs(n);
    c.max_rank = max_rank;
    claim_spec(&c).unwrap()
}

fn fit(v: &DraVerdict) -> (DraFit, BTreeSet<DeviceId>) {
    match v {
        DraVerdict::Fit { fit, devices } => (fit.clone(), devices.clone()),
        other => panic!("{other:?}"),
    }
}

#[test]
fn free_nodes_fit_and_held_pairs_are_not_given_twice() {
    let classes = device_classes();
    for profile in ["mi300x-8", "gb300-4", "dgx-h100"] {
        let sl = slices(profile, "n1");
        let gpus = topoalign_profiles::get(profile).unwrap().gpus.len() as u32;
        let none = BTreeSet::new();
        let v = judge(&[pairs(2, None)], &classes, &sl, "n1", &none);
        let (f, _) = fit(&v.unwrap());
        assert_eq!(f.ranks.len(), 2, "{profile}");
        assert_eq!(
            (f.gpus, f.capacity_before, f.capacity_after),
            (2, gpus as usize, gpus as usize - 2),
            "{profile}"
        );
        let points = dra_points(&f.ranks, f.spoiled);
        // Rounds to 1 ..= 10.
        assert!((0.5..=10.0).contains(&points), "{profile}: {f:?}");
        // Every GPU taken by one claim: nothing is left for the next.
        let all = judge(&[pairs(gpus, None)], &classes, &sl, "n1", &none).unwrap();
        let (f, held) = fit(&all);
        assert_eq!(f.capacity_after, 0, "{profile}");
        let v = judge(&[pairs(1, None)], &classes, &sl, "n1", &held).unwrap();
        assert!(
            matches!(v, DraVerdict::Reject(ref m) if m.contains("claim 0")),
            "{profile}: {v:?}"
        );
        // Two claims of one pod: the second sees the first's devices taken.
        let half = gpus / 2;
        let v = judge(
            &[pairs(half, None), pairs(gpus - half, None)],
            &classes,
            &sl,
            "n1",
            &none,
        )
        .unwrap();
        assert_eq!(fit(&v).0.ranks.len(), gpus as usize, "{profile}");
        let v = judge(
            &[pairs(half, None), pairs(gpus - half + 1, None)],
            &classes,
            &sl,
            "n1",
            &none,
        )
        .unwrap();
        assert!(
            matches!(v, DraVerdict::Reject(ref m) if m.contains("claim 1")),
            "{profile}: {v:?}"
        );
        // Slices of another node are not this node's.
        let v = judge(&[pairs(1, None)], &classes, &sl, "n2", &none).unwrap();
        assert!(matches!(v, DraVerdict::Reject(_)), "{profile}: {v:?}");
    }
}

#[test]
fn a_required_pair_class_drops_nodes_that_cannot_reach_it() {
    let classes = device_classes();
    let none = BTreeSet::new();
    for profile in ["mi300x-8", "gb300-4", "dgx-h100"] {
        let sl = slices(profile, "n1");
        let (f, _) = fit(&judge(&[pairs(1, None)], &classes, &sl, "n1", &none).unwrap());
        let best = f.ranks[0];
        // The best class the node has is reachable; a better one is not.
        let at = pairs(1, Some(best as u32));
        assert!(matches!(
            judge(&[at], &classes, &sl, "n1", &none).unwrap(),
            DraVerdict::Fit { .. }
        ));
        if best > 0 {
            let better = pairs(1, Some(best as u32 - 1));
            let v = judge(&[better], &classes, &sl, "n1", &none).unwrap();
            assert!(matches!(v, DraVerdict::Reject(_)), "{profile}: {v:?}");
        }
        // Once every pair of the best class is held, the bound filters the node.
        let gpus = topoalign_profiles::get(profile).unwrap().gpus.len() as u32;
        let (_, held) = fit(&judge(&[pairs(gpus, None)], &classes, &sl, "n1", &none).unwrap());
        let v = judge(&[pairs(1, Some(best as u32))], &classes, &sl, "n1", &held).unwrap();
        assert!(matches!(v, DraVerdict::Reject(_)), "{profile}: {v:?}");
    }
}

#[test]
fn small_pods_keep_halves_and_quarters_but_not_whole_nodes() {
    let classes = device_classes();
    let mi = slices("mi300x-8", "n1");
    let gb = slices("gb300-4", "n2");
    let none = BTreeSet::new();
    let judge_fit = |sl: &[ResourceSlice], node: &str, n: u32, held: &BTreeSet<DeviceId>| {
        fit(&judge(&[pairs(n, None)], &classes, sl, node, held).unwrap())
    };
    // mi300x-8 half held by another claim (4 pairs left), a free gb300-4 (4 pairs),
    // a free mi300x-8 (8 pairs).
    let (_, half) = judge_fit(&mi, "n1", 4, &none);
    let (used_mi, _) = judge_fit(&mi, "n1", 1, &half);
    let (free_gb, _) = judge_fit(&gb, "n2", 1, &none);
    let (free_mi, _) = judge_fit(&mi, "n1", 1, &none);
    assert_eq!(
        (
            used_mi.capacity_before,
            used_mi.capacity_after,
            used_mi.capacity_whole
        ),
        (4, 3, 8)
    );
    assert_eq!(
        (
            free_gb.capacity_before,
            free_gb.capacity_after,
            free_gb.capacity_whole
        ),
        (4, 3, 4)
    );
    assert_eq!(
        (
            free_mi.capacity_before,
            free_mi.capacity_after,
            free_mi.capacity_whole
        ),
        (8, 7, 8)
    );
    let levels = CapacityLevels::of([4, 4, 8]);
    assert_eq!(
        (
            levels.holding(1),
            levels.holding(2),
            levels.holding(4),
            levels.holding(8)
        ),
        (3, 3, 3, 1)
    );
    // Breaking up a half (4 of 8 pairs) that three nodes have costs a third of the
    // weight; a whole node is not kept, even the last one that holds 8.
    let w = CAPACITY_WEIGHT;
    assert_eq!(capacity_penalty(&free_mi, &levels, w), 0.0);
    assert_eq!(capacity_penalty(&free_gb, &levels, w), 0.0);
    assert_eq!(capacity_penalty(&used_mi, &levels, w), w / 3.0);
    let score = |f: &DraFit| dra_score(f, &levels, w);
    assert_eq!(dra_points(&free_mi.ranks, 0), 10.0);
    assert_eq!(dra_points(&free_gb.ranks, 0), 2.5);
    // 10 - 16.7 → (10 - 6.7) / 2; NODE pairs on the free gb300-4 → (2.5 + 10) / 2.
    assert_eq!(score(&free_mi), 10);
    assert_eq!(score(&free_gb), 6);
    assert_eq!(score(&used_mi), 2);
    // The more nodes hold the half, the less breaking one up costs: 10 - 10.
    let many = CapacityLevels::of([4, 4, 4, 8, 8]);
    assert_eq!(dra_score(&used_mi, &many, w), 5);
    // A pod on a node with 5 pairs left keeps its half: nothing used up.
    let (_, three) = judge_fit(&mi, "n1", 3, &none);
    let (five, _) = judge_fit(&mi, "n1", 1, &three);
    assert_eq!((five.capacity_before, five.capacity_after), (5, 4));
    assert_eq!(capacity_penalty(&five, &levels, w), 0.0);
    // Without a weight, pair quality alone.
    assert_eq!(dra_score(&used_mi, &levels, 0.0), 10);
    // A pod that fills a node, or takes a whole node, uses up nothing beyond itself.
    let (all, _) = judge_fit(&mi, "n1", 8, &none);
    assert_eq!(all.gpus, 8);
    assert_eq!(capacity_penalty(&all, &levels, w), 0.0);
    let (rest, _) = judge_fit(&mi, "n1", 4, &half);
    assert_eq!(capacity_penalty(&rest, &levels, w), 0.0);
    // A 2-pair pod on a node of 3 pairs leaves 1: levels 1 and 2 are its own size.
    let three = DraFit {
        ranks: vec![0, 0],
        spoiled: 0,
        gpus: 2,
        capacity_before: 3,
        capacity_after: 1,
        capacity_whole: 8,
    };
    assert_eq!(capacity_penalty(&three, &levels, w), 0.0);
    // A NIC held taking two pairs' worth on a node of 16: the levels above the pod
    // and below the whole node are counted.
    let nics = DraFit {
        ranks: vec![],
        spoiled: 0,
        gpus: 0,
        capacity_before: 8,
        capacity_after: 6,
        capacity_whole: 16,
    };
    assert_eq!(capacity_penalty(&nics, &CapacityLevels::of([8]), 1.0), 1.0);
    // NODE pairs on a node in use (3 pairs → 2): (2.5 + 10) / 2.
    let (_, gb_held) = judge_fit(&gb, "n2", 1, &none);
    let (gb_used, _) = judge_fit(&gb, "n2", 1, &gb_held);
    assert_eq!(gb_used.ranks, [3]);
    assert_eq!(capacity_penalty(&gb_used, &levels, w), 0.0);
    assert_eq!(score(&gb_used), 6);
    assert_eq!(dra_points(&[0, 0], 0), 10.0);
    assert_eq!(dra_points(&[3, 3], 0), 2.5);
    assert_eq!(dra_points(&[0], 4), 9.0);
    assert_eq!(dra_points(&[0], 100), 8.0);
    assert_eq!(dra_points(&[], 0), 10.0);
    assert_eq!(CapacityLevels::of([]).holding(8), 0);
}

#[test]
fn allocated_claims_name_their_devices() {
    let claim: ResourceClaim = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "c"},
        "spec": {},
        "status": {"allocation": {"devices": {"results": [
            {"request": "pairs", "driver": DRIVER_NAME, "pool": "n1", "device": "pair-a"}
        ]}}}
    }))
    .unwrap();
    let ids = allocated_ids([&claim]);
    assert_eq!(ids.len(), 1);
    assert_eq!(ids.iter().next().unwrap().device, "pair-a");
}

#[test]
fn foreign_pairs_score_by_class_first_then_capacity() {
    let fit = |ranks: Vec<i64>, before, after| DraFit {
        ranks,
        spoiled: 0,
        gpus: 1,
        capacity_before: before,
        capacity_after: after,
        capacity_whole: 8,
    };
    // Four candidates that can hold 2 pairs, one that can hold 4 (of its 8).
    let levels = CapacityLevels::of([2, 2, 2, 2, 4]);
    let node_keeps = foreign_score(&fit(vec![3], 3, 2), &levels, 50.0);
    let node_breaks_4 = foreign_score(&fit(vec![3], 4, 3), &levels, 50.0);
    let sys_keeps = foreign_score(&fit(vec![4], 3, 2), &levels, 50.0);
    let phb = foreign_score(&fit(vec![2], 3, 2), &levels, 50.0);
    assert_eq!((phb, node_keeps, node_breaks_4, sys_keeps), (10, 8, 6, 4));
    // The worst pair decides: one cross-NUMA pair of two is cross-NUMA.
    assert_eq!(foreign_score(&fit(vec![3, 4], 3, 2), &levels, 50.0), 4);
    // Same-NUMA always above the neutral score, cross-NUMA always below.
    for w in [0.0, 50.0, 1e9] {
        assert!(foreign_score(&fit(vec![3], 4, 3), &levels, w) > crate::score::NEUTRAL_SCORE);
        assert!(foreign_score(&fit(vec![4], 3, 2), &levels, w) < crate::score::NEUTRAL_SCORE);
    }
    assert_eq!(foreign_score(&fit(vec![], 3, 2), &levels, 50.0), 10);
}
