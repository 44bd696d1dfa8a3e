//! Dynamic MIG in the pool: every placement of every DGX H100 GPU published (with its
//! MIG×NIC pairs; the whole GPU, in MIG mode, is not offered), within the API limits,
//! and the stock allocator's model over it: first fit packs one GPU before the next and keeps 4g@0 / 3g@4
//! reachable, and a random stream of claims and releases never gives a memory slice
//! twice.

use std::collections::{BTreeMap, BTreeSet};

use topoalign_dra::{
    alloc::{NodeDevices, first_fit},
    claim::{ClaimSpec, mig_claim_spec},
    publish::{Inventory, NodeMig, PublishOptions, slices_for},
};
use topoalign_profiles as profiles;
use topoalign_topology::Bdf;

use crate::mig_pool::{BUDGET, Claim, Node, Stream, allocate, classes, id, mig, random_stream};

fn dynamic_node(name: &str) -> Node {
    let topo = profiles::get(name).unwrap();
    let opts = PublishOptions {
        mig: NodeMig::dynamic(&topo, None).unwrap(),
        ..Default::default()
    };
    let inv = Inventory::new(&topo, &opts);
    let slices = slices_for(&inv, "n1", 1).unwrap();
    Node { topo, inv, slices }
}

fn placement(nd: &Node, device: &str) -> (Bdf, String, u8) {
    let (m, g) = nd.inv.device(device).unwrap().mig().unwrap();
    (g.bdf, m.instance.profile.clone(), m.instance.start)
}

#[test]
fn every_placement_is_published_within_the_limits() {
    for name in ["dgx-h100", "dgx-a100", "gb300-4"] {
        let Some(topo) = profiles::get(name) else {
            continue;
        };
        let Ok(mig) = NodeMig::dynamic(&topo, None) else {
            continue;
        };
        let inv = Inventory::new(
            &topo,
            &PublishOptions {
                mig,
                ..Default::default()
            },
        );
        let slices = slices_for(&inv, "n1", 1).unwrap();
        assert_eq!(crate::common::check_limits(&slices), Ok(()), "{name}");
        let gpus = inv.mig_dynamic.len();
        assert_eq!(inv.migs.len(), 18 * gpus, "{name}");
        let devices: Vec<_> = slices
            .iter()
            .flat_map(|s| s.spec.devices.iter().flatten())
            .collect();
        for d in &devices {
            let n = d.consumes_counters.as_ref().map_or(0, Vec::len);
            assert!((1..=2).contains(&n), "{name}: {} consumes {n} sets", d.name);
        }
        println!(
            "FIGURE dynamic MIG {name}: {} devices ({} placements, {} MIG pairs) in {} slices",
            devices.len(),
            inv.migs.len(),
            inv.mig_pairs.len(),
            slices.len()
        );
    }
}

#[test]
fn a_dynamic_gpu_is_published_by_placement_only() {
    let nd = dynamic_node("dgx-h100");
    let devices: BTreeMap<&str, _> = nd
        .slices
        .iter()
        .flat_map(|s| s.spec.devices.iter().flatten())
        .map(|d| (d.name.as_str(), d))
        .collect();
    // In MIG mode CUDA sees no device on the whole GPU: it is not offered, nor its pairs.
    assert!(!devices.contains_key("gpu-0000-1b-00-0"));
    let whole_pairs: Vec<_> = (devices.keys())
        .filter(|n| n.starts_with("pair-0000-1b-00-0-") && !n.contains("-mig-"))
        .collect();
    assert!(whole_pairs.is_empty(), "{whole_pairs:?}");
    for (name, want) in [
        ("gpu-0000-1b-00-0-mig-1g10gb-19-6", vec!["memory-slice-6"]),
        (
            "gpu-0000-1b-00-0-mig-3g40gb-9-4",
            vec![
                "memory-slice-4",
                "memory-slice-5",
                "memory-slice-6",
                "memory-slice-7",
            ],
        ),
        (
            "gpu-0000-1b-00-0-mig-1g20gb-15-6",
            vec!["memory-slice-6", "memory-slice-7"],
        ),
    ] {
        let d = devices[name];
        let c = &d.consumes_counters.as_ref().unwrap()[0].counters;
        let slices: Vec<&str> = c
            .keys()
            .map(String::as_str)
            .filter(|k| k.starts_with("memory-slice"))
            .collect();
        assert_eq!(slices, want, "{name}");
        assert!(c.contains_key("sm-slices"));
        let a = d.attributes.as_ref().unwrap();
        assert_eq!(a["type"].string.as_deref(), Some("mig"));
        assert!(!a.contains_key("uuid"), "a placement has no UUID yet");
    }
    assert!(!devices.contains_key("gpu-0000-1b-00-0-mig-1g10gbme-20-0"));
    assert_eq!(nd.topo.gpus.len(), 8);
}

#[test]
fn seven_one_slice_claims_land_on_one_gpu_then_4g_and_3g_still_fit_on_the_next() {
    let nd = dynamic_node("dgx-h100");
    let mut held = BTreeSet::new();
    let mut got = Vec::new();
    for _ in 0..7 {
        let d = allocate(&nd, &held, &mig("1g.10gb", 1, false)).unwrap();
        got.push(placement(&nd, &d[0]));
        held.insert(id(&d[0]));
    }
    let gpu0 = nd.topo.gpu_bdf(0);
    let starts: Vec<u8> = got.iter().map(|(_, _, s)| *s).collect();
    assert!(got.iter().all(|(g, _, _)| *g == gpu0), "{got:?}");
    assert_eq!(starts, [6, 5, 4, 3, 2, 1, 0]);
    // Every GPU is in MIG mode: a whole-GPU claim has nothing to take.
    assert_eq!(
        allocate(&nd, &BTreeSet::new(), &Claim::Pairs(ClaimSpec::pairs(1))),
        None
    );

    // On a fresh node: three 1g, then a 4g and a 3g: all on GPU 0 except the 3g
    // (3g@4 is taken by the 1g at 4-6), and the 4g at 0 beside the 1g.
    let mut held = BTreeSet::new();
    let mut seq = Vec::new();
    for p in ["1g.10gb", "1g.10gb", "1g.10gb", "4g.40gb", "3g.40gb"] {
        let d = allocate(&nd, &held, &mig(p, 1, false)).unwrap();
        seq.push(placement(&nd, &d[0]));
        held.insert(id(&d[0]));
    }
    assert_eq!(
        seq.iter()
            .map(|(g, p, s)| (*g == gpu0, p.as_str(), *s))
            .collect::<Vec<_>>(),
        [
            (true, "1g.10gb", 6),
            (true, "1g.10gb", 5),
            (true, "1g.10gb", 4),
            (true, "4g.40gb", 0),
            (false, "3g.40gb", 4),
        ]
    );
    // A 3g first takes slot 4, and the 4g then joins it at 0 on the same GPU.
    let mut held = BTreeSet::new();
    let three = allocate(&nd, &held, &mig("3g.40gb", 1, false)).unwrap();
    held.insert(id(&three[0]));
    let four = allocate(&nd, &held, &mig("4g.40gb", 1, false)).unwrap();
    assert_eq!(placement(&nd, &three[0]), (gpu0, "3g.40gb".into(), 4));
    assert_eq!(placement(&nd, &four[0]), (gpu0, "4g.40gb".into(), 0));
}

/// A random stream of claims and releases (placements of every published profile,
/// MIG pairs, whole GPUs and GPU pairs): no memory slice is ever held twice.
#[test]
fn random_claims_and_releases_never_give_a_memory_slice_twice() {
    let nd = dynamic_node("dgx-h100");
    let profiles = [
        "1g.10gb", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb",
    ];
    for seed in [23, 24, 25] {
        let (placed, refused) = random_stream(
            &nd,
            &Stream {
                seed,
                steps: 300,
                profiles: &profiles,
                max_pairs: 2,
                kinds: 5,
            },
        );
        assert!(
            placed > 80 && refused > 5,
            "seed {seed}: {placed} placed, {refused} refused"
        );
    }
}

/// A placement pairs with its parent's best pairs only, so that a claim for more big
/// instances with NICs than the node has GPUs is refused within the budget.
#[test]
fn placements_pair_with_the_parents_best_nics_and_big_refusals_stay_bounded() {
    let nd = dynamic_node("dgx-h100");
    for p in &nd.inv.mig_pairs {
        let m = &nd.inv.migs[p.mig];
        let best = (nd.inv.pairs.iter())
            .filter(|q| q.gpu == m.gpu)
            .map(|q| q.path.preference())
            .min();
        assert_eq!(
            Some(nd.inv.pairs[p.pair].path.preference()),
            best,
            "{}",
            p.name
        );
    }
    for (profile, count) in [("7g.80gb", 9), ("4g.40gb", 9)] {
        let free = NodeDevices::gather(&nd.slices, "n1").unwrap();
        let Claim::Mig(s) = mig(profile, count, true) else {
            unreachable!()
        };
        let out = first_fit(&mig_claim_spec(&s).unwrap(), &classes(), &free, BUDGET).unwrap();
        assert!(
            out.allocation.is_none() && !out.gave_up,
            "{profile}: {} steps",
            out.steps
        );
    }
}
