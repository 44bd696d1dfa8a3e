//! The pure decision core: filter and prioritize one pod over candidate nodes of a
//! [`ClusterState`], with an optional verdict cache keyed by (node state, pod request).
//!
//! Per node: the kubelet's admission simulated on the node's free devices (its Topology
//! Manager policy and scope, its device and CPU managers, via `topoalign-tm`), then the
//! planner (`topoalign-plan`) for the pod's required pair class and GPU link. The score
//! is the alignment of the devices the kubelet would actually allocate (it does not
//! follow topoalign's plan: on a device-plugin node each plugin picks on its own within
//! the Topology Manager's NUMA hint), minus the fragmentation they cause; the planner's
//! achievable score stands in where the kubelet cannot be simulated. Nodes without
//! usable data are never filtered and get [`NEUTRAL_SCORE`].

use std::sync::{Arc, Mutex};
use std::time::{Instant, SystemTime};

use topoalign_kube_types::kubelet_settings::Policy;
use topoalign_mig::device_plugin::Ever;
use topoalign_plan::{Bound, PlanError, Planner, Score};
use topoalign_tm::{Case, Outcome, ResourceMap, simulate};
use topoalign_topology::{NodeUsage, PcieClass};

use crate::cache::{Judged, KeyMap, VerdictCache};
use crate::podreq::PodRequest;
use crate::protocol::{FailedNodesMap, HostPriority};
use crate::score::{NEUTRAL_SCORE, priority, score_points, to_priority};
use crate::state::{ClusterState, Effective, NodeView, fragmentation_of, take_allocated};

/// Why a node was filtered out, for metrics.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RejectKind {
    /// The node's Topology Manager would refuse the pod.
    TopologyManager,
    /// The node cannot reach the pod's required pair class.
    PairClass,
    /// The planner cannot place the pod otherwise (too few devices, no NVLink …).
    Placement,
    /// The node's MIG devices cannot hold the pod's MIG set.
    Mig,
}

impl RejectKind {
    /// A short label for metrics.
    pub fn label(self) -> &'static str {
        match self {
            RejectKind::TopologyManager => "topology_manager",
            RejectKind::PairClass => "pair_class",
            RejectKind::Placement => "placement",
            RejectKind::Mig => "mig",
        }
    }
}

/// A judged node.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Verdict {
    /// The pod fits and aligns; its priority.
    Fit(i64),
    /// The node cannot take the pod aligned.
    Reject {
        /// Why, in words (shown in the pod's events by the scheduler).
        message: String,
        /// Whether preempting pods on the node could not help.
        unresolvable: bool,
        /// The reason's kind.
        kind: RejectKind,
    },
    /// The data could not answer (a device the topology lacks …): neutral, with why.
    Neutral(String),
}

/// Why a node was not judged.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NeutralReason {
    /// The pod asks for no GPU.
    NotManaged,
    /// No data for the node.
    Unknown,
    /// The agent's report is too old.
    Stale,
    /// The data is unusable.
    Broken(String),
    /// The data could not answer this pod.
    Undecided(String),
    /// The call's work budget ran out before the node was judged.
    OverBudget,
}

impl NeutralReason {
    /// A short label for metrics.
    pub fn label(&self) -> &'static str {
        match self {
            NeutralReason::NotManaged => "not_managed",
            NeutralReason::Unknown => "unknown_node",
            NeutralReason::Stale => "stale",
            NeutralReason::Broken(_) => "broken",
            NeutralReason::Undecided(_) => "undecided",
            NeutralReason::OverBudget => "budget",
        }
    }
}

/// One node's decision.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Judged.
    Judged(Verdict),
    /// Not judged: passes the filter with a neutral score.
    Neutral(NeutralReason),
}

/// One candidate as [`Decider::visit`] sees it, borrowed from the state and the cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Seen<'a> {
    /// Judged (a [`Verdict::Neutral`] is an undecided node: passed with a neutral score).
    Judged(&'a Judged),
    /// The pod asks for no GPU.
    NotManaged,
    /// No data for the node.
    Unknown,
    /// The agent's report is too old.
    Stale,
    /// The data is unusable, with why.
    Broken(&'a str),
    /// Not judged: the call's work budget ran out first.
    OverBudget,
}

impl<'a> Seen<'a> {
    /// The owned decision.
    pub fn decision(&self) -> Decision {
        match *self {
            Seen::Judged(Judged {
                verdict: Verdict::Neutral(w),
                ..
            }) => Decision::Neutral(NeutralReason::Undecided(w.clone())),
            Seen::Judged(j) => Decision::Judged(j.verdict.clone()),
            Seen::NotManaged => Decision::Neutral(NeutralReason::NotManaged),
            Seen::Unknown => Decision::Neutral(NeutralReason::Unknown),
            Seen::Stale => Decision::Neutral(NeutralReason::Stale),
            Seen::Broken(w) => Decision::Neutral(NeutralReason::Broken(w.to_string())),
            Seen::OverBudget => Decision::Neutral(NeutralReason::OverBudget),
        }
    }

    /// The neutral reason's metrics label, `None` for judged nodes.
    pub fn neutral_label(&self) -> Option<&'static str> {
        Some(match self {
            Seen::Judged(Judged {
                verdict: Verdict::Neutral(_),
                ..
            }) => "undecided",
            Seen::Judged(_) => return None,
            Seen::NotManaged => "not_managed",
            Seen::Unknown => "unknown_node",
            Seen::Stale => "stale",
            Seen::Broken(_) => "broken",
            Seen::OverBudget => "budget",
        })
    }

    /// The filter's answer: `None` when the node passes.
    pub fn rejection(&self) -> Option<Rejection<'a>> {
        match *self {
            Seen::Judged(Judged {
                verdict:
                    Verdict::Reject {
                        message,
                        unresolvable,
                        kind,
                    },
                message_json,
            }) => Some(Rejection {
                message,
                message_json,
                unresolvable: *unresolvable,
                kind: *kind,
            }),
            _ => None,
        }
    }

    /// The prioritize answer.
    pub fn score(&self) -> i64 {
        match self {
            Seen::Judged(j) => match j.verdict {
                Verdict::Fit(s) => s,
                Verdict::Reject { .. } => 0,
                Verdict::Neutral(_) => NEUTRAL_SCORE,
            },
            _ => NEUTRAL_SCORE,
        }
    }
}

/// A rejected node's answer, borrowed from the cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rejection<'a> {
    /// Why, in words.
    pub message: &'a str,
    /// The same as a JSON string (quotes included).
    pub message_json: &'a [u8],
    /// Whether preemption cannot help.
    pub unresolvable: bool,
    /// The reason's kind.
    pub kind: RejectKind,
}

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

/// The node states a call still has to judge ([`Decider::pending`]).
#[derive(Debug, Default)]
pub struct Pending {
    nodes: Vec<(u64, Arc<Effective>)>,
}

impl Pending {
    /// Node states to judge.
    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    /// Whether nothing is left to judge.
    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }
}

/// Verdicts judged with no lock held ([`Decider::judge_pending`]), by node state key.
#[derive(Debug, Default)]
pub struct Fresh {
    verdicts: KeyMap<Judged>,
    /// Node states left unjudged because the budget ran out.
    pub skipped: usize,
    /// Nanoseconds spent judging.
    pub spent_ns: u64,
}

impl Fresh {
    /// Node states judged.
    pub fn len(&self) -> usize {
        self.verdicts.len()
    }

    /// Whether nothing was judged.
    pub fn is_empty(&self) -> bool {
        self.verdicts.is_empty()
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

/// The decision maker: the resource map, and a verdict cache (or none).
#[derive(Debug)]
pub struct Decider {
    resources: ResourceMap,
    cache: Option<Mutex<VerdictCache>>,
}

impl Decider {
    /// A decider with a verdict cache of at most about `cache_limit` entries (0: no
    /// cache).
    pub fn new(resources: ResourceMap, cache_limit: usize) -> Self {
        Decider {
            resources,
            cache: (cache_limit > 0).then(|| Mutex::new(VerdictCache::new(cache_limit))),
        }
    }

    /// The resource map pods are read with.
    pub fn resources(&self) -> &ResourceMap {
        &self.resources
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
    /// node is judged ([`Decider::pending`], [`Decider::judge_pending`],
    /// [`Decider::visit_judged`] in turn, with no budget).
    pub fn visit<N: AsRef<str>>(
        &self,
        state: &ClusterState,
        req: &PodRequest,
        names: &[N],
        now: SystemTime,
        f: impl FnMut(usize, &str, Seen<'_>),
    ) -> CacheStats {
        let pending = self.pending(state, req, names, now);
        let fresh = self.judge_pending(req, &pending, None);
        self.visit_judged(state, req, names, now, &fresh, f)
    }

    /// The candidates a call still has to judge: one per distinct node state with no
    /// cached verdict for `req`, its data shared (so that the state's lock can be let go
    /// before judging).
    pub fn pending<N: AsRef<str>>(
        &self,
        state: &ClusterState,
        req: &PodRequest,
        names: &[N],
        now: SystemTime,
    ) -> Pending {
        let mut out = Pending::default();
        if !req.is_managed() {
            return out;
        }
        let guard = self
            .cache
            .as_ref()
            .map(|m| m.lock().unwrap_or_else(|p| p.into_inner()));
        let shape = guard.as_ref().and_then(|c| c.peek(req));
        let mut seen: KeyMap<()> = KeyMap::default();
        for n in names {
            let Some(slot) = state.slot(n.as_ref()) else {
                continue;
            };
            let Some(hot) = state.hot(slot) else {
                continue;
            };
            if !hot.known || state.is_stale_at(hot.reported_at, now) {
                continue;
            }
            if shape.is_some_and(|s| s.contains(hot.state_key))
                || seen.insert(hot.state_key, ()).is_some()
            {
                continue;
            }
            if let Some(NodeView::Known(e)) = state.view(slot) {
                out.nodes.push((hot.state_key, e.clone()));
            }
        }
        out
    }

    /// Judges `pending` with no lock held, until `deadline` (the call's work budget;
    /// `None`: all of them), at least one so that calls of a costly shape make progress
    /// from one to the next. Node states left over are counted in [`Fresh::skipped`].
    pub fn judge_pending(
        &self,
        req: &PodRequest,
        pending: &Pending,
        deadline: Option<Instant>,
    ) -> Fresh {
        let t0 = Instant::now();
        let mut fresh = Fresh::default();
        let mut planners: KeyMap<Planner<'_>> = KeyMap::default();
        for (i, (key, e)) in pending.nodes.iter().enumerate() {
            if i > 0 && deadline.is_some_and(|d| Instant::now() >= d) {
                fresh.skipped = pending.nodes.len() - i;
                break;
            }
            let v = self.judge(e, req, &mut planners);
            fresh.verdicts.insert(*key, Judged::new(v));
        }
        fresh.spent_ns = u64::try_from(t0.elapsed().as_nanos()).unwrap_or(u64::MAX);
        fresh
    }

    /// Records `fresh` in the cache, then calls `f(index, name, seen)` for every
    /// candidate in order from the cache or `fresh`; nothing is judged here (a node
    /// judged neither before nor now is [`Seen::OverBudget`]).
    pub fn visit_judged<N: AsRef<str>>(
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
                    Some(j) => f(i, n.as_ref(), Seen::Judged(j)),
                    None => f(i, n.as_ref(), Seen::NotManaged),
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
        for (i, n) in names.iter().enumerate() {
            let name = n.as_ref();
            if let Some(j) = mig_of(i) {
                f(i, name, Seen::Judged(j));
                continue;
            }
            let Some(slot) = state.slot(name) else {
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
    pub fn warm_plan<N: AsRef<str>>(
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
    pub fn record(&self, state: &ClusterState, req: &PodRequest, fresh: &Fresh) {
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

    /// Judges one node with usable data.
    fn judge<'s>(
        &self,
        e: &'s Effective,
        req: &PodRequest,
        planners: &mut KeyMap<Planner<'s>>,
    ) -> Verdict {
        let Some(request) = &req.plan else {
            return Verdict::Fit(NEUTRAL_SCORE);
        };
        let nt = &e.info.topology;
        let planner = planners
            .entry(nt.id)
            .or_insert_with(|| Planner::new(&nt.topology));
        let settings = &e.info.settings;
        let strict = matches!(
            settings.topology_manager_policy,
            Policy::Restricted | Policy::SingleNumaNode
        );
        let kubelet = self.kubelet(e, req, &e.used, 0);
        if strict && let Some(o) = kubelet.as_ref().filter(|o| !o.admitted) {
            let unresolvable = self
                .kubelet(e, req, &NodeUsage::empty(), 0)
                .is_some_and(|o| !o.admitted);
            return Verdict::Reject {
                message: format!(
                    "Topology Manager ({}, scope {}) would reject the pod: {}: {}",
                    settings.topology_manager_policy.as_str(),
                    settings.topology_manager_scope.as_str(),
                    o.reason.as_deref().unwrap_or("rejected"),
                    o.message.as_deref().unwrap_or("")
                ),
                unresolvable,
                kind: RejectKind::TopologyManager,
            };
        }
        match planner.plan(request, &e.used) {
            Ok(plan) => Verdict::Fit(match kubelet.filter(|o| o.admitted) {
                Some(first) => self.kubelet_priority(e, req, first),
                None => priority(&plan, e.fragmentation),
            }),
            Err(PlanError::Unsatisfiable { bound, detail, .. }) => {
                let unresolvable = planner.plan(request, &NodeUsage::empty()).is_err();
                let kind = match bound {
                    Bound::MaxPair => RejectKind::PairClass,
                    _ => RejectKind::Placement,
                };
                let what = match bound {
                    Bound::MaxPair => format!(
                        "cannot reach pair class {} on its free devices",
                        request.max_pair.map_or("?", |c| c.as_str())
                    ),
                    Bound::GpuLink => "cannot give NVLink/xGMI-linked GPUs".to_string(),
                    _ => format!("cannot place the pod ({bound})"),
                };
                Verdict::Reject {
                    message: format!("topoalign: node {what}: {detail}"),
                    unresolvable,
                    kind,
                }
            }
            Err(e) => Verdict::Neutral(format!("planner: {e}")),
        }
    }

    /// The priority of what the kubelet would allocate, averaged over
    /// [`KUBELET_DRAWS`] draws of the device plugins' random choices (`first` is draw 0).
    fn kubelet_priority(&self, e: &Effective, req: &PodRequest, first: Outcome) -> i64 {
        let mut total = score_points(&kubelet_score(e, &first), e.fragmentation);
        let mut n = 1.0;
        for seed in 1..KUBELET_DRAWS {
            if let Some(o) = self.kubelet(e, req, &e.used, seed).filter(|o| o.admitted) {
                total += score_points(&kubelet_score(e, &o), e.fragmentation);
                n += 1.0;
            }
        }
        to_priority(total / n)
    }

    /// The kubelet's admission of the pod on `usage` (`seed`: the draw of the plugins'
    /// random choices), or `None` when it cannot be simulated on this data (which is
    /// not held against the node).
    fn kubelet(
        &self,
        e: &Effective,
        req: &PodRequest,
        usage: &NodeUsage,
        seed: u64,
    ) -> Option<Outcome> {
        let case = Case {
            topology: &e.info.topology.topology,
            settings: &e.info.settings,
            resources: &self.resources,
            pod: &req.pod,
            usage,
            seed,
        };
        match simulate(&case) {
            Ok(o) => Some(o),
            Err(err) => {
                tracing::debug!(pod = %req.key, error = %err, "Topology Manager simulation skipped");
                None
            }
        }
    }
}

/// Draws of the kubelet's allocation a score averages: GPU device plugins without a
/// preferred allocation get their devices in Go's random set order (the `tm` crate's
/// `unsorted` allocator), so one draw is one possible outcome, not the outcome.
pub const KUBELET_DRAWS: u64 = 4;

/// The alignment of what the kubelet would allocate: its GPU↔closest-NIC pairs (as
/// `nvidia-smi topo -m` classes them), the NUMA nodes it spans and the fragmentation
/// left on the node.
fn kubelet_score(e: &Effective, o: &Outcome) -> Score {
    let topo = &e.info.topology.topology;
    let classes: Vec<PcieClass> = o.pairs.iter().filter_map(|p| p.class).collect();
    let mut after = e.used.clone();
    take_allocated(&mut after, topo, o);
    Score {
        pairs: classes.len(),
        gdr_pairs: o
            .pairs
            .iter()
            .filter(|p| p.class.is_some() && p.gdr)
            .count(),
        worst_pair: classes.iter().copied().max_by_key(|c| c.rank()),
        pair_rank_sum: classes.iter().map(|c| c.rank()).sum(),
        numa_span: o.numa_nodes_used.len(),
        numa_distance: 0,
        gpu_interconnect: 0,
        fragmentation: fragmentation_of(topo, &after),
    }
}

/// The MIG verdict of each candidate for a pod asking `nvidia.com/mig-*` (empty for
/// other pods): a rejection where the node's MIG devices cannot hold the set now
/// (unresolvable when no geometry of the node ever could), `None` where they can or the
/// node shows no MIG (judged as any node).
fn mig_verdicts<N: AsRef<str>>(
    state: &ClusterState,
    req: &PodRequest,
    names: &[N],
) -> Vec<Option<Judged>> {
    if !req.mig.has_profiles() {
        return Vec::new();
    }
    names
        .iter()
        .map(|n| {
            let node = state.mig_node(n.as_ref())?;
            let short = node.fits_now(&req.mig).err()?;
            let ever = node.ever(&req.mig);
            let never = !matches!(ever, Ok(Ever::Yes(_) | Ever::Unknown));
            let message = match ever {
                Err(e) => format!("MIG: {e}"),
                Ok(_) => format!(
                    "MIG: the pod asks {} on one node: {short} (the node offers {})",
                    req.mig.text(),
                    node.offer()
                ),
            };
            Some(Judged::new(Verdict::Reject {
                message,
                unresolvable: never,
                kind: RejectKind::Mig,
            }))
        })
        .collect()
}
