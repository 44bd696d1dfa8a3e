//! Allocations assumed: where the extender sent a pod, held in its view until the
//! claim's real allocation is seen.
//!
//! The scheduler allocates a pod's claims in its scheduling cycle and writes the
//! allocation in the binding cycle, after it has moved on to the next pod; the extender
//! sees it later still, through its watch. Without more, the next pods are judged as if
//! the last ones had not been placed (measured on the `placement-dra` scenario: the
//! extender then steers pod after pod onto the node it just filled). So when the
//! extender names the node it wants (its one top priority, which the scheduler takes:
//! [`crate::dra::verdict::priorities`]), it holds the devices the stock allocator gives
//! there, as a claim of its own under the pod's uid, until a claim the pod owns or that
//! is reserved for it is seen allocated (then that claim holds the real devices, wherever
//! the scheduler put them), the pod is judged again, or [`ASSUME_FOR`] passes.

use std::time::{Duration, Instant};

use super::{ClaimEntry, DraState};
use crate::dra::judge::Holding;
use crate::dra::verdict::ObjKey;

/// How long an assumed allocation is held at most: far longer than a binding cycle
/// writing a claim's allocation takes, short enough that a pod the scheduler did not
/// place after all leaves the view soon.
pub(crate) const ASSUME_FOR: Duration = Duration::from_secs(30);

/// The namespace of the extender's own claims that hold assumed devices: a NUL, which
/// no object's namespace contains.
const ASSUMED_NS: &str = "\0assumed";

fn assumed_key(uid: &str) -> ObjKey {
    (ASSUMED_NS.to_string(), uid.to_string())
}

/// Whether a claim key is one of the extender's own (an allocation assumed).
pub(super) fn is_assumed_key(key: &ObjKey) -> bool {
    key.0 == ASSUMED_NS
}

impl DraState {
    /// Holds `taking` (devices, and shares of devices that allow multiple allocations)
    /// for the pod of `uid` until `until` (replacing what was assumed for it).
    pub fn assume(&mut self, uid: &str, taking: Holding, until: Instant) {
        self.forget_assumed(uid);
        if taking.devices.is_empty() && taking.shares.is_empty() {
            return;
        }
        self.assumed.insert(uid.to_string(), until);
        self.hold(
            assumed_key(uid),
            ClaimEntry {
                owners: vec![uid.to_string()],
                spec: Default::default(),
                held: taking.devices,
                shares: taking.shares,
            },
        );
    }

    /// Lets go of what was assumed for the pod of `uid`; whether there was something.
    pub fn forget_assumed(&mut self, uid: &str) -> bool {
        if self.assumed.remove(uid).is_none() {
            return false;
        }
        self.delete_claim(&assumed_key(uid));
        true
    }

    /// Whether something is assumed for the pod of `uid`.
    pub fn is_assumed(&self, uid: &str) -> bool {
        self.assumed.contains_key(uid)
    }

    /// The earliest time an assumption runs out (`None`: nothing assumed).
    pub(crate) fn next_expiry(&self) -> Option<Instant> {
        self.assumed.values().min().copied()
    }

    /// Lets go of the assumptions that ran out by `now`.
    pub fn expire_assumed(&mut self, now: Instant) {
        let gone: Vec<String> = self
            .assumed
            .iter()
            .filter(|(_, until)| **until <= now)
            .map(|(uid, _)| uid.clone())
            .collect();
        for uid in gone {
            self.forget_assumed(&uid);
        }
    }

    /// Whether an allocation assumed holds devices of `node`'s pools: its view of the
    /// node may be fuller than the scheduler's (the pod may have gone elsewhere).
    pub fn holds_assumed_on(&self, node: &str) -> bool {
        self.assumed.keys().any(|uid| {
            self.claims.get(&assumed_key(uid)).is_some_and(|c| {
                c.held.iter().any(|d| {
                    self.pool_nodes
                        .get(&(d.driver.clone(), d.pool.clone()))
                        .is_some_and(|nodes| nodes.contains(node))
                })
            })
        })
    }

    /// Allocations assumed now.
    pub fn assumed_count(&self) -> usize {
        self.assumed.len()
    }
}
