//! The capacity test and the planner against exhaustive search on small cases: every
//! mix on 1–3 GPUs, and random mixes (proptest).

use std::collections::HashSet;
use std::sync::LazyLock;

use proptest::prelude::*;

use crate::brute::{fleet_mixes, single_gpu_mixes};
use crate::capacity::fits;
use crate::configs::MENU;
use crate::geometry::validate;
use crate::mix::Mix;
use crate::model::{MODELS, SHAPES, lookup};
use crate::planner::{GeometryRequest, plan};

/// What 1, 2 and 3 GPUs can hold, by exhaustive search.
static FLEETS: LazyLock<Vec<HashSet<Mix>>> = LazyLock::new(|| {
    let m = lookup("h100-80gb").unwrap_or(&MODELS[0]);
    let single = single_gpu_mixes(m);
    (0..=3).map(|n| fleet_mixes(&single, n)).collect()
});

/// Every mix with each count up to its most on `gpus` GPUs (plus one).
fn every_mix(gpus: u32) -> Vec<Mix> {
    let mut out = vec![Mix::default()];
    for s in SHAPES {
        let top = u32::from(s.max_per_gpu()) * gpus + 1;
        out = out
            .into_iter()
            .flat_map(|m| {
                (0..=top).map(move |k| {
                    let mut n = m;
                    n[s] = k;
                    n
                })
            })
            .collect();
    }
    out
}

#[test]
fn the_menu_is_every_single_gpu_mix() {
    let menu: HashSet<Mix> = MENU.iter().map(|c| c.mix).collect();
    assert_eq!(menu, FLEETS[1]);
}

#[test]
fn capacity_is_exact_on_one_to_three_gpus() {
    for gpus in 0..=3u32 {
        let fleet = &FLEETS[gpus as usize];
        for m in every_mix(gpus.max(1)) {
            assert_eq!(
                fits(&m, u64::from(gpus)),
                fleet.contains(&m),
                "{m:?} on {gpus} GPUs"
            );
        }
    }
}

/// Plans `want` on `gpus` GPUs of `model` and checks the plan: every GPU valid, placed
/// plus unplaced is the want, and everything placed whenever exhaustive search can.
fn check(model: usize, gpus: u32, want: Mix) {
    let model = &MODELS[model % MODELS.len()];
    let p = plan(&GeometryRequest {
        model,
        gpus,
        nodes: None,
        want,
    })
    .unwrap();
    let mut placed = Mix::default();
    for (i, g) in p.gpus.iter().enumerate() {
        assert_eq!(validate(model, i, &g.instances), Ok(()), "{want:?}");
        for inst in &g.instances {
            if let Some(s) = model.shape(&inst.profile) {
                placed[s] += 1;
            }
        }
    }
    assert_eq!(p.placed, placed.named(model));
    assert_eq!(p.unplaced, want.minus(&placed).named(model));
    assert!(placed.fits_in(&want));
    if let Some(fleet) = FLEETS.get(gpus as usize) {
        assert_eq!(p.complete(), fleet.contains(&want), "{want:?} on {gpus}");
    }
    assert_eq!(p.reasons.is_empty(), p.complete(), "{:?}", p.reasons);
}

#[test]
fn the_planner_places_every_mix_exhaustive_search_can_on_one_and_two_gpus() {
    for gpus in 1..=2 {
        for m in every_mix(gpus) {
            check(0, gpus, m);
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn random_mixes_plan_validly(
        model in 0usize..9,
        gpus in 1u32..=6,
        counts in proptest::array::uniform7(0u32..12),
    ) {
        check(model, gpus, Mix(counts));
    }
}
