//! The DRA path: for pods with ResourceClaims, judge a node on its ResourceSlices of the
//! `topoalign.dev` driver minus the devices allocated claims hold, with the DRA crate's
//! allocator (the stock allocator's search: classes, CEL selectors, `firstAvailable`,
//! shared counters). Pure: the slices and claims come from reflector stores.
//!
//! - Filter: a node where some claim of the pod cannot be allocated (for example a
//!   `gpu-nic-pair.topoalign.dev` request with `rank <= 1` where no PXB-or-better pair is
//!   free) is dropped.
//! - Prioritize: the pair classes the allocation reaches (PIX 1, PXB 0.75, PHB 0.5,
//!   NODE 0.25), minus the good pairs it spoils: free GPUs that had a free PXB-or-better
//!   pair before and have none after, without being taken; minus [`OPEN_PENALTY`] when the
//!   pod would be the first on a node whose GPUs are all free and would not take them all (best fit: pods go to nodes already
//!   in use when the pairs are as good there, so that whole nodes stay free for the pods
//!   that need a whole node; measured in the `placement-dra` end-to-end scenario).

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::resource::v1::{
    Device, DeviceClass, ResourceClaim, ResourceClaimSpec, ResourceSlice,
};
use topoalign_dra::{DRIVER_NAME, DeviceId, DraError, NodeDevices, first_fit};

use crate::protocol::MAX_EXTENDER_PRIORITY;
use crate::score::FRAGMENTATION_WEIGHT;

/// Points taken by default when the pod would be the first on a node whose GPUs are all
/// free and would not take them all: more than the pair quality between PIX and NODE (7.5
/// points), so that a pod takes NODE pairs on a node already in use rather than open a
/// whole node that a pod needing every GPU of a node could have had (measured in the
/// `placement-dra` end-to-end scenario; `topoalign extender --dra-open-penalty`).
pub const OPEN_PENALTY: i64 = 8;

/// Devices the allocator may try per claim before giving up (then the node passes with
/// a neutral score: the stock allocator decides).
pub const SEARCH_BUDGET: u64 = 200_000;

/// Devices held by allocated claims (`status.allocation.devices.results`).
pub fn allocated_ids<'a>(
    claims: impl IntoIterator<Item = &'a ResourceClaim>,
) -> BTreeSet<DeviceId> {
    claims
        .into_iter()
        .filter_map(|c| c.status.as_ref()?.allocation.as_ref()?.devices.as_ref())
        .flat_map(|d| d.results.iter().flatten())
        .map(|r| DeviceId {
            driver: r.driver.clone(),
            pool: r.pool.clone(),
            device: r.device.clone(),
        })
        .collect()
}

/// A DRA judgement of one node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DraVerdict {
    /// Every claim can be allocated: the priority and the pair classes reached (rank
    /// 0 = PIX … 3 = NODE), in allocation order.
    Fit {
        /// 0 ..= 10.
        score: i64,
        /// Ranks of the pair devices allocated.
        ranks: Vec<i64>,
        /// Free GPUs that lose their last PXB-or-better pair without being taken.
        spoiled: usize,
        /// Whether every GPU of the node was free and the pod leaves some of them free.
        opens: bool,
        /// The devices the allocation takes.
        devices: BTreeSet<DeviceId>,
    },
    /// A claim cannot be allocated on the node's free devices.
    Reject(String),
    /// The search ran out of budget: no judgement.
    Undecided(String),
}

/// Counter units by (counter set, counter).
type Counters = BTreeMap<(String, String), i64>;
/// Pair devices by (pool, device).
type Pairs = BTreeMap<(String, String), PairInfo>;

/// Per pair device of the driver: its rank and the counters it consumes.
struct PairInfo {
    rank: i64,
    gpu: String,
    consumes: Vec<((String, String), i64)>,
}

/// Counters ((set, counter) → units) and pair devices of `node`'s topoalign pools.
fn pairs_of(slices: &[ResourceSlice], node: &str) -> (Counters, Pairs) {
    let mut counters = BTreeMap::new();
    let mut pairs = BTreeMap::new();
    let here = slices
        .iter()
        .filter(|s| s.spec.driver == DRIVER_NAME && s.spec.node_name.as_deref() == Some(node));
    for s in here {
        for set in s.spec.shared_counters.iter().flatten() {
            for (c, v) in &set.counters {
                if let Ok(n) = v.value.0.parse::<i64>() {
                    counters.insert((set.name.clone(), c.clone()), n);
                }
            }
        }
        for d in s.spec.devices.iter().flatten() {
            if let Some(p) = pair_info(d) {
                pairs.insert((s.spec.pool.name.clone(), d.name.clone()), p);
            }
        }
    }
    (counters, pairs)
}

/// Whether device `pool`/`device` of `node` consumes one of the GPU counters `gpus` (the
/// driver names each GPU's counter as the pairs' `gpu` attribute).
fn gpu_consumers(
    slices: &[ResourceSlice],
    node: &str,
    pool: &str,
    device: &str,
    gpus: &BTreeSet<&str>,
) -> bool {
    slices
        .iter()
        .filter(|s| {
            s.spec.driver == DRIVER_NAME
                && s.spec.node_name.as_deref() == Some(node)
                && s.spec.pool.name == pool
        })
        .flat_map(|s| s.spec.devices.iter().flatten())
        .filter(|d| d.name == device)
        .flat_map(|d| d.consumes_counters.iter().flatten())
        .any(|cc| cc.counters.keys().any(|c| gpus.contains(c.as_str())))
}

fn attr<'a>(
    d: &'a Device,
    name: &str,
) -> Option<&'a k8s_openapi::api::resource::v1::DeviceAttribute> {
    let attrs = d.attributes.as_ref()?;
    attrs
        .get(name)
        .or_else(|| attrs.get(&format!("{DRIVER_NAME}/{name}")))
}

fn pair_info(d: &Device) -> Option<PairInfo> {
    let rank = attr(d, topoalign_dra::attr::RANK)?.int?;
    let gpu = attr(d, topoalign_dra::attr::GPU_PCI_BUS_ID)?
        .string
        .clone()?;
    let consumes = d
        .consumes_counters
        .iter()
        .flatten()
        .flat_map(|cc| {
            cc.counters.iter().filter_map(|(c, v)| {
                Some((
                    (cc.counter_set.clone(), c.clone()),
                    v.value.0.parse::<i64>().ok()?,
                ))
            })
        })
        .collect();
    Some(PairInfo {
        rank,
        gpu,
        consumes,
    })
}

/// GPUs (PCI address) with a free, allocatable pair of rank ≤ 1, given devices in use.
fn good_gpus(
    counters: &Counters,
    pairs: &Pairs,
    used: &BTreeSet<(String, String)>,
) -> BTreeSet<String> {
    let mut left = counters.clone();
    for k in used {
        if let Some(p) = pairs.get(k) {
            for (c, v) in &p.consumes {
                if let Some(n) = left.get_mut(c) {
                    *n -= v;
                }
            }
        }
    }
    pairs
        .iter()
        .filter(|(k, p)| {
            p.rank <= 1
                && !used.contains(*k)
                && p.consumes
                    .iter()
                    .all(|(c, v)| left.get(c).is_some_and(|n| n >= v))
        })
        .map(|(_, p)| p.gpu.clone())
        .collect()
}

/// Judges `node` for a pod's claims (in order; each claim's devices are taken before
/// the next is allocated), given every slice, the device classes, and the devices held
/// by allocated claims.
pub fn judge(
    claims: &[ResourceClaimSpec],
    classes: &[DeviceClass],
    slices: &[ResourceSlice],
    node: &str,
    allocated: &BTreeSet<DeviceId>,
) -> Result<DraVerdict, DraError> {
    judge_with_budget(
        claims,
        classes,
        slices,
        node,
        allocated,
        SEARCH_BUDGET,
        OPEN_PENALTY,
    )
}

/// [`judge`] with the allocator's search bounded by `budget` devices tried per claim and
/// `open_penalty` points taken for opening a free node (see [`OPEN_PENALTY`]).
pub fn judge_with_budget(
    claims: &[ResourceClaimSpec],
    classes: &[DeviceClass],
    slices: &[ResourceSlice],
    node: &str,
    allocated: &BTreeSet<DeviceId>,
    budget: u64,
    open_penalty: i64,
) -> Result<DraVerdict, DraError> {
    let mut free = NodeDevices::gather(slices, node)?;
    free.mark_in_use(allocated);
    let mut chosen = BTreeSet::new();
    for (i, claim) in claims.iter().enumerate() {
        let out = first_fit(claim, classes, &free, budget)?;
        let Some(devices) = out.allocation else {
            if out.gave_up {
                return Ok(DraVerdict::Undecided(format!(
                    "claim {i}: no allocation found within {budget} devices tried"
                )));
            }
            return Ok(DraVerdict::Reject(format!(
                "topoalign: claim {i} cannot be allocated on the node's free devices"
            )));
        };
        let ids: BTreeSet<DeviceId> = devices
            .iter()
            .map(|d| DeviceId {
                driver: d.driver.clone(),
                pool: d.pool.clone(),
                device: d.device.clone(),
            })
            .collect();
        free.mark_in_use(&ids);
        chosen.extend(ids);
    }
    let (counters, pairs) = pairs_of(slices, node);
    let key = |d: &DeviceId| (d.pool.clone(), d.device.clone());
    let held: BTreeSet<(String, String)> = allocated
        .iter()
        .filter(|d| d.driver == DRIVER_NAME)
        .map(key)
        .collect();
    let mut after = held.clone();
    after.extend(chosen.iter().filter(|d| d.driver == DRIVER_NAME).map(key));
    let ranks: Vec<i64> = chosen
        .iter()
        .filter(|d| d.driver == DRIVER_NAME)
        .filter_map(|d| pairs.get(&key(d)).map(|p| p.rank))
        .collect();
    let taken: BTreeSet<&str> = chosen
        .iter()
        .filter_map(|d| pairs.get(&key(d)).map(|p| p.gpu.as_str()))
        .collect();
    let before = good_gpus(&counters, &pairs, &held);
    let now = good_gpus(&counters, &pairs, &after);
    let spoiled = before
        .iter()
        .filter(|g| !now.contains(*g) && !taken.contains(g.as_str()))
        .count();
    // Every GPU free before (no held device consumes a GPU's counter) and not all taken.
    let node_gpus: BTreeSet<&str> = pairs.values().map(|p| p.gpu.as_str()).collect();
    let gpu_counters: BTreeSet<&str> = slices
        .iter()
        .filter(|s| s.spec.driver == DRIVER_NAME && s.spec.node_name.as_deref() == Some(node))
        .flat_map(|s| s.spec.devices.iter().flatten())
        .filter_map(|d| attr(d, topoalign_dra::attr::GPU)?.string.as_deref())
        .collect();
    let gpu_held = allocated
        .iter()
        .filter(|d| d.driver == DRIVER_NAME)
        .any(|d| gpu_consumers(slices, node, &d.pool, &d.device, &gpu_counters));
    let opens = !gpu_held && taken.len() < node_gpus.len();
    let score = (dra_priority(&ranks, spoiled) - if opens { open_penalty } else { 0 }).max(0);
    Ok(DraVerdict::Fit {
        score,
        ranks,
        spoiled,
        opens,
        devices: chosen,
    })
}

/// `10 × mean pair quality − 0.25 × spoiled` (at most 2 points), rounded to 0 ..= 10;
/// claims without pair devices score by fragmentation alone.
pub fn dra_priority(ranks: &[i64], spoiled: usize) -> i64 {
    let q = if ranks.is_empty() {
        1.0
    } else {
        ranks
            .iter()
            .map(|r| 1.0 - (*r).clamp(0, 4) as f64 / 4.0)
            .sum::<f64>()
            / ranks.len() as f64
    };
    let penalty = (FRAGMENTATION_WEIGHT * spoiled as f64).min(2.0);
    let raw = MAX_EXTENDER_PRIORITY as f64 * q - penalty;
    (raw.round() as i64).clamp(0, MAX_EXTENDER_PRIORITY)
}

#[cfg(test)]
mod tests {
    use super::*;
    use topoalign_dra::{ClaimSpec, PublishOptions, claim_spec, device_classes, resource_slices};

    fn slices(profile: &str, node: &str) -> Vec<ResourceSlice> {
        let topo = topoalign_profiles::get(profile).unwrap();
        resource_slices(&topo, node, &PublishOptions::default()).unwrap()
    }

    fn pairs(n: u32, max_rank: Option<u32>) -> ResourceClaimSpec {
        let mut c = ClaimSpec::pairs(n);
        c.max_rank = max_rank;
        claim_spec(&c).unwrap()
    }

    fn fit(v: &DraVerdict) -> (i64, Vec<i64>, BTreeSet<DeviceId>) {
        match v {
            DraVerdict::Fit {
                score,
                ranks,
                devices,
                ..
            } => (*score, ranks.clone(), devices.clone()),
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
            let v = judge_with_budget(
                &[pairs(2, None)],
                &classes,
                &sl,
                "n1",
                &none,
                SEARCH_BUDGET,
                0,
            );
            let (score, ranks, _) = fit(&v.unwrap());
            assert_eq!(ranks.len(), 2, "{profile}");
            assert!((1..=10).contains(&score), "{profile}: {score}");
            // Every GPU taken by one claim: nothing is left for the next.
            let all = judge(&[pairs(gpus, None)], &classes, &sl, "n1", &none).unwrap();
            let (_, _, held) = fit(&all);
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
            assert_eq!(fit(&v).1.len(), gpus as usize, "{profile}");
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
            let (_, ranks, _) = fit(&judge(&[pairs(1, None)], &classes, &sl, "n1", &none).unwrap());
            let best = ranks[0];
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
            let (_, _, held) =
                fit(&judge(&[pairs(gpus, None)], &classes, &sl, "n1", &none).unwrap());
            let v = judge(&[pairs(1, Some(best as u32))], &classes, &sl, "n1", &held).unwrap();
            assert!(matches!(v, DraVerdict::Reject(_)), "{profile}: {v:?}");
        }
    }

    #[test]
    fn better_pairs_score_higher_and_used_nodes_are_filled_first() {
        let classes = device_classes();
        let sl = slices("mi300x-8", "n1");
        let none = BTreeSet::new();
        let v = judge(&[pairs(4, None)], &classes, &sl, "n1", &none).unwrap();
        assert!(matches!(v, DraVerdict::Fit { opens: true, .. }), "{v:?}");
        let (free_score, free_ranks, held) = fit(&v);
        // Half the GPUs held by another claim: the pod gets what is left, at the same
        // pair classes, and fills the node instead of opening a free one.
        let v = judge(&[pairs(4, None)], &classes, &sl, "n1", &held).unwrap();
        assert!(matches!(v, DraVerdict::Fit { opens: false, .. }), "{v:?}");
        let (busy_score, busy_ranks, _) = fit(&v);
        assert_eq!(free_ranks, busy_ranks);
        assert_eq!(
            (free_score, busy_score),
            (10 - OPEN_PENALTY, 10),
            "a free node loses to a used one with pairs as good"
        );
        // Only a NIC held: every GPU is still free, the node is still whole.
        let nic: BTreeSet<DeviceId> = [DeviceId {
            driver: DRIVER_NAME.into(),
            pool: "n1".into(),
            device: "nic-0000-0c-00-0".into(),
        }]
        .into();
        let v = judge(&[pairs(1, None)], &classes, &sl, "n1", &nic).unwrap();
        assert!(matches!(v, DraVerdict::Fit { opens: true, .. }), "{v:?}");
        // A pod taking the whole node opens nothing; NODE pairs on a node in use win over
        // opening a free node with PIX pairs (the default penalty outweighs the classes).
        let v = judge(&[pairs(8, None)], &classes, &sl, "n1", &none).unwrap();
        assert!(
            matches!(
                v,
                DraVerdict::Fit {
                    opens: false,
                    score: 10,
                    ..
                }
            ),
            "{v:?}"
        );
        let gb = slices("gb300-4", "n2");
        let (_, _, gb_held) = fit(&judge(&[pairs(1, None)], &classes, &gb, "n2", &none).unwrap());
        let (gb_score, gb_ranks, _) =
            fit(&judge(&[pairs(1, None)], &classes, &gb, "n2", &gb_held).unwrap());
        assert_eq!(gb_ranks, [3]);
        assert_eq!(gb_score, 3);
        assert!(gb_score > free_score, "{gb_score} {free_score}");
        let v = judge_with_budget(
            &[pairs(4, None)],
            &classes,
            &sl,
            "n1",
            &none,
            SEARCH_BUDGET,
            0,
        );
        assert!(matches!(
            v.unwrap(),
            DraVerdict::Fit {
                score: 10,
                opens: true,
                ..
            }
        ));
        assert_eq!(dra_priority(&[0, 0], 0), 10);
        assert_eq!(dra_priority(&[3, 3], 0), 3);
        assert_eq!(dra_priority(&[0], 4), 9);
        assert_eq!(dra_priority(&[0], 100), 8);
        assert_eq!(dra_priority(&[], 0), 10);
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
}
