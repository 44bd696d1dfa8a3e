//! The device-plugin wing's decisions for calls: the pure judgement
//! ([`crate::plugin::judge`]) memoised by the verdict cache ([`crate::plugin::cache`]),
//! over candidate nodes of a [`ClusterState`]; nodes without usable data are never
//! filtered and get the neutral score.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Instant, SystemTime};

use topoalign_tm::ResourceMap;

use crate::plugin::cache::VerdictCache;
use crate::plugin::effective::Effective;
use crate::plugin::judge::{
    Decision, Judge, Judged, MigSeen, NeutralReason, Reuse, Seen, mig_verdicts,
};
use crate::plugin::keys::KeyMap;
use crate::plugin::podreq::PodRequest;
use crate::plugin::state::{ClusterState, NodeView};
use crate::protocol::{FailedNodesMap, HostPriority};

/// The filter's answer.
#[derive(Debug, Clone, Default)]
pub struct FilterOutcome {
    /// Per candidate, in order: whether it passes.
    pub passed: Vec<bool>,
    /// Rejected nodes preemption might help.
    pub failed: FailedNodesMap,
    /// Rejected nodes preemption cannot help.
    pub unresolvable: FailedNodesMap,
    /// Candidates passed without judgement, and why.
    pub neutral: Vec<(String, NeutralReason)>,
}

/// The prioritize answer.
#[derive(Debug, Clone, Default)]
pub struct PrioritizeOutcome {
    /// One score per candidate, in order.
    pub scores: Vec<HostPriority>,
    /// Candidates given the neutral score, and why.
    pub neutral: Vec<(String, NeutralReason)>,
}

/// The node states a call still has to judge ([`Decider::visit_cached`]).
#[derive(Debug, Default)]
pub(crate) struct Pending {
    nodes: Vec<(u64, Arc<Effective>)>,
}

/// Verdicts judged with no lock held ([`Decider::judge_pending`]), by node state key.
#[derive(Debug, Default)]
pub(crate) struct Fresh {
    verdicts: KeyMap<Judged>,
    /// Node states left unjudged because the budget ran out.
    pub(crate) skipped: usize,
    /// Nanoseconds spent judging.
    pub(crate) spent_ns: u64,
}

impl Fresh {
    /// Node states judged.
    pub(crate) fn len(&self) -> usize {
        self.verdicts.len()
    }

    /// Nothing of `pending` judged: every state skipped.
    pub(crate) fn none_of(pending: &Pending) -> Self {
        Fresh {
            skipped: pending.nodes.len(),
            ..Fresh::default()
        }
    }
}

impl Pending {
    /// Whether no node state is left to judge.
    pub(crate) fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }
}

/// Cache counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CacheStats {
    /// Verdicts found in the cache.
    pub hits: u64,
    /// Verdicts computed.
    pub misses: u64,
}

/// Node states one thread judges at least before a call's judgement is shared out over
/// more threads (starting a thread costs about as much as judging a few states).
const STATES_PER_THREAD: usize = 32;

/// Threads at most that judge one call's node states.
const MAX_THREADS: usize = 8;

/// Threads to judge `states` node states on: one per available core, at most
/// [`MAX_THREADS`], each with at least [`STATES_PER_THREAD`] states.
fn judging_threads(states: usize) -> usize {
    if states < 2 * STATES_PER_THREAD {
        return 1;
    }
    // Asked once: the answer reads the cgroup's CPU quota (tens of microseconds).
    static CORES: OnceLock<usize> = OnceLock::new();
    let cores = *CORES.get_or_init(|| std::thread::available_parallelism().map_or(1, usize::from));
    cores
        .min(MAX_THREADS)
        .min(states / STATES_PER_THREAD)
        .max(1)
}

/// The decision maker: the resource map, and a verdict cache (or none).
#[derive(Debug)]
pub struct Decider {
    judge: Judge,
    cache: Option<Mutex<VerdictCache>>,
}

impl Decider {
    /// A decider with a verdict cache of at most about `cache_limit` entries (0: no
    /// cache).
    pub fn new(resources: ResourceMap, cache_limit: usize) -> Self {
        Decider {
            judge: Judge::new(resources),
            cache: (cache_limit > 0).then(|| Mutex::new(VerdictCache::new(cache_limit))),
        }
    }

    /// The resource map pods are read with.
    pub fn resources(&self) -> &ResourceMap {
        self.judge.resources()
    }

    /// Verdicts held in the cache.
    pub fn cached(&self) -> usize {
        self.cache
            .as_ref()
            .map_or(0, |m| m.lock().unwrap_or_else(|p| p.into_inner()).len())
    }

    /// Calls `f(index, name, seen)` for every candidate in order: the verdict from the
    /// cache, or judged now (and cached), or why the node is not judged. Nothing is
    /// copied per node: the verdict is borrowed for the call. No lock is held while a
    /// node is judged (`visit_cached`, else `judge_pending` of what it left and
    /// `visit_judged`, with no budget).
    pub fn visit<N: AsRef<str>>(
        &self,
        state: &ClusterState,
        req: &PodRequest,
        names: &[N],
        now: SystemTime,
        mut f: impl FnMut(usize, &str, Seen<'_>),
    ) -> CacheStats {
        match self.visit_cached(state, req, names, now, &mut f) {
            Ok(stats) => stats,
            Err(pending) => {
                let fresh = self.judge_pending(req, &pending, None);
                self.visit_judged(state, req, names, now, &fresh, f)
            }
        }
    }

    /// Judges `pending` with no lock held, until `deadline` (the call's work budget;
    /// `None`: all of them), at least one so that calls of a costly shape make progress
    /// from one to the next. Node states left over are counted in [`Fresh::skipped`].
    /// Many node states are judged on several threads ([`judging_threads`]) that take
    /// the next state as they finish one (a thread the system holds back delays the call
    /// by one state, not a share of them), each with its own [`Reuse`]; the verdicts do
    /// not depend on which thread judges which state.
    pub(crate) fn judge_pending(
        &self,
        req: &PodRequest,
        pending: &Pending,
        deadline: Option<Instant>,
    ) -> Fresh {
        let t0 = Instant::now();
        let nodes = &pending.nodes;
        let next = AtomicUsize::new(0);
        let threads = judging_threads(nodes.len());
        let parts: Vec<(KeyMap<Judged>, usize)> = if threads <= 1 {
            vec![self.judge_next(req, nodes, &next, deadline)]
        } else {
            std::thread::scope(|s| {
                let handles: Vec<_> = (0..threads)
                    .map(|_| s.spawn(|| self.judge_next(req, nodes, &next, deadline)))
                    .collect();
                handles
                    .into_iter()
                    .map(|h| h.join().unwrap_or_default())
                    .collect()
            })
        };
        let mut fresh = Fresh::default();
        let mut judged = 0;
        for (verdicts, n) in parts {
            fresh.verdicts.extend(verdicts);
            judged += n;
        }
        fresh.skipped = nodes.len().saturating_sub(judged);
        fresh.spent_ns = u64::try_from(t0.elapsed().as_nanos()).unwrap_or(u64::MAX);
        fresh
    }

    /// Judges the states of `nodes` that `next` hands out, until none is left or
    /// `deadline` passes (the first state is always judged): the verdicts and how many.
    fn judge_next(
        &self,
        req: &PodRequest,
        nodes: &[(u64, Arc<Effective>)],
        next: &AtomicUsize,
        deadline: Option<Instant>,
    ) -> (KeyMap<Judged>, usize) {
        let mut verdicts = KeyMap::default();
        let mut reuse = Reuse::default();
        let mut judged = 0;
        loop {
            let i = next.fetch_add(1, Ordering::Relaxed);
            let Some((key, e)) = nodes.get(i) else {
                break;
            };
            if i > 0 && deadline.is_some_and(|d| Instant::now() >= d) {
                break;
            }
            let v = self.judge.judge(e, req, &mut reuse);
            verdicts.insert(*key, Judged::new(v));
            judged += 1;
        }
        (verdicts, judged)
    }

    /// Records `fresh` in the cache, then calls `f(index, name, seen)` for every
    /// candidate in order from the cache or `fresh`; nothing is judged here (a node
    /// judged neither before nor now is [`Seen::OverBudget`]).
    pub(crate) fn visit_judged<N: AsRef<str>>(
        &self,
        state: &ClusterState,
        req: &PodRequest,
        names: &[N],
        now: SystemTime,
        fresh: &Fresh,
        mut f: impl FnMut(usize, &str, Seen<'_>),
    ) -> CacheStats {
        let mut stats = CacheStats::default();
        let mig = mig_verdicts(state, req, names);
        let mig_of = |i: usize| mig.get(i).and_then(Option::as_ref);
        if !req.is_managed() {
            for (i, n) in names.iter().enumerate() {
                match mig_of(i) {
                    Some(MigSeen::Reject(j)) => f(i, n.as_ref(), Seen::Judged(j)),
                    Some(MigSeen::Pass) | None => f(i, n.as_ref(), Seen::NotManaged),
                }
            }
            return stats;
        }
        let mut guard = self
            .cache
            .as_ref()
            .map(|m| m.lock().unwrap_or_else(|p| p.into_inner()));
        if let Some(c) = guard.as_mut()
            && !fresh.verdicts.is_empty()
        {
            c.make_room(state, fresh.verdicts.len());
            let shape = c.shape(req);
            for (key, j) in &fresh.verdicts {
                shape.insert(*key, &j.verdict);
            }
            shape.note_cost(fresh.spent_ns, fresh.verdicts.len());
        }
        let mut shape = guard.as_mut().map(|c| c.shape(req));
        let slots = state.slots_of(names);
        for (i, (n, &slot)) in names.iter().zip(slots.iter()).enumerate() {
            let name = n.as_ref();
            match mig_of(i) {
                Some(MigSeen::Reject(j)) => {
                    f(i, name, Seen::Judged(j));
                    continue;
                }
                Some(MigSeen::Pass) => {
                    f(i, name, Seen::NotManaged);
                    continue;
                }
                None => {}
            }
            let Some(slot) = slot else {
                f(i, name, Seen::Unknown);
                continue;
            };
            let Some(hot) = state.hot(slot) else {
                f(i, name, Seen::Unknown);
                continue;
            };
            if !hot.known {
                match state.view(slot) {
                    Some(NodeView::Broken(why)) => f(i, name, Seen::Broken(why)),
                    _ => f(i, name, Seen::Unknown),
                }
                continue;
            }
            if state.is_stale_at(hot.reported_at, now) {
                f(i, name, Seen::Stale);
                continue;
            }
            let key = hot.state_key;
            let new = fresh.verdicts.get(&key);
            if new.is_some() {
                stats.misses += 1;
            } else {
                stats.hits += 1;
            }
            match shape.as_mut().and_then(|s| s.get(slot, key)).or(new) {
                Some(j) => f(i, name, Seen::Judged(j)),
                None => {
                    stats.hits -= 1;
                    f(i, name, Seen::OverBudget);
                }
            }
        }
        stats
    }

    /// Judges `names` (nodes that just changed) for the recently used pod shapes, so that
    /// the next scheduler calls find their verdicts in the cache. Returns the verdicts
    /// computed.
    pub fn warm<N: AsRef<str>>(&self, state: &ClusterState, names: &[N], now: SystemTime) -> usize {
        let plan = self.warm_plan(state, names, now, u64::MAX);
        let mut judged = 0;
        for (req, pending) in plan {
            let fresh = self.judge_pending(&req, &pending, None);
            judged += fresh.verdicts.len();
            self.record(state, &req, &fresh);
        }
        judged
    }

    /// What warming `names` takes: per recently used shape whose judgement costs at
    /// most `max_cost_ns` a node (a costly shape is left to its own calls), the changed
    /// nodes it has no verdict for.
    pub(crate) fn warm_plan<N: AsRef<str>>(
        &self,
        state: &ClusterState,
        names: &[N],
        now: SystemTime,
        max_cost_ns: u64,
    ) -> Vec<(PodRequest, Pending)> {
        let Some(m) = &self.cache else {
            return Vec::new();
        };
        let nodes: Vec<(u64, &Arc<Effective>)> = names
            .iter()
            .filter_map(|n| {
                let slot = state.slot(n.as_ref())?;
                match state.view(slot) {
                    Some(NodeView::Known(e)) if !state.is_stale(e, now) => Some((e.state_key, e)),
                    _ => None,
                }
            })
            .collect();
        if nodes.is_empty() {
            return Vec::new();
        }
        let mut cache = m.lock().unwrap_or_else(|p| p.into_inner());
        let mut plan = Vec::new();
        for shape in cache.recent() {
            if shape.cost_ns > max_cost_ns {
                continue;
            }
            let Some(req) = &shape.req else {
                continue;
            };
            let mut pending = Pending::default();
            let mut seen: KeyMap<()> = KeyMap::default();
            for (key, e) in &nodes {
                if !shape.contains(*key) && seen.insert(*key, ()).is_none() {
                    pending.nodes.push((*key, Arc::clone(e)));
                }
            }
            if !pending.nodes.is_empty() {
                plan.push((req.clone(), pending));
            }
        }
        plan
    }

    /// Records verdicts judged elsewhere (background warming) in the cache.
    pub(crate) fn record(&self, state: &ClusterState, req: &PodRequest, fresh: &Fresh) {
        let Some(m) = &self.cache else {
            return;
        };
        if fresh.verdicts.is_empty() {
            return;
        }
        let mut cache = m.lock().unwrap_or_else(|p| p.into_inner());
        cache.make_room(state, fresh.verdicts.len());
        let shape = cache.shape(req);
        for (key, j) in &fresh.verdicts {
            shape.insert(*key, &j.verdict);
        }
        shape.note_cost(fresh.spent_ns, fresh.verdicts.len());
    }

    /// Decides every candidate: judged verdicts, or neutral with the reason.
    pub fn decide<N: AsRef<str>>(
        &self,
        state: &ClusterState,
        req: &PodRequest,
        names: &[N],
        now: SystemTime,
    ) -> (Vec<Decision>, CacheStats) {
        let mut out = Vec::with_capacity(names.len());
        let stats = self.visit(state, req, names, now, |_, _, s| out.push(s.decision()));
        (out, stats)
    }

    /// The filter verb.
    pub fn filter<N: AsRef<str>>(
        &self,
        state: &ClusterState,
        req: &PodRequest,
        names: &[N],
        now: SystemTime,
    ) -> (FilterOutcome, CacheStats) {
        let mut out = FilterOutcome::default();
        let stats = self.visit(state, req, names, now, |_, name, seen| {
            let pass = match seen.rejection() {
                Some(r) => {
                    let map = if r.unresolvable {
                        &mut out.unresolvable
                    } else {
                        &mut out.failed
                    };
                    map.insert(name.to_string(), r.message.to_string());
                    false
                }
                None => true,
            };
            if seen.neutral_label().is_some()
                && let Decision::Neutral(why) = seen.decision()
            {
                out.neutral.push((name.to_string(), why));
            }
            out.passed.push(pass);
        });
        (out, stats)
    }

    /// The prioritize verb.
    pub fn prioritize<N: AsRef<str>>(
        &self,
        state: &ClusterState,
        req: &PodRequest,
        names: &[N],
        now: SystemTime,
    ) -> (PrioritizeOutcome, CacheStats) {
        let mut out = PrioritizeOutcome::default();
        let stats = self.visit(state, req, names, now, |_, name, seen| {
            if seen.neutral_label().is_some()
                && let Decision::Neutral(why) = seen.decision()
            {
                out.neutral.push((name.to_string(), why));
            }
            out.scores.push(HostPriority {
                host: name.to_string(),
                score: seen.score(),
            });
        });
        (out, stats)
    }
}

mod cached;
#[cfg(test)]
mod tests;
