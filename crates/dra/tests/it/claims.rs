//! Claims: shapes, limits, and what the stock allocator does with them on each profile.

use std::collections::BTreeSet;

use k8s_openapi::api::resource::v1::{DeviceAttribute, ResourceSlice};
use serde_json::Value;
use topoalign_dra::alloc::NodeDevices;
use topoalign_dra::claim::stand_in_classes;
use topoalign_dra::explain::{mark_usage, resolve_with};
use topoalign_dra::{
    DraError,
    alloc::{ClaimSearch, first_fit},
    claim::{
        ClaimShape, ClaimSpec, MixedSpec, MixedStrategy, claim_spec, claim_template, mixed_claim,
        resource_claim,
    },
    explain::explain,
    publish::{Inventory, PublishOptions, device_classes, slices_for},
};
use topoalign_plan::{NicCount, NicRole, Request, Usage};
use topoalign_profiles as profiles;
use topoalign_topology::{Bdf, Topology};

const BUDGET: u64 = 5_000_000;

fn spec(n: u32) -> ClaimSpec {
    ClaimSpec::pairs(n)
}

#[test]
fn claim_shapes_snapshot() {
    let mut ladder = spec(2);
    ladder.shape = ClaimShape::Ladder;
    let mut k2 = spec(2);
    k2.nics_per_gpu = 2;
    let mut strict = spec(4);
    strict.max_rank = Some(1);
    strict.require_gdr = true;
    strict.distinct_nics = true;
    strict.namespace = Some("team-a".into());
    insta::assert_json_snapshot!("template-pairs-4", claim_template(&spec(4)).unwrap());
    insta::assert_json_snapshot!("claim-pairs-4-strict", resource_claim(&strict).unwrap());
    insta::assert_json_snapshot!("claim-pairs-2-k2", claim_spec(&k2).unwrap());
    insta::assert_json_snapshot!("claim-ladder-2", claim_spec(&ladder).unwrap());
}

#[test]
fn impossible_claims_are_refused_with_the_limit() {
    let cases: Vec<(ClaimSpec, &str)> = vec![
        (spec(0), "at least 1"),
        (spec(33), "at most 32"),
        (
            {
                let mut s = spec(2);
                s.nics_per_gpu = 0;
                s
            },
            "nics-per-gpu",
        ),
        (
            {
                let mut s = spec(12);
                s.nics_per_gpu = 3;
                s
            },
            "36 devices",
        ),
        (
            {
                let mut s = spec(17);
                s.shape = ClaimShape::Ladder;
                s
            },
            "34 devices",
        ),
        (
            {
                let mut s = spec(16);
                s.nics_per_gpu = 2;
                s
            },
            "constraints",
        ),
        (
            {
                let mut s = spec(2);
                s.max_rank = Some(4);
                s
            },
            "rank 4",
        ),
        (
            {
                let mut s = spec(2);
                s.name = "Bad_Name".into();
                s
            },
            "Bad_Name",
        ),
        (
            {
                let mut s = spec(2);
                s.namespace = Some("a.b".into());
                s
            },
            "namespace",
        ),
    ];
    for (s, want) in cases {
        let e = claim_spec(&s).unwrap_err();
        assert!(e.to_string().contains(want), "{e} lacks {want}");
    }
}

struct Node {
    topo: Topology,
    inv: Inventory,
    slices: Vec<ResourceSlice>,
}

fn node(profile: &str) -> Node {
    let topo = profiles::get(profile).unwrap();
    let inv = Inventory::new(&topo, &PublishOptions::default());
    let slices = slices_for(&inv, "n1", 1).unwrap();
    Node { topo, inv, slices }
}

fn request(n: usize, k: usize) -> Request {
    let mut r = Request::new(n, NicCount::PerGpu(k));
    r.require_rdma = true;
    r.nic_role = NicRole::Pf;
    r
}

/// Pair claims of every size on every profile, on an empty node and on a fragmented one:
/// the allocator's first solution is as good as the planner's optimum.
#[test]
fn pair_claims_get_the_optimal_classes_from_first_fit() {
    let mut checked = 0;
    for profile in profiles::NAMES {
        let nd = node(profile);
        let gpus = nd.topo.gpus.len();
        let fragmented = Usage {
            gpus: nd.inv.gpus.iter().step_by(3).map(|g| g.bdf).collect(),
            ..Usage::empty()
        };
        for usage in [Usage::empty(), fragmented] {
            for n in 1..=gpus as u32 {
                let mut free = NodeDevices::gather(&nd.slices, "n1").unwrap();
                assert!(mark_usage(&mut free, &nd.inv, "n1", &usage).is_empty());
                let claim = claim_spec(&spec(n)).unwrap();
                let e = explain(
                    &claim,
                    &device_classes(),
                    &free,
                    BUDGET,
                    &nd.topo,
                    &request(n as usize, 1),
                    &usage,
                    resolve_with(&nd.inv),
                )
                .unwrap();
                assert!(!e.outcome.gave_up, "{profile} n={n}: search ran out");
                if let (Some(a), Some(p)) = (&e.allocator, &e.planner) {
                    assert_eq!(
                        (a.worst, a.rank_sum),
                        (p.worst, p.rank_sum),
                        "{profile} n={n}"
                    );
                    let used: BTreeSet<Bdf> = usage.gpus.iter().copied().collect();
                    let gpus: BTreeSet<Bdf> = a.pairs.iter().map(|p| p.gpu).collect();
                    assert_eq!(gpus.len(), n as usize, "distinct GPUs");
                    assert!(
                        gpus.is_disjoint(&used),
                        "{profile}: a used GPU was allocated"
                    );
                    checked += 1;
                } else if e.allocator.is_some() {
                    // The pair shape may share a physical NIC through VFs where the
                    // planner (one PF per GPU) finds nothing: never the other way round.
                    assert!(
                        nd.inv.nics.iter().any(|n| n.functions.len() > 1),
                        "{profile} n={n}"
                    );
                } else {
                    assert!(
                        e.planner.is_none(),
                        "{profile} n={n}: allocator found nothing, planner did"
                    );
                }
            }
        }
    }
    assert!(checked >= 30, "only {checked} comparisons");
}

/// The cost of an unsatisfiable claim stays small with one pair per GPU × physical NIC.
#[test]
fn unsatisfiable_pair_claim_on_mi300x_is_refused_after_a_bounded_search() {
    let nd = node("mi300x-8");
    let mut free = NodeDevices::gather(&nd.slices, "n1").unwrap();
    // Half the GPUs in use: 8 pairs cannot be had.
    let usage = Usage {
        gpus: nd.inv.gpus.iter().take(4).map(|g| g.bdf).collect(),
        ..Usage::empty()
    };
    mark_usage(&mut free, &nd.inv, "n1", &usage);
    let claim = claim_spec(&spec(8)).unwrap();
    let out = first_fit(&claim, &device_classes(), &free, BUDGET).unwrap();
    assert!(out.allocation.is_none());
    assert!(
        !out.gave_up,
        "the search finished: {} devices tried",
        out.steps
    );
    println!(
        "FIGURE unsatisfiable 8 pairs on half-used mi300x-8: {} devices tried",
        out.steps
    );
}

/// A claim prepared once and searched with devices in use is `first_fit` after
/// `mark_in_use` of the same devices: the same devices, steps and verdict, budget or not
/// (pair devices consume counters, so a held pair also holds its GPU and NIC function).
#[test]
fn a_prepared_claim_searches_as_first_fit_after_mark_in_use() {
    let mut rng = crate::common::Rng::new(25);
    let mut gave_up = 0;
    for profile in profiles::NAMES {
        let nd = node(profile);
        let full = NodeDevices::gather(&nd.slices, "n1").unwrap();
        let ids: Vec<_> = full.ids().cloned().collect();
        for n in 1..=nd.topo.gpus.len() as u32 {
            let mut strict = spec(n);
            strict.distinct_nics = true;
            for s in [spec(n), strict] {
                let claim = claim_spec(&s).unwrap();
                let prepared = ClaimSearch::new(&claim, &device_classes(), &full).unwrap();
                for density in [0, 20, 50] {
                    let in_use: Vec<bool> = ids.iter().map(|_| rng.below(100) < density).collect();
                    let held = (ids.iter().zip(&in_use))
                        .filter(|(_, u)| **u)
                        .map(|(id, _)| id.clone())
                        .collect();
                    let mut free = full.clone();
                    free.mark_in_use(&held);
                    for budget in [10, 200, BUDGET] {
                        let want = first_fit(&claim, &device_classes(), &free, budget).unwrap();
                        let got = prepared.search(&in_use, budget);
                        let named = got.devices.map(|d| {
                            d.into_iter()
                                .map(|i| ids[i].device.clone())
                                .collect::<Vec<_>>()
                        });
                        let want_named = (want.allocation.as_ref())
                            .map(|a| a.iter().map(|r| r.device.clone()).collect::<Vec<_>>());
                        let what = format!("{profile} {n} pairs {density}% held, budget {budget}");
                        assert_eq!(named, want_named, "{what}");
                        assert_eq!(
                            (got.steps, got.gave_up),
                            (want.steps, want.gave_up),
                            "{what}"
                        );
                        gave_up += usize::from(got.gave_up);
                    }
                }
            }
        }
    }
    assert!(gave_up > 0, "no search ran out of budget");
}

#[test]
fn ladder_claims_get_switch_local_nics_on_mi300x() {
    let nd = node("mi300x-8");
    let free = NodeDevices::gather(&nd.slices, "n1").unwrap();
    let mut s = spec(4);
    s.shape = ClaimShape::Ladder;
    let claim = claim_spec(&s).unwrap();
    let e = explain(
        &claim,
        &device_classes(),
        &free,
        BUDGET,
        &nd.topo,
        &request(4, 1),
        &Usage::empty(),
        resolve_with(&nd.inv),
    )
    .unwrap();
    let a = e.allocator.unwrap();
    assert_eq!(a.worst.map(|c| c.as_str()), Some("PIX"));
    let results = e.outcome.allocation.unwrap();
    assert!(
        results.iter().any(|r| r.request == "gpu-0/switch"),
        "{results:?}"
    );
    assert!(e.as_good);
}

#[test]
fn two_nics_per_gpu_are_distinct_physical_nics() {
    let nd = node("dgx-h100");
    let free = NodeDevices::gather(&nd.slices, "n1").unwrap();
    let mut s = spec(2);
    s.nics_per_gpu = 2;
    let claim = claim_spec(&s).unwrap();
    let out = first_fit(&claim, &device_classes(), &free, BUDGET).unwrap();
    let results = out.allocation.unwrap();
    let nics: Vec<String> = results
        .iter()
        .filter_map(|r| nd.inv.device(&r.device))
        .filter_map(|d| d.nic().map(|n| n.name.clone()))
        .collect();
    assert_eq!(nics.len(), 4);
    assert_eq!(nics.iter().collect::<BTreeSet<_>>().len(), 4, "{nics:?}");
}

fn seed001() -> Vec<ResourceSlice> {
    let path = format!(
        "{}/tests/fixtures/seed001-gb300-slices.json",
        env!("CARGO_MANIFEST_DIR")
    );
    let v: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    serde_json::from_value(v["items"].clone()).unwrap()
}

fn mixed(n: u32, k: u32) -> MixedSpec {
    MixedSpec {
        node: "aks-gb300-0".into(),
        pairs: n,
        nics_per_gpu: k,
        gpu_driver: "gpu.nvidia.com".into(),
        gpu_class: "gpu.nvidia.com".into(),
        nic_driver: "dra.net".into(),
        nic_class: "dranet".into(),
    }
}

/// Seed 001: pcieRoot is shared by no GPU and NIC on GB300 and the two drivers publish
/// no common NUMA attribute, so the claim is pinned, as the seed's author did by hand.
#[test]
fn seed001_mixed_drivers_get_the_hand_written_pinned_claim() {
    let slices = seed001();
    let gb300 = profiles::get("gb300-4").unwrap();
    // Without the node's topology the GPUs' NUMA node is unknown (the GPU driver does
    // not publish it): pairing would be a guess, so it is refused, naming what is
    // missing and the flags that supply it.
    let blind = mixed_claim(&slices, &mixed(1, 1), None).unwrap_err();
    let text = blind.to_string();
    assert!(matches!(blind, DraError::Blind { .. }), "{text}");
    for want in [
        "node aks-gb300-0",
        "4 of 4 GPUs of gpu.nvidia.com",
        "publish no NUMA node",
        "resource.kubernetes.io/numaNode",
        "--profile NAME",
        "--from-nccl-xml FILE",
    ] {
        assert!(text.contains(want), "{want:?} missing from {text}");
    }
    assert!(
        !text.contains("NICs of dra.net"),
        "dranet publishes its NUMA node: {text}"
    );
    let m = mixed_claim(&slices, &mixed(1, 1), Some(&gb300)).unwrap();
    let MixedStrategy::Pinned { pairs, .. } = &m.strategy else {
        panic!("{:?}", m.strategy)
    };
    assert_eq!(
        pairs,
        &vec![(
            "gpu-0".to_string(),
            vec!["pci-0101-00-00-0".to_string()],
            "NODE".to_string()
        )]
    );
    assert!(
        m.notes
            .iter()
            .any(|n| n.contains("pcieRoot") && n.contains("at most 0")),
        "{:?}",
        m.notes
    );
    let reqs = m.spec.devices.as_ref().unwrap().requests.as_ref().unwrap();
    let sel = |i: usize| {
        reqs[i]
            .exactly
            .as_ref()
            .unwrap()
            .selectors
            .as_ref()
            .unwrap()[0]
            .cel
            .as_ref()
            .unwrap()
            .expression
            .clone()
    };
    assert_eq!(
        sel(0),
        r#"device.attributes["resource.kubernetes.io"]["pciBusID"] == "0008:06:00.0""#
    );
    assert_eq!(
        sel(1),
        r#"device.attributes["dra.net"]["pciAddress"] == "0101:00:00.0""#
    );
    assert_eq!(
        reqs[1].exactly.as_ref().unwrap().device_class_name,
        "dranet"
    );

    // 2 GPUs with 2 NICs each: both NUMA nodes, NODE pairs only.
    let m = mixed_claim(&slices, &mixed(2, 2), Some(&gb300)).unwrap();
    let MixedStrategy::Pinned { pairs, .. } = &m.strategy else {
        panic!()
    };
    assert!(
        pairs.iter().all(|p| p.1.len() == 2 && p.2 == "NODE"),
        "{pairs:?}"
    );

    // The stock allocator satisfies the pinned claim with exactly those devices.
    let classes = stand_in_classes(&mixed(1, 1));
    let free = NodeDevices::gather(&slices, "aks-gb300-0").unwrap();
    let m = mixed_claim(&slices, &mixed(1, 1), Some(&gb300)).unwrap();
    let out = first_fit(&m.spec, &classes, &free, BUDGET).unwrap();
    let got: Vec<String> = out
        .allocation
        .unwrap()
        .into_iter()
        .map(|r| r.device)
        .collect();
    assert_eq!(got, vec!["gpu-0", "pci-0101-00-00-0"]);
}

#[test]
fn a_common_numa_attribute_gives_a_portable_match_attribute_claim() {
    let mut slices = seed001();
    for s in &mut slices {
        for d in s.spec.devices.iter_mut().flatten() {
            let attrs = d.attributes.get_or_insert_default();
            let numa = attrs
                .get("dra.net/numaNode")
                .and_then(|a| a.int)
                .unwrap_or_else(|| {
                    if d.name == "gpu-2" || d.name == "gpu-3" {
                        1
                    } else {
                        0
                    }
                });
            attrs.insert(
                "resource.kubernetes.io/numaNode".into(),
                DeviceAttribute {
                    int: Some(numa),
                    ..Default::default()
                },
            );
        }
    }
    let m = mixed_claim(&slices, &mixed(2, 1), None).unwrap();
    assert_eq!(
        m.strategy,
        MixedStrategy::MatchAttribute {
            attribute: "resource.kubernetes.io/numaNode".into()
        }
    );
    let classes = stand_in_classes(&mixed(2, 1));
    let free = NodeDevices::gather(&slices, "aks-gb300-0").unwrap();
    let out = first_fit(&m.spec, &classes, &free, BUDGET).unwrap();
    assert_eq!(out.allocation.unwrap().len(), 4);
}

#[test]
fn mixed_input_errors_name_the_problem() {
    let slices = seed001();
    let mut s = mixed(1, 1);
    s.node = "nope".into();
    let e = mixed_claim(&slices, &s, None).unwrap_err();
    assert!(
        matches!(e, DraError::BadSlice { .. }) && e.to_string().contains("nope"),
        "{e}"
    );
    let gb300 = profiles::get("gb300-4").unwrap();
    let e = mixed_claim(&slices, &mixed(5, 1), Some(&gb300)).unwrap_err();
    assert!(matches!(e, DraError::Plan(_)), "{e}");
}
