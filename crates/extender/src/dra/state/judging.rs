//! What one node's judgement needs, gathered under the state's lock and run with none
//! held: the devices and shares other claims hold, the verdict cache keys, the job.

use std::collections::BTreeSet;
use std::collections::hash_map::DefaultHasher;
use std::hash::{BuildHasher, Hash, Hasher};
use std::sync::Arc;

use k8s_openapi::api::resource::v1::{DeviceClass, ResourceSlice};
use topoalign_dra::alloc::DeviceId;

use super::{DraState, NodeSlices, held_fingerprint};
use crate::dra::foreign::judge_foreign;
use crate::dra::judge::{DraVerdict, Holding, allocate_holding, judge_with_budget};
use crate::dra::kinds::KindPlans;
use crate::dra::verdict::{DraNeutral, DraNode, ObjKey, Resolved};

impl DraState {
    /// The devices and shares other claims hold on the node's pools (the pod's own
    /// claims' are not taken from it).
    fn taken(&self, ns: &NodeSlices, own: &BTreeSet<ObjKey>) -> Holding {
        let devices: BTreeSet<DeviceId> = (ns.pools.iter())
            .filter_map(|p| self.held.get(p))
            .flat_map(|m| {
                m.iter()
                    .filter(|(_, keys)| keys.iter().any(|k| !own.contains(k)))
                    .map(|(d, _)| d.clone())
            })
            .collect();
        let shares = (ns.pools.iter())
            .filter_map(|p| self.shares.get(p))
            .flat_map(|m| m.iter().filter(|(k, _)| !own.contains(*k)))
            .flat_map(|(_, v)| v.iter().cloned())
            .collect();
        Holding { devices, shares }
    }

    /// The pools in which the pod's own claims hold devices (usually none).
    pub(crate) fn own_pools(&self, own: &BTreeSet<ObjKey>) -> BTreeSet<(String, String)> {
        own.iter()
            .filter_map(|k| self.claims.get(k))
            .flat_map(|c| c.held.iter())
            .map(|d| (d.driver.clone(), d.pool.clone()))
            .collect()
    }

    /// The verdict cache keys of `node` for the pod's claims, or the verdict when there is
    /// nothing to judge. Cheap: no device set is built (the held devices' fingerprint is
    /// kept per node), unless the pod's own claims hold devices in the node's pools.
    pub(crate) fn keys(
        &self,
        claims: &Resolved,
        node: &str,
        own_pools: &BTreeSet<(String, String)>,
    ) -> Keyed {
        self.keys_of(claims, self.nodes.get(node), own_pools)
    }

    /// [`DraState::keys`] of every node in `names`, in order: the nodes looked up all
    /// together ([`super::table::NodeTable::find_many`]), the same keys.
    pub(crate) fn keys_many<N: AsRef<str>>(
        &self,
        claims: &Resolved,
        names: &[N],
        own_pools: &BTreeSet<(String, String)>,
    ) -> Vec<Keyed> {
        (self.nodes.find_many(names).into_iter())
            .map(|ns| self.keys_of(claims, ns, own_pools))
            .collect()
    }

    /// [`DraState::keys`] of the node whose entry is `ns` (its own key, which names it,
    /// is [`Keys::own`]).
    fn keys_of(
        &self,
        claims: &Resolved,
        ns: Option<&NodeSlices>,
        own_pools: &BTreeSet<(String, String)>,
    ) -> Keyed {
        let Some(ns) = ns else {
            return Keyed::Done(DraNode::Neutral(DraNeutral::NoSlices));
        };
        if !claims.foreign && ns.ours == 0 {
            return Keyed::Done(DraNode::Neutral(DraNeutral::NoSlices));
        }
        // The pod's own claims' devices and shares are not held from it: the pools where
        // they are (rarely any) are fingerprinted without them.
        let held = if own_pools.is_empty() {
            ns.held
        } else {
            held_fingerprint(&ns.pools, |p| {
                if own_pools.contains(p) {
                    self.pool_hash(p, &claims.own)
                } else {
                    self.held_hashes.get(p).copied()
                }
            })
        };
        // Four numbers per candidate, 20,000 per call at scale: foldhash (SipHash here was
        // a twentieth of a warm call). A key within this process only, like the cache's.
        let kind = foldhash::fast::FixedState::default().hash_one((
            ns.kind,
            self.classes_rev,
            self.budget,
            held,
        ));
        Keyed::Keys(Keys {
            shared: (claims.hash, kind),
            rev: ns.rev,
        })
    }

    /// Judges one node for a pod's claims.
    pub fn judge_node(&self, claims: &Resolved, node: &str) -> DraNode {
        match self.gather(claims, node) {
            Gathered::Done(v) => v,
            Gathered::Job(job) => job.judge(claims, None),
        }
    }

    /// What judging `node` needs, shared from the state (or the verdict, when there is
    /// nothing to judge), with its cache keys.
    pub(crate) fn gather(&self, claims: &Resolved, node: &str) -> Gathered {
        let own_pools = self.own_pools(&claims.own);
        match self.keys(claims, node, &own_pools) {
            Keyed::Done(v) => Gathered::Done(v),
            Keyed::Keys(k) => self.gather_keyed(claims, node, k),
        }
    }

    /// [`DraState::gather`] of a node whose cache keys were just found in this state.
    pub(crate) fn gather_keyed(&self, claims: &Resolved, node: &str, keys: Keys) -> Gathered {
        let Some(ns) = self.nodes.get(node) else {
            return Gathered::Done(DraNode::Neutral(DraNeutral::NoSlices));
        };
        Gathered::Job(Job {
            keys,
            kind: (ns.kind, self.classes_rev),
            node: node.to_string(),
            slices: ns.slices.clone(),
            // Other drivers' claims, and CPUs of dra-driver-cpu beside the pairs, are
            // judged with every class; topoalign's alone with its own.
            classes: if claims.foreign
                || (claims.specs.iter())
                    .flat_map(super::class_names)
                    .any(|n| !self.is_ours(n))
            {
                self.all_classes.clone()
            } else {
                self.ours.clone()
            },
            taken: self.taken(ns, &claims.own),
            budget: self.budget,
        })
    }
}

/// The verdict cache keys of one node for one pod's claims: (claims, fingerprint).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct Keys {
    /// Shared by the nodes of one kind with the same devices held ([`crate::dra::verdict::shareable`]
    /// verdicts).
    pub(crate) shared: (u64, u64),
    /// The node's slice revision, for [`Keys::own`].
    pub(crate) rev: u64,
}

impl Keys {
    /// The node's own key (its name and slice revision too): verdicts that name what
    /// they could not read. Worked out only when the shared key misses (hashing every
    /// candidate's name was a tenth of a warm call).
    pub(crate) fn own(&self, node: &str) -> (u64, u64) {
        let mut h = DefaultHasher::new();
        (self.shared.1, node, self.rev).hash(&mut h);
        (self.shared.0, h.finish())
    }
}

#[derive(Debug)]
pub(crate) enum Keyed {
    Done(DraNode),
    Keys(Keys),
}

/// One node's judgement, ready to run with no lock held.
pub(crate) struct Job {
    pub(crate) keys: Keys,
    /// The node's kind and the classes' revision: nodes whose claims can be worked out
    /// once ([`KindPlans`]).
    kind: (u64, u64),
    node: String,
    slices: Arc<Vec<ResourceSlice>>,
    classes: Arc<Vec<DeviceClass>>,
    /// What other claims hold on the node: devices and shares.
    taken: Holding,
    budget: u64,
}

pub(crate) enum Gathered {
    Done(DraNode),
    Job(Job),
}

impl Job {
    /// The devices and shares the stock allocator gives the pod's claims on the node
    /// (`None`: it gives none, or the search ran out).
    pub(crate) fn allocation(&self, claims: &Resolved) -> Option<Holding> {
        match allocate_holding(
            &claims.specs,
            &self.classes,
            &self.slices,
            &self.node,
            (&self.taken).into(),
            self.budget,
        ) {
            Ok(Ok(taking)) => Some(taking),
            _ => None,
        }
    }

    /// Judges the node for the pod's claims: claims of topoalign's classes on the plan of
    /// the node's kind when `plans` is given and the kind's plan can be worked out (the
    /// same verdict as [`judge_with_budget`], [`crate::dra::kinds`]), else on the node's
    /// own slices.
    pub(crate) fn judge(&self, claims: &Resolved, plans: Option<&KindPlans>) -> DraNode {
        let plan = plans.filter(|_| !claims.foreign).and_then(|p| {
            p.get(
                self.kind,
                &claims.specs,
                &self.classes,
                &self.slices,
                &self.node,
            )
        });
        let verdict = match plan {
            Some(plan) => plan.judge(&self.node, &self.taken, self.budget),
            None => {
                let (specs, classes) = (&claims.specs, &self.classes);
                let (slices, node, budget) = (&self.slices, &self.node, self.budget);
                if claims.foreign {
                    judge_foreign(specs, classes, slices, node, &self.taken, budget)
                } else {
                    judge_with_budget(specs, classes, slices, node, &self.taken, budget)
                }
            }
        };
        match verdict {
            Ok(DraVerdict::Fit { fit, .. }) => DraNode::Fit(fit),
            Ok(DraVerdict::Reject(m)) => DraNode::Reject(m),
            Ok(DraVerdict::Undecided(w)) => DraNode::Neutral(DraNeutral::Budget(w)),
            Ok(DraVerdict::Blind(w)) => DraNode::Neutral(DraNeutral::Blind(w)),
            Err(e) => DraNode::Neutral(DraNeutral::Error(e.to_string())),
        }
    }
}
