//! The DRA path: for pods with ResourceClaims, judge a node on its ResourceSlices of the
//! `topoalign.dev` driver minus the devices allocated claims hold, with the DRA crate's
//! allocator (the stock allocator's search: classes, CEL selectors, `firstAvailable`,
//! shared counters). Pure: the slices and claims come from reflector stores.
//!
//! - Filter: a node where some claim of the pod cannot be allocated (for example a
//!   `gpu-nic-pair.topoalign.dev` request with `rank <= 1` where no PXB-or-better pair is
//!   free) is dropped.
//! - Prioritize (`dra_score`): the pair classes the allocation reaches (PIX 1, PXB 0.75,
//!   PHB 0.5, NODE 0.25), minus the good pairs it spoils (free GPUs that had a free
//!   PXB-or-better pair before and have none after, without being taken), minus the
//!   capacity it uses up (`capacity_penalty`): a node of 8 pairs that can hold a claim
//!   of 4 and would hold only 3 after a 1-pair pod loses its place for the 4-pair pods,
//!   which costs more the fewer of the candidate nodes can still hold 4. So small pods
//!   fill nodes that are already in use before they break up the last halves and
//!   quarters; whole nodes are not held empty for whole-node claims (measured on the
//!   `placement-dra` stream offline, `tests/it/replay.rs`, and end to end: fewer pods left
//!   unschedulable than the stock scheduler, pairs better).

use std::collections::BTreeSet;

use k8s_openapi::api::resource::v1::{DeviceClass, ResourceClaimSpec, ResourceSlice};
use topoalign_dra::{
    DRIVER_NAME, DraError,
    alloc::{DEFAULT_BUDGET, DeviceId, NodeDevices, Share, first_fit},
};

use crate::dra::pairs::{DeviceKey, NodePairs};
use crate::protocol::MAX_EXTENDER_PRIORITY;
use crate::score::FRAGMENTATION_WEIGHT;

/// What other claims hold on a node, as a judgement reads it: devices (taken whole, but
/// for devices that allow multiple allocations) and shares of devices that allow
/// multiple allocations. A set of devices alone converts into one with no shares.
#[derive(Debug, Clone, Copy)]
pub struct Held<'a> {
    /// Devices held.
    pub devices: &'a BTreeSet<DeviceId>,
    /// Shares held ([`NodeDevices::consume_capacity`]: a quantity that is not one makes
    /// the judgement an error, so the node is judged neutral).
    pub shares: &'a [Share],
}

impl<'a> From<&'a BTreeSet<DeviceId>> for Held<'a> {
    fn from(devices: &'a BTreeSet<DeviceId>) -> Self {
        Held {
            devices,
            shares: &[],
        }
    }
}

impl<'a> From<&'a Holding> for Held<'a> {
    fn from(h: &'a Holding) -> Self {
        Held {
            devices: &h.devices,
            shares: &h.shares,
        }
    }
}

/// [`Held`], owned: what other claims hold, or what an allocation takes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Holding {
    /// Devices.
    pub devices: BTreeSet<DeviceId>,
    /// Shares of devices that allow multiple allocations.
    pub shares: Vec<Share>,
}

/// What an allocation on a node would reach and cost, before it is weighed against the
/// other candidates (`dra_score`).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct DraFit {
    /// Ranks of the pair devices allocated (0 = PIX … 3 = NODE), in allocation order.
    pub ranks: Vec<i64>,
    /// Free GPUs that lose their last PXB-or-better pair without being taken.
    pub spoiled: usize,
    /// GPUs the allocation takes (through pair devices or plain GPU devices).
    pub gpus: usize,
    /// Pairs the node could hold at once before the allocation (`NodePairs::capacity`).
    pub capacity_before: usize,
    /// … and after it.
    pub capacity_after: usize,
    /// … and with nothing allocated: the whole node.
    pub capacity_whole: usize,
    /// Free GPUs with a free PXB-or-better pair before the allocation (0 for claims of
    /// other drivers, which ask no pair class).
    pub good_before: usize,
    /// … and after it.
    pub good_after: usize,
}

/// A DRA judgement of one node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DraVerdict {
    /// Every claim can be allocated.
    Fit {
        /// What the allocation reaches and costs.
        fit: DraFit,
        /// The devices it takes.
        devices: BTreeSet<DeviceId>,
    },
    /// A claim cannot be allocated on the node's free devices.
    Reject(String),
    /// The search ran out of budget: no judgement.
    Undecided(String),
    /// The claims can be allocated, but the devices they get publish too little to tell
    /// their GPU–NIC pairs' class (no NUMA node, no PCI address): no judgement, never a
    /// guess.
    Blind(String),
}

/// The stock allocator's choice for a pod's claims on `node` (in order; each claim's
/// devices are taken before the next is allocated) with `allocated` held by other
/// claims: the devices, or the verdict when some claim cannot be allocated or the
/// search runs out of `budget`.
pub fn allocate<'a>(
    claims: &[ResourceClaimSpec],
    classes: &[DeviceClass],
    slices: &[ResourceSlice],
    node: &str,
    allocated: impl Into<Held<'a>>,
    budget: u64,
) -> Result<Result<BTreeSet<DeviceId>, DraVerdict>, DraError> {
    Ok(
        allocate_holding(claims, classes, slices, node, allocated.into(), budget)?
            .map(|h| h.devices),
    )
}

/// [`allocate`], with the shares of devices that allow multiple allocations the
/// allocation takes (what an allocation assumed holds).
pub(crate) fn allocate_holding(
    claims: &[ResourceClaimSpec],
    classes: &[DeviceClass],
    slices: &[ResourceSlice],
    node: &str,
    allocated: Held<'_>,
    budget: u64,
) -> Result<Result<Holding, DraVerdict>, DraError> {
    let mut free = NodeDevices::gather(slices, node)?;
    free.mark_in_use(allocated.devices);
    for s in allocated.shares {
        free.consume_capacity(&s.device, &s.capacity, &s.quantity)?;
    }
    let mut chosen = Holding::default();
    for (i, claim) in claims.iter().enumerate() {
        let out = first_fit(claim, classes, &free, budget)?;
        let Some(devices) = out.allocation else {
            return Ok(Err(unallocated(i, out.gave_up, budget)));
        };
        let ids: Vec<DeviceId> = devices
            .iter()
            .map(|d| DeviceId {
                driver: d.driver.clone(),
                pool: d.pool.clone(),
                device: d.device.clone(),
            })
            .collect();
        // The next claims see this one's devices taken and its shares held.
        for (id, consumed) in ids.iter().zip(&out.consumed) {
            for (capacity, quantity) in consumed {
                free.consume_capacity(id, capacity, quantity)?;
                chosen.shares.push(Share {
                    device: id.clone(),
                    capacity: capacity.clone(),
                    quantity: quantity.clone(),
                });
            }
        }
        let ids: BTreeSet<DeviceId> = ids.into_iter().collect();
        free.mark_in_use(&ids);
        chosen.devices.extend(ids);
    }
    Ok(Ok(chosen))
}

/// The verdict when claim `i` finds no allocation: out of `budget` when the search
/// `gave_up`, else a rejection.
pub(crate) fn unallocated(i: usize, gave_up: bool, budget: u64) -> DraVerdict {
    if gave_up {
        DraVerdict::Undecided(format!(
            "claim {i}: no allocation found within {budget} devices tried"
        ))
    } else {
        DraVerdict::Reject(format!(
            "topoalign: claim {i} cannot be allocated on the node's free devices"
        ))
    }
}

/// Judges `node` for a pod's claims (in order; each claim's devices are taken before
/// the next is allocated), given every slice, the device classes, and the devices held
/// by allocated claims.
pub fn judge<'a>(
    claims: &[ResourceClaimSpec],
    classes: &[DeviceClass],
    slices: &[ResourceSlice],
    node: &str,
    allocated: impl Into<Held<'a>>,
) -> Result<DraVerdict, DraError> {
    judge_with_budget(claims, classes, slices, node, allocated, DEFAULT_BUDGET)
}

/// [`judge`] with the allocator's search bounded by `budget` devices tried per claim.
pub fn judge_with_budget<'a>(
    claims: &[ResourceClaimSpec],
    classes: &[DeviceClass],
    slices: &[ResourceSlice],
    node: &str,
    allocated: impl Into<Held<'a>>,
    budget: u64,
) -> Result<DraVerdict, DraError> {
    let allocated = allocated.into();
    let chosen = match allocate(claims, classes, slices, node, allocated, budget)? {
        Ok(ids) => ids,
        Err(verdict) => return Ok(verdict),
    };
    let pool = NodePairs::of(slices, node);
    let whole = pool.capacity(&pool.left(std::iter::empty::<&DeviceKey>()));
    Ok(DraVerdict::Fit {
        fit: fit_of(&pool, allocated.devices, &chosen, whole),
        devices: chosen,
    })
}

/// What taking `chosen` reaches and costs on a node whose pool of the driver is `pool`,
/// with `allocated` held by other claims and a capacity of `whole` pairs with nothing
/// allocated.
pub(crate) fn fit_of(
    pool: &NodePairs,
    allocated: &BTreeSet<DeviceId>,
    chosen: &BTreeSet<DeviceId>,
    whole: usize,
) -> DraFit {
    let ours = |ids: &BTreeSet<DeviceId>| -> Vec<DeviceKey> {
        ids.iter()
            .filter(|d| d.driver == DRIVER_NAME)
            .map(|d| (d.pool.clone(), d.device.clone()))
            .collect()
    };
    let held = ours(allocated);
    let taking = ours(chosen);
    let before = pool.left(&held);
    let after = pool.left(held.iter().chain(&taking));
    let ranks: Vec<i64> = taking.iter().filter_map(|k| pool.rank(k)).collect();
    let taken: BTreeSet<&str> = taking.iter().filter_map(|k| pool.gpu(k)).collect();
    let gpus = pool.gpus_taken(&before, &after);
    let now = pool.good_gpus(&after);
    let good = pool.good_gpus(&before);
    let spoiled = good
        .iter()
        .filter(|g| !now.contains(*g) && !taken.contains(*g))
        .count();
    DraFit {
        ranks,
        spoiled,
        gpus,
        capacity_before: pool.capacity(&before),
        capacity_after: pool.capacity(&after),
        capacity_whole: whole,
        good_before: good.len(),
        good_after: now.len(),
    }
}

/// `10 × mean pair quality − 0.25 × spoiled` (at most 2 points), unrounded; claims
/// without pair devices score by fragmentation alone.
pub(crate) fn dra_points(ranks: &[i64], spoiled: usize) -> f64 {
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
    MAX_EXTENDER_PRIORITY as f64 * q - penalty
}

/// Priority bands of claims of other drivers by the worst GPU–NIC class the allocation
/// gives: PHB or better, NODE (same NUMA node), SYS (cross-NUMA), each (best, worst); the
/// neutral score (5) lies between NODE and SYS, so a node whose pairs cannot be classed
/// goes after every same-NUMA node and before every cross-NUMA one. The extender cannot
/// change which devices the stock allocator gives there, only the node, so the class it
/// gives comes first ([`crate::dra::verdict::priorities`]).
pub(crate) const FOREIGN_BANDS: [(i64, i64); 3] = [(10, 9), (8, 6), (4, 1)];

#[cfg(test)]
mod tests;
