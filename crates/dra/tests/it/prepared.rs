//! [`ClaimSearch::try_search`] is [`first_fit`] after [`NodeDevices::mark_in_use`] of
//! the same devices: the same devices, steps and verdict, and the same error where a
//! selector cannot be evaluated on a device left free (random claims, devices in use,
//! budgets, and pair devices that publish no rank).

use std::collections::BTreeSet;
use std::sync::Arc;

use topoalign_dra::{
    alloc::{ClaimSearch, DeviceId, NodeDevices, first_fit},
    attr,
    claim::{ClaimShape, ClaimSpec, claim_spec},
    publish::{PublishOptions, device_classes, resource_slices},
};
use topoalign_rng::Rng;

#[test]
fn a_deferred_claim_searches_and_fails_as_first_fit_after_mark_in_use() {
    let classes = device_classes();
    let mut rng = Rng::new(7);
    let mut seen: BTreeSet<&str> = BTreeSet::new();
    for round in 0..150 {
        let profile = ["mi300x-8", "gb300-4", "dgx-h100"][rng.below(3)];
        let topo = topoalign_profiles::get(profile).unwrap();
        let mut slices = resource_slices(&topo, "n1", &PublishOptions::default()).unwrap();
        let unranked = rng.below(2) == 0;
        for s in &mut slices {
            for d in s.spec.devices.iter_mut().flatten() {
                if unranked && d.name.starts_with("pair-") && rng.below(8) == 0 {
                    d.attributes
                        .as_mut()
                        .unwrap()
                        .retain(|k, _| !k.ends_with(attr::RANK));
                }
            }
        }
        let mut c = ClaimSpec::pairs(1 + rng.below(topo.gpus.len()) as u32);
        c.max_rank = [None, Some(0), Some(1), Some(3)][rng.below(4)];
        c.distinct_nics = rng.below(2) == 0;
        if rng.below(4) == 0 {
            c.shape = ClaimShape::Ladder;
        }
        let Ok(claim) = claim_spec(&c) else {
            continue;
        };
        let all = NodeDevices::gather(&slices, "n1").unwrap();
        let prepared = ClaimSearch::deferred(&claim, &classes, Arc::new(all.clone())).unwrap();
        for _ in 0..6 {
            let share = [0, 20, 50][rng.below(3)];
            let in_use: Vec<bool> = (0..all.len()).map(|_| rng.below(100) < share).collect();
            let ids: BTreeSet<DeviceId> = all
                .ids()
                .zip(&in_use)
                .filter(|(_, u)| **u)
                .map(|(d, _)| d.clone())
                .collect();
            let budget = [100_000, 30][rng.below(2)];
            let mut free = all.clone();
            free.mark_in_use(&ids);
            let want = first_fit(&claim, &classes, &free, budget);
            let got = prepared.try_search(&in_use, budget);
            match (&want, &got) {
                (Ok(w), Ok(g)) => {
                    let named = g.devices.as_ref().map(|places| {
                        places
                            .iter()
                            .map(|p| all.id(*p).unwrap().device.clone())
                            .collect::<Vec<_>>()
                    });
                    let want_named = w
                        .allocation
                        .as_ref()
                        .map(|a| a.iter().map(|d| d.device.clone()).collect::<Vec<_>>());
                    assert_eq!(named, want_named, "round {round}");
                    assert_eq!((g.steps, g.gave_up), (w.steps, w.gave_up), "round {round}");
                    seen.insert(match (&w.allocation, w.gave_up) {
                        (Some(_), _) => "fit",
                        (None, true) => "gave up",
                        (None, false) => "none",
                    });
                }
                (Err(w), Err(g)) => {
                    assert_eq!(g.to_string(), w.to_string(), "round {round}");
                    seen.insert("error");
                }
                _ => panic!("round {round}: {want:?} vs {got:?}"),
            }
        }
    }
    assert_eq!(
        seen,
        BTreeSet::from(["error", "fit", "gave up", "none"]),
        "every outcome compared"
    );
}
