//! One call's claims worked out once per node kind: the first node of a kind gathers its
//! devices ([`NodeDevices::gather`]), prepares each claim against them
//! ([`ClaimSearch::deferred`]: classes, selectors and constraints evaluated once per
//! device) and reads its pair pool ([`NodePairs`]); every node of the kind is then
//! judged by searching those devices with its own held devices marked in use, which is
//! [`crate::dra::judge::judge_with_budget`] on its own slices: the same allocator model
//! ([`topoalign_dra::alloc::first_fit`] after `mark_in_use`), the same verdict, the same errors.
//!
//! Nodes of one kind ([`crate::dra::state`]'s `node_kind`) have the same slices but for
//! the node's name in the slices and in the pool names that start with it, so a device
//! of one node is the device of the same name in the pool of the other that differs only
//! by that name ([`rename_pool`]). A kind whose devices or claims cannot be worked out
//! (a bad quantity, an unknown class …) is judged node by node the plain way.

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex, OnceLock};

use k8s_openapi::api::resource::v1::{DeviceClass, ResourceClaimSpec, ResourceSlice};
use topoalign_dra::{
    DraError,
    alloc::{ClaimSearch, DeviceId, NodeDevices},
};

use crate::dra::judge::{DraVerdict, Held, fit_of, unallocated};
use crate::dra::pairs::{DeviceKey, NodePairs};

/// The pod's claims prepared against the devices of one node of a kind.
#[derive(Debug)]
pub(crate) struct KindPlan {
    /// The node the devices were gathered from (their ids name its pools).
    node: String,
    devices: Arc<NodeDevices>,
    /// Each device's place in the allocator's order.
    places: HashMap<DeviceId, usize>,
    /// The pod's claims, in order.
    claims: Vec<ClaimSearch>,
    pool: NodePairs,
    /// Pairs the node holds with nothing allocated.
    whole: usize,
}

/// `pool` of node `from` as the pool of node `to` of the same kind: a name that starts
/// with `from` starts with `to` instead (the state's `pool_alias` writes both alike).
fn rename_pool(pool: &str, from: &str, to: &str) -> String {
    match pool.strip_prefix(from) {
        Some(rest) if from != to => format!("{to}{rest}"),
        _ => pool.to_string(),
    }
}

fn rename(d: &DeviceId, from: &str, to: &str) -> DeviceId {
    DeviceId {
        driver: d.driver.clone(),
        pool: rename_pool(&d.pool, from, to),
        device: d.device.clone(),
    }
}

impl KindPlan {
    /// Works out `claims` against the devices of `node` in `slices`; fails where the
    /// devices or some claim cannot be worked out (the caller then judges the plain way,
    /// which reports the error where the allocator meets it).
    pub(crate) fn new(
        claims: &[ResourceClaimSpec],
        classes: &[DeviceClass],
        slices: &[ResourceSlice],
        node: &str,
    ) -> Result<KindPlan, DraError> {
        let devices = Arc::new(NodeDevices::gather(slices, node)?);
        let claims = claims
            .iter()
            .map(|c| ClaimSearch::deferred(c, classes, devices.clone()))
            .collect::<Result<Vec<_>, _>>()?;
        let places = devices
            .ids()
            .enumerate()
            .map(|(i, d)| (d.clone(), i))
            .collect();
        let pool = NodePairs::of(slices, node);
        let whole = pool.capacity(&pool.left(std::iter::empty::<&DeviceKey>()));
        Ok(KindPlan {
            node: node.to_string(),
            devices,
            places,
            claims,
            pool,
            whole,
        })
    }

    /// [`crate::dra::judge::judge_with_budget`] of the prepared claims on `node` (of this kind) with
    /// `allocated` held by other claims: their devices marked in use, their shares of
    /// devices that allow multiple allocations held, and each claim's devices and shares
    /// taken before the next is searched.
    pub(crate) fn judge<'a>(
        &self,
        node: &str,
        allocated: impl Into<Held<'a>>,
        budget: u64,
    ) -> Result<DraVerdict, DraError> {
        let allocated: Held<'a> = allocated.into();
        let held: BTreeSet<DeviceId> = (allocated.devices.iter())
            .map(|d| rename(d, node, &self.node))
            .collect();
        let renamed: Vec<(DeviceId, &str, &str)> = (allocated.shares.iter())
            .map(|s| {
                let id = rename(&s.device, node, &self.node);
                (id, s.capacity.as_str(), s.quantity.as_str())
            })
            .collect();
        let mut shares = (self.devices).shared_held(renamed.iter().map(|(d, c, q)| (d, *c, *q)))?;
        let mut in_use = vec![false; self.devices.len()];
        for d in &held {
            if let Some(&p) = self.places.get(d) {
                in_use[p] = true;
            }
        }
        let mut chosen = BTreeSet::new();
        for (i, claim) in self.claims.iter().enumerate() {
            let found = claim.try_search_held(&in_use, &shares, budget)?;
            let Some(places) = found.devices else {
                return Ok(unallocated(i, found.gave_up, budget));
            };
            shares.extend(&found.shares);
            for p in places {
                if let Some(flag) = in_use.get_mut(p) {
                    *flag = true;
                }
                if let Some(id) = self.devices.id(p) {
                    chosen.insert(id.clone());
                }
            }
        }
        Ok(DraVerdict::Fit {
            fit: fit_of(&self.pool, &held, &chosen, self.whole),
            devices: chosen.iter().map(|d| rename(d, &self.node, node)).collect(),
        })
    }
}

/// One kind's plan: worked out by the first judgement that needs it; `None` when it
/// cannot be.
type Slot = Arc<OnceLock<Option<Arc<KindPlan>>>>;

/// The kinds' plans of one call (one pod's claims, one set of classes), worked out as the
/// judgements (on any thread) first need them.
#[derive(Debug, Default)]
pub(crate) struct KindPlans {
    slots: Mutex<HashMap<(u64, u64), Slot>>,
}

impl KindPlans {
    /// The plan of kind `key` (the node kind and the classes' revision), worked out from
    /// `node`'s slices when it is the kind's first.
    pub(crate) fn get(
        &self,
        key: (u64, u64),
        claims: &[ResourceClaimSpec],
        classes: &[DeviceClass],
        slices: &[ResourceSlice],
        node: &str,
    ) -> Option<Arc<KindPlan>> {
        let slot = {
            let mut slots = self.slots.lock().unwrap_or_else(|p| p.into_inner());
            slots.entry(key).or_default().clone()
        };
        slot.get_or_init(|| {
            KindPlan::new(claims, classes, slices, node)
                .ok()
                .map(Arc::new)
        })
        .clone()
    }
}

#[cfg(test)]
mod tests;
