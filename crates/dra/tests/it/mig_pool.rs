//! What the MIG tests share: a published node, its claims as the stock allocator's model
//! places them one after the other, the memory slices a device takes, and a random
//! stream of claims and releases that checks no slice is ever held twice.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::resource::v1::{DeviceClass, ResourceSlice};
use topoalign_dra::{
    alloc::{DeviceId, NodeDevices, first_fit},
    claim::{ClaimSpec, MigClaimSpec, claim_spec, mig_claim_spec},
    publish::{Inventory, device_classes, mig_device_classes},
};
use topoalign_topology::{Bdf, Topology};

/// Devices the allocator's model may try per claim.
pub(crate) const BUDGET: u64 = 2_000_000;

/// A node as published: its topology, inventory and slices (pool `n1`).
pub(crate) struct Node {
    pub(crate) topo: Topology,
    pub(crate) inv: Inventory,
    pub(crate) slices: Vec<ResourceSlice>,
}

/// The GPU, NIC, pair, MIG and MIG-pair classes.
pub(crate) fn classes() -> Vec<DeviceClass> {
    device_classes()
        .into_iter()
        .chain(mig_device_classes())
        .collect()
}

/// Device `device` of pool `n1`.
pub(crate) fn id(device: &str) -> DeviceId {
    DeviceId {
        driver: "topoalign.dev".into(),
        pool: "n1".into(),
        device: device.into(),
    }
}

/// The (GPU, memory slice) cells a device takes: all 8 for a whole MIG-enabled GPU, its
/// instance's (or placement's) for a MIG device; none for a GPU without MIG or a NIC.
pub(crate) fn cells(inv: &Inventory, device: &str) -> Vec<(Bdf, u8)> {
    match inv.device(device) {
        Some(d) => match (d.gpu(), d.mig()) {
            (Some(g), _) if g.mig_enabled => (0..8).map(|s| (g.bdf, s)).collect(),
            (_, Some((m, g))) => m.instance.slices().map(|s| (g.bdf, s)).collect(),
            _ => Vec::new(),
        },
        None => panic!("{device} does not resolve"),
    }
}

/// A claim of MIG instances or of whole-GPU pairs.
#[derive(Debug)]
pub(crate) enum Claim {
    Mig(MigClaimSpec),
    Pairs(ClaimSpec),
}

/// `count` instances of `profile`, each with a NIC when `with_nic`.
pub(crate) fn mig(profile: &str, count: u32, with_nic: bool) -> Claim {
    Claim::Mig(MigClaimSpec {
        profile: profile.into(),
        count,
        with_nic,
        max_rank: None,
    })
}

/// The devices first fit gives `claim` on `nd` with `held` taken (`None`: refused).
pub(crate) fn allocate(nd: &Node, held: &BTreeSet<DeviceId>, claim: &Claim) -> Option<Vec<String>> {
    let mut free = NodeDevices::gather(&nd.slices, "n1").unwrap();
    free.mark_in_use(held);
    let spec = match claim {
        Claim::Mig(s) => mig_claim_spec(s).unwrap(),
        Claim::Pairs(s) => claim_spec(s).unwrap(),
    };
    let out = first_fit(&spec, &classes(), &free, BUDGET).unwrap();
    assert!(!out.gave_up, "{claim:?}: {} steps", out.steps);
    out.allocation
        .map(|a| a.into_iter().map(|d| d.device).collect())
}

/// What a random stream is made of.
pub(crate) struct Stream<'a> {
    /// The seed.
    pub(crate) seed: u64,
    /// Claims made or released.
    pub(crate) steps: usize,
    /// MIG profiles claimed.
    pub(crate) profiles: &'a [&'a str],
    /// Pair claims ask 1 to this many pairs.
    pub(crate) max_pairs: u64,
    /// One claim in `kinds` is a pair claim, one a MIG claim with NICs, the rest MIG
    /// claims without.
    pub(crate) kinds: u64,
}

/// Runs the stream on `nd` (a third of the steps release a live claim), checking after
/// every step that no memory slice is held twice; returns (placed, refused).
pub(crate) fn random_stream(nd: &Node, s: &Stream<'_>) -> (usize, usize) {
    let mut rng = crate::common::Rng::new(s.seed);
    let mut live: Vec<Vec<String>> = Vec::new();
    let (mut placed, mut refused) = (0, 0);
    for _ in 0..s.steps {
        if !live.is_empty() && rng.below(3) == 0 {
            let i = rng.below(live.len() as u64) as usize;
            live.swap_remove(i);
            continue;
        }
        let claim = match rng.below(s.kinds) {
            0 => Claim::Pairs(ClaimSpec::pairs(1 + rng.below(s.max_pairs) as u32)),
            k => mig(
                s.profiles[rng.below(s.profiles.len() as u64) as usize],
                1 + rng.below(3) as u32,
                k == s.kinds - 1,
            ),
        };
        let held: BTreeSet<DeviceId> = live.iter().flatten().map(|d| id(d)).collect();
        match allocate(nd, &held, &claim) {
            Some(devices) => {
                placed += 1;
                live.push(devices);
            }
            None => refused += 1,
        }
        let mut taken: BTreeMap<(Bdf, u8), &str> = BTreeMap::new();
        for d in live.iter().flatten() {
            for cell in cells(&nd.inv, d) {
                if let Some(other) = taken.insert(cell, d) {
                    panic!(
                        "seed {}: memory slice {cell:?} given to {other} and {d}",
                        s.seed
                    );
                }
            }
        }
    }
    (placed, refused)
}
