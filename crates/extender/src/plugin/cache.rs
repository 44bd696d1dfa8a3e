//! The verdict cache: per pod shape (the request hash), the verdict for each node state
//! (the node's state key), so that a scheduler call over thousands of nodes is one map
//! lookup per node once a shape has been seen. Nodes that change are re-judged for the
//! recently used shapes in the background ([`crate::plugin::shared::Decider::warm`]), off the
//! request path and off the watchers.
//!
//! The cache is only ever locked for lookups and inserts: judgements are made with no
//! lock held (`visit_cached` finds what to judge, then `judge_pending`, then
//! `visit_judged`), so one costly pod never stalls other calls or the watchers.

use std::collections::{HashMap, HashSet};
use std::hash::BuildHasherDefault;

use crate::FastHash;
use crate::plugin::judge::{Judged, Verdict};
use crate::plugin::keys::{KeyHasher, KeyMap};
use crate::plugin::podreq::PodRequest;
use crate::plugin::state::{ClusterState, NodeView, Slot};

/// Pods with more containers than this (init containers included) keep no request in
/// their shape, so are never warmed in the background: their judgement is costly (their
/// own calls judge the nodes they need, within their budget) and their request large (a
/// pod of 10,000 containers holds about 11 MB), while the cache is bounded in verdicts.
pub(crate) const WARM_MAX_CONTAINERS: usize = 64;

/// No verdict recorded for a slot.
const NONE: u32 = u32::MAX;

/// One pod shape's verdicts: distinct verdicts once, the verdict of each node state, and
/// per state slot the verdict of the state it was last seen in.
#[derive(Debug)]
pub(crate) struct Shape {
    /// The request, kept to re-judge changed nodes on watch events; `None` for pods of
    /// more than [`WARM_MAX_CONTAINERS`] containers (never warmed).
    pub req: Option<PodRequest>,
    distinct: Vec<Judged>,
    /// Verdicts by value (foldhash: a shape's first call interns one verdict per node
    /// state, 20,000 at scale, serially after the parallel judging; SipHash was a
    /// twentieth of that call).
    interned: HashMap<Verdict, u32, FastHash>,
    by_key: KeyMap<u32>,
    by_slot: Vec<(u64, u32)>,
    /// The cache clock when last used.
    pub used_at: u64,
    /// Nanoseconds one node's judgement takes for this shape (a moving average; 0: not
    /// measured yet). Background warming skips costly shapes.
    pub cost_ns: u64,
}

impl Shape {
    fn new(req: PodRequest, used_at: u64) -> Self {
        Shape {
            req: (req.pod.containers.len() + req.pod.init_containers.len() <= WARM_MAX_CONTAINERS)
                .then_some(req),
            distinct: Vec::new(),
            interned: HashMap::default(),
            by_key: KeyMap::default(),
            by_slot: Vec::new(),
            used_at,
            cost_ns: 0,
        }
    }

    /// Whether a node state has a verdict (no slot record is touched).
    pub(crate) fn contains(&self, key: u64) -> bool {
        self.by_key.contains_key(&key)
    }

    /// The verdict of a node in `slot` whose state key is `key`, when recorded (the
    /// slot's record is updated for the next lookup).
    pub(crate) fn get(&mut self, slot: Slot, key: u64) -> Option<&Judged> {
        let v = self.index(slot, key)?;
        self.judged(v)
    }

    /// Where the verdict of a node in `slot` whose state key is `key` is held, for
    /// [`Shape::judged`], when recorded (the slot's record is updated for the next
    /// lookup).
    pub(crate) fn index(&mut self, slot: Slot, key: u64) -> Option<u32> {
        let i = slot as usize;
        if let Some(&(k, v)) = self.by_slot.get(i)
            && k == key
            && (v as usize) < self.distinct.len()
        {
            return Some(v);
        }
        let v = *self.by_key.get(&key)?;
        if self.by_slot.len() <= i {
            self.by_slot.resize(i + 1, (0, NONE));
        }
        self.by_slot[i] = (key, v);
        Some(v)
    }

    /// The verdict [`Shape::index`] said is held at `v`.
    pub(crate) fn judged(&self, v: u32) -> Option<&Judged> {
        self.distinct.get(v as usize)
    }

    /// Records the verdict of node state `key` (judged elsewhere, with no lock held).
    pub(crate) fn insert(&mut self, key: u64, verdict: &Verdict) {
        if self.by_key.contains_key(&key) {
            return;
        }
        let v = match self.interned.get(verdict) {
            Some(&v) => v,
            None => {
                let v = u32::try_from(self.distinct.len()).unwrap_or(NONE);
                self.interned.insert(verdict.clone(), v);
                self.distinct.push(Judged::new(verdict.clone()));
                v
            }
        };
        self.by_key.insert(key, v);
    }

    /// Folds a measured judgement cost (`ns` for `nodes` nodes) into [`Shape::cost_ns`].
    pub(crate) fn note_cost(&mut self, ns: u64, nodes: usize) {
        if nodes == 0 {
            return;
        }
        let per = ns / nodes as u64;
        self.cost_ns = if self.cost_ns == 0 {
            per
        } else {
            (self.cost_ns * 3 + per) / 4
        };
    }

    /// Node states with a verdict.
    pub(crate) fn len(&self) -> usize {
        self.by_key.len()
    }

    /// Keeps only the verdicts of the given live state keys.
    fn retain_live(&mut self, live: &HashSet<u64, BuildHasherDefault<KeyHasher>>) {
        self.by_key.retain(|k, _| live.contains(k));
        if self.distinct.len() > 64 && self.distinct.len() > 2 * self.by_key.len() {
            // Mostly dead verdicts: start the shape over.
            self.distinct.clear();
            self.interned.clear();
            self.by_key.clear();
            self.by_slot.clear();
        }
    }
}

/// Verdicts by pod shape, bounded in entries.
#[derive(Debug)]
pub(crate) struct VerdictCache {
    shapes: KeyMap<Shape>,
    clock: u64,
    limit: usize,
}

/// Shapes re-judged on a node change: the most recently used ones.
pub(crate) const WARM_SHAPES: usize = 16;

impl VerdictCache {
    /// An empty cache holding at most about `limit` verdicts.
    pub(crate) fn new(limit: usize) -> Self {
        VerdictCache {
            shapes: KeyMap::default(),
            clock: 0,
            limit,
        }
    }

    /// Verdicts held, all shapes together.
    pub(crate) fn len(&self) -> usize {
        self.shapes.values().map(Shape::len).sum()
    }

    /// Makes room for `incoming` new verdicts: first drops verdicts of node states no
    /// node is in any more, then whole shapes, least recently used first.
    pub(crate) fn make_room(&mut self, state: &ClusterState, incoming: usize) {
        if self.len() + incoming <= self.limit {
            return;
        }
        let live: HashSet<u64, BuildHasherDefault<KeyHasher>> = state
            .nodes()
            .filter_map(|(_, v)| match v {
                NodeView::Known(e) => Some(e.state_key),
                NodeView::Broken(_) => None,
            })
            .collect();
        for s in self.shapes.values_mut() {
            s.retain_live(&live);
        }
        while self.len() + incoming > self.limit && !self.shapes.is_empty() {
            let oldest = self
                .shapes
                .iter()
                .min_by_key(|(_, s)| s.used_at)
                .map(|(k, _)| *k);
            match oldest {
                Some(k) => {
                    self.shapes.remove(&k);
                }
                None => break,
            }
        }
    }

    /// The shape of `req` when held, to look verdicts up (not marked as used).
    pub(crate) fn peek_mut(&mut self, req: &PodRequest) -> Option<&mut Shape> {
        self.shapes.get_mut(&req.hash)
    }

    /// The shape of `req`, created empty when new, marked as just used.
    pub(crate) fn shape(&mut self, req: &PodRequest) -> &mut Shape {
        self.clock += 1;
        let now = self.clock;
        let s = self
            .shapes
            .entry(req.hash)
            .or_insert_with(|| Shape::new(req.clone(), now));
        s.used_at = now;
        s
    }

    /// The [`WARM_SHAPES`] most recently used shapes.
    pub(crate) fn recent(&mut self) -> Vec<&mut Shape> {
        let mut all: Vec<&mut Shape> = self.shapes.values_mut().collect();
        all.sort_by_key(|s| std::cmp::Reverse(s.used_at));
        all.truncate(WARM_SHAPES);
        all
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(containers: usize) -> PodRequest {
        let mut cs =
            vec![serde_json::json!({"name": "m", "resources": {"limits": {"amd.com/gpu": 2}}})];
        for c in 1..containers {
            cs.push(
                serde_json::json!({"name": format!("c{c}"), "resources": {"limits": {"cpu": "1"}}}),
            );
        }
        let pod = serde_json::json!({"metadata": {"name": "p", "namespace": "n"}, "spec": {"containers": cs}});
        crate::plugin::podreq::pod_request(&pod, &topoalign_tm::ResourceMap::default())
            .unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn only_small_pods_keep_their_request_for_warming() {
        let mut c = VerdictCache::new(1000);
        let (small, large) = (
            request(WARM_MAX_CONTAINERS),
            request(WARM_MAX_CONTAINERS + 1),
        );
        assert!(c.shape(&small).req.is_some());
        assert!(c.shape(&large).req.is_none());
        assert_eq!(c.shapes.len(), 2, "both shapes hold their verdicts");
    }
}
