//! The kind's plan against each node judged the plain way ([`judge_with_budget`] on its
//! own slices), on random node kinds, names, devices held, claims and budgets.

use std::collections::BTreeSet;

use k8s_openapi::api::resource::v1::{ResourceClaimSpec, ResourceSlice};
use topoalign_dra::{
    DRIVER_NAME,
    alloc::{DEFAULT_BUDGET, DeviceId, NodeDevices},
    attr,
    claim::{ClaimShape, ClaimSpec, claim_spec},
    publish::{PublishOptions, device_classes, resource_slices},
};
use topoalign_rng::Rng;

use super::*;
use crate::dra::judge::{Held, judge_with_budget};

const PROFILES: [&str; 3] = ["mi300x-8", "gb300-4", "dgx-h100"];
/// Names of one kind, some the start of another's.
const NAMES: [&str; 5] = ["n1", "n10", "node-7", "a", "x-n1"];

/// `node`'s slices of `profile`, with the rank of the pair devices named in `unranked`
/// removed (their `rank <= R` selectors cannot be evaluated).
fn slices(profile: &str, node: &str, unranked: &BTreeSet<String>) -> Vec<ResourceSlice> {
    let topo = topoalign_profiles::get(profile).unwrap();
    let mut sl = resource_slices(&topo, node, &PublishOptions::default()).unwrap();
    for s in &mut sl {
        for d in s.spec.devices.iter_mut().flatten() {
            if unranked.contains(&d.name) {
                let attrs = d.attributes.as_mut().unwrap();
                attrs.retain(|k, _| !k.ends_with(attr::RANK));
            }
        }
    }
    sl
}

fn random_claim(rng: &mut Rng, gpus: u32) -> ResourceClaimSpec {
    loop {
        let mut c = ClaimSpec::pairs(1 + rng.below(gpus as usize + 1) as u32);
        c.max_rank = [None, Some(0), Some(1), Some(2), Some(3)][rng.below(5)];
        c.distinct_nics = rng.below(3) == 0;
        if rng.below(4) == 0 {
            c.nics_per_gpu = 2;
        }
        if rng.below(4) == 0 {
            c.shape = ClaimShape::Ladder;
        }
        if let Ok(spec) = claim_spec(&c) {
            return spec;
        }
    }
}

#[test]
fn a_kinds_plan_judges_every_node_of_the_kind_as_its_own_slices() {
    let classes = device_classes();
    let mut rng = Rng::new(24);
    let mut outcomes: BTreeSet<&str> = BTreeSet::new();
    let mut held_tried = 0usize;
    for round in 0..120 {
        let profile = PROFILES[rng.below(PROFILES.len())];
        let gpus = topoalign_profiles::get(profile).unwrap().gpus.len() as u32;
        let all: Vec<String> = NodeDevices::gather(&slices(profile, "n1", &BTreeSet::new()), "n1")
            .unwrap()
            .ids()
            .map(|d| d.device.clone())
            .collect();
        let unranked: BTreeSet<String> = if rng.below(3) == 0 {
            all.iter()
                .filter(|d| d.starts_with("pair-") && rng.below(6) == 0)
                .cloned()
                .collect()
        } else {
            BTreeSet::new()
        };
        let claims: Vec<ResourceClaimSpec> = (0..1 + rng.below(2))
            .map(|_| random_claim(&mut rng, gpus))
            .collect();
        let budget = [DEFAULT_BUDGET, DEFAULT_BUDGET, 3, 40][rng.below(4)];
        let first = NAMES[rng.below(NAMES.len())];
        let plan = KindPlan::new(&claims, &classes, &slices(profile, first, &unranked), first)
            .unwrap_or_else(|e| panic!("round {round}: {e}"));
        for node in NAMES {
            let sl = slices(profile, node, &unranked);
            let share = [0, 10, 30, 60][rng.below(4)];
            let mut held: BTreeSet<DeviceId> = all
                .iter()
                .filter(|_| rng.below(100) < share)
                .map(|d| DeviceId {
                    driver: DRIVER_NAME.into(),
                    pool: node.into(),
                    device: d.clone(),
                })
                .collect();
            if rng.below(4) == 0 {
                // A claim that holds a device the slices no longer publish.
                held.insert(DeviceId {
                    driver: DRIVER_NAME.into(),
                    pool: node.into(),
                    device: "gone".into(),
                });
            }
            held_tried += held.len();
            let want = judge_with_budget(&claims, &classes, &sl, node, &held, budget);
            let got = plan.judge(node, &held, budget);
            assert_eq!(
                format!("{got:?}"),
                format!("{want:?}"),
                "round {round}: {profile} prepared on {first}, judged on {node}, held {held:?}"
            );
            outcomes.insert(match want {
                Ok(DraVerdict::Fit { .. }) => "fit",
                Ok(DraVerdict::Reject(_)) => "reject",
                Ok(DraVerdict::Undecided(_)) => "undecided",
                Ok(DraVerdict::Blind(_)) => "blind",
                Err(_) => "error",
            });
        }
    }
    // Every kind of outcome was compared, not only fits.
    assert_eq!(
        outcomes,
        BTreeSet::from(["error", "fit", "reject", "undecided"]),
    );
    assert!(held_tried > 1000, "{held_tried}");
}

#[test]
fn a_kind_whose_claims_cannot_be_worked_out_has_no_plan() {
    let sl = slices("gb300-4", "n1", &BTreeSet::new());
    let mut claim = claim_spec(&ClaimSpec::pairs(1)).unwrap();
    if let Some(e) = claim
        .devices
        .as_mut()
        .and_then(|d| d.requests.as_mut())
        .and_then(|r| r.first_mut())
        .and_then(|r| r.exactly.as_mut())
    {
        e.device_class_name = "no-such-class".into();
    }
    let err = KindPlan::new(&[claim], &device_classes(), &sl, "n1").unwrap_err();
    assert!(err.to_string().contains("no-such-class"), "{err}");
    // The call's plans hold none for the kind: its nodes are judged the plain way.
    let plans = KindPlans::default();
    let claims = [claim_spec(&ClaimSpec::pairs(1)).unwrap()];
    assert!(plans.get((1, 1), &claims, &[], &sl, "n1").is_none());
    assert!(
        plans
            .get((1, 2), &claims, &device_classes(), &sl, "n1")
            .is_some()
    );
}

#[test]
fn pools_are_renamed_only_where_they_start_with_the_node() {
    assert_eq!(rename_pool("n1", "n1", "n10"), "n10");
    assert_eq!(rename_pool("n1-extra", "n1", "b"), "b-extra");
    assert_eq!(rename_pool("shared", "n1", "b"), "shared");
    assert_eq!(rename_pool("n1", "n1", "n1"), "n1");
}

/// Claims with CPUs of dra-driver-cpu's grouped devices beside the pairs, with other
/// claims' shares of the CPU groups held (some no quantity): the plan judges as the
/// plain way, and the shares decide some verdicts (a pod's later claim also sees its
/// earlier claims' shares).
#[test]
fn a_kinds_plan_holds_other_claims_cpu_shares_as_the_plain_way() {
    use topoalign_dra::alloc::Share;
    use topoalign_dra::claim::{
        CPU_DRIVER, CpuClaim, CpuMode, CpuRelease, CpuShape, cpu_device_class, cpu_slices,
    };
    let topo = topoalign_profiles::get("dgx-h100").unwrap();
    let node_slices = |node: &str| {
        let mut sl = slices("dgx-h100", node, &BTreeSet::new());
        sl.extend(cpu_slices(&topo, node, CpuMode::Grouped, CpuRelease::Main).unwrap());
        sl
    };
    let mut classes = device_classes();
    classes.push(cpu_device_class("dra.cpu"));
    let per_group = topo.numa[0].cpus.len() as u32;
    let mut rng = Rng::new(33);
    let (mut fits, mut rejects, mut errors, mut decided_by_shares) = (0, 0, 0, 0);
    for round in 0..60 {
        let claims: Vec<ResourceClaimSpec> = (0..1 + rng.below(2))
            .map(|_| {
                let pairs = 1 + rng.below(4) as u32;
                let mut c = ClaimSpec::pairs(pairs);
                c.cpus = Some(CpuClaim {
                    shape: [CpuShape::PerGpu, CpuShape::OneNode][rng.below(2)],
                    ..CpuClaim::new(pairs * (1 + rng.below(per_group as usize / 2) as u32))
                });
                claim_spec(&c).unwrap()
            })
            .collect();
        let first = NAMES[rng.below(NAMES.len())];
        let plan = KindPlan::new(&claims, &classes, &node_slices(first), first)
            .unwrap_or_else(|e| panic!("round {round}: {e}"));
        for node in NAMES {
            let sl = node_slices(node);
            let mut shares: Vec<Share> = Vec::new();
            for numa in 0..2u32 {
                for _ in 0..rng.below(3) {
                    let quantity = if rng.below(40) == 0 {
                        "lots".to_string()
                    } else {
                        rng.below(per_group as usize / 2 + 1).to_string()
                    };
                    shares.push(Share {
                        device: DeviceId {
                            driver: CPU_DRIVER.into(),
                            pool: node.into(),
                            device: format!("cpudevnuma{numa:03}"),
                        },
                        capacity: "dra.cpu/cpu".into(),
                        quantity,
                    });
                }
            }
            let none = BTreeSet::new();
            let held = Held {
                devices: &none,
                shares: &shares,
            };
            let want = judge_with_budget(&claims, &classes, &sl, node, held, DEFAULT_BUDGET);
            let got = plan.judge(node, held, DEFAULT_BUDGET);
            assert_eq!(
                format!("{got:?}"),
                format!("{want:?}"),
                "round {round}: prepared on {first}, judged on {node}, shares {shares:?}"
            );
            let free = judge_with_budget(&claims, &classes, &sl, node, &none, DEFAULT_BUDGET);
            if format!("{free:?}") != format!("{want:?}") {
                decided_by_shares += 1;
            }
            match want {
                Ok(DraVerdict::Fit { .. }) => fits += 1,
                Ok(_) => rejects += 1,
                Err(_) => errors += 1,
            }
        }
    }
    assert!(
        fits > 20 && rejects > 20 && errors > 0 && decided_by_shares > 20,
        "fits {fits}, rejects {rejects}, errors {errors}, changed by shares {decided_by_shares}"
    );
}
