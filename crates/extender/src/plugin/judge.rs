//! The pure judgement of the device-plugin wing: one pod on one node of the
//! [`ClusterState`], with no cache and no lock (the verdict cache memoises it:
//! [`crate::plugin::cache`], and [`crate::plugin::shared`] puts both together for calls).
//!
//! Per node: the kubelet's admission simulated on the node's free devices (its Topology
//! Manager policy and scope, its device and CPU managers, via `topoalign-tm`), then the
//! planner (`topoalign-plan`) for the pod's required pair class and GPU link. The score
//! is the alignment of the devices the kubelet would actually allocate (it does not
//! follow topoalign's plan: on a device-plugin node each plugin picks on its own within
//! the Topology Manager's NUMA hint), minus the fragmentation they cause; the planner's
//! achievable score stands in where the kubelet cannot be simulated. Nodes without
//! usable data are never filtered and get [`NEUTRAL_SCORE`].

use std::collections::HashMap;
use std::rc::Rc;
use topoalign_kube_types::kubelet_settings::Policy;
use topoalign_mig::{Ever, Strategy};
use topoalign_plan::{Bound, PlanError, Planner, Reading, Score};
use topoalign_tm::{Brief, LeanPod, LeanState, Prepared, ResourceMap, SimError};

use topoalign_topology::{Bdf, CpuSet, NodeUsage};

use crate::FastHash;
use crate::plugin::effective::Effective;
use crate::plugin::keys::KeyMap;
use crate::plugin::podreq::PodRequest;
use crate::plugin::state::ClusterState;
use crate::protocol::push_json_str;
use crate::score::{NEUTRAL_SCORE, score_points, score_priority, to_priority};

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
    /// Every kind, in the order of their discriminants.
    pub const ALL: [RejectKind; 4] = [
        RejectKind::TopologyManager,
        RejectKind::PairClass,
        RejectKind::Placement,
        RejectKind::Mig,
    ];

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

/// One candidate as [`crate::Decider::visit`] sees it, borrowed from the state and the cache.
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

/// A verdict with its message already written as a JSON string (empty when the verdict
/// has no message), so that answers copy it instead of escaping it per node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Judged {
    /// The verdict.
    pub verdict: Verdict,
    /// The rejection message as a JSON string, quotes included.
    pub message_json: Box<[u8]>,
}

impl Judged {
    /// Wraps a verdict.
    pub fn new(verdict: Verdict) -> Self {
        let message_json = match &verdict {
            Verdict::Reject { message, .. } => {
                let mut out = Vec::with_capacity(message.len() + 2);
                push_json_str(&mut out, message);
                out.into_boxed_slice()
            }
            _ => Box::default(),
        };
        Judged {
            verdict,
            message_json,
        }
    }
}

/// The judge of one pod on one node: the resource map pods are read with.
#[derive(Debug, Clone)]
pub(crate) struct Judge {
    resources: ResourceMap,
}

impl Judge {
    /// A judge reading pods with `resources`.
    pub(crate) fn new(resources: ResourceMap) -> Self {
        Judge { resources }
    }

    /// The resource map pods are read with.
    pub(crate) fn resources(&self) -> &ResourceMap {
        &self.resources
    }

    /// Judges one node with usable data. `reuse` keeps, for the call, what nodes of one
    /// machine type share (the planner, the Topology Manager prepared for its settings)
    /// and, unless it is [`Reuse::plain`], the kubelet's admissions by
    /// the part of the node's usage they read ([`Prepared::relevant_usage`]), so that
    /// node states differing only in devices the pod cannot get are admitted once.
    pub(crate) fn judge<'s>(
        &'s self,
        e: &'s Effective,
        req: &'s PodRequest,
        reuse: &mut Reuse<'s>,
    ) -> Verdict {
        let Some(request) = &req.plan else {
            return Verdict::Fit(NEUTRAL_SCORE);
        };
        let nt = &e.info.topology;
        let Reuse {
            planners,
            prepared,
            never,
            admissions,
            scores,
        } = reuse;
        let planner = planners
            .entry(nt.id)
            .or_insert_with(|| Planner::new(&nt.topology));
        let lean = prepared.entry(e.machine_key).or_insert_with(|| {
            let tm = Prepared::new(&nt.topology, &e.info.settings, &self.resources);
            LeanPod::new(tm, &req.pod)
        });
        let mut kubelet = Kubelet {
            lean,
            req,
            machine: e.machine_key,
            memo: admissions.as_mut(),
            used: &e.used,
            relevant: None,
            state: None,
        };
        let settings = &e.info.settings;
        let strict = matches!(
            settings.topology_manager_policy,
            Policy::Restricted | Policy::SingleNumaNode
        );
        let first = kubelet.on_used(0);
        if strict && let Some(o) = first.as_deref().filter(|o| !o.admitted) {
            let unresolvable = kubelet.on_free().is_some_and(|o| !o.admitted);
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
        let admitted = first.as_ref().is_some_and(|o| o.admitted);
        // What the planner reads of the usage (an address the topology lacks is the
        // planner's error, as `plan` would give it).
        let reading = match planner.reading(&e.used) {
            Ok(r) => r,
            Err(err) => return Verdict::Neutral(format!("planner: {err}")),
        };
        let planned = match scores {
            Some(scores) => planned(planner, nt.id, request, &reading, scores, !admitted),
            None => planner.plan(request, &e.used).map(|p| Some(p.score)),
        };
        match planned {
            Ok(score) => Verdict::Fit(match (first.filter(|o| o.admitted), score) {
                (Some(first), _) => kubelet_priority(&mut kubelet, planner, &reading, e, &first),
                (None, Some(score)) => score_priority(&score, e.fragmentation),
                // Not asked for (the kubelet admits): unreached, but plan it in full.
                (None, None) => planner
                    .plan(request, &e.used)
                    .map_or(NEUTRAL_SCORE, |p| score_priority(&p.score, e.fragmentation)),
            }),
            Err(PlanError::Unsatisfiable { bound, detail, .. }) => {
                let unresolvable = *never
                    .entry(nt.id)
                    .or_insert_with(|| planner.plan(request, &NodeUsage::empty()).is_err());
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
}

/// A kubelet admission shared by node states of one machine type whose usage reads the
/// same for the pod: (machine key, seed, used GPUs, NICs and CPUs it reads).
type AdmissionKey = (u64, u64, Vec<Bdf>, Vec<Bdf>, CpuSet);

/// Admissions judged in one call, by [`AdmissionKey`] (hashed with a fast seeded hasher:
/// these keys are hashed thousands of times a call).
type Admissions = HashMap<AdmissionKey, Option<Rc<Brief>>, FastHash>;

/// The planner's answers in one call (one pod), by topology and the part of the node's
/// usage the planner reads ([`Reading`]): the score of its plan (`None`: only known to
/// exist), or why there is none.
type Scores = KeyMap<HashMap<Reading, Result<Option<Score>, PlanError>, FastHash>>;

/// The planner's answer for the pod on a node's usage, as the planner reads it (on
/// topology `topology`), shared through `scores`: with
/// `need_score` the score of its plan, else only whether there is one (`Ok(None)` when
/// there is and its score is not known), or why there is none.
fn planned(
    planner: &Planner<'_>,
    topology: u64,
    request: &topoalign_plan::Request,
    reading: &Reading,
    scores: &mut Scores,
    need_score: bool,
) -> Result<Option<Score>, PlanError> {
    let score = || planner.score(request, reading).map(Some);
    let known = scores.entry(topology).or_default();
    if let Some(answer) = known.get_mut(reading) {
        if need_score && matches!(answer, Ok(None)) {
            *answer = score();
        }
        return answer.clone();
    }
    let answer = if need_score {
        score()
    } else {
        planner.feasible(request, reading).map(|()| None)
    };
    known.insert(reading.clone(), answer.clone());
    answer
}

/// What one call's judgements of many nodes share, per machine type: the planner (by
/// topology), the Topology Manager prepared for the topology and its
/// settings with the call's pod read on it (one pod per call), and the kubelet's
/// admissions (by the usage they read).
pub(crate) struct Reuse<'s> {
    planners: KeyMap<Planner<'s>>,
    prepared: KeyMap<LeanPod<'s>>,
    /// Whether the planner finds no plan for the pod even on the free node.
    never: KeyMap<bool>,
    admissions: Option<Admissions>,
    /// The planner's answers by what it reads of the usage (all planned in full when
    /// `None`).
    scores: Option<Scores>,
}

impl Default for Reuse<'_> {
    fn default() -> Self {
        Reuse {
            planners: KeyMap::default(),
            prepared: KeyMap::default(),
            never: KeyMap::default(),
            admissions: Some(Admissions::default()),
            scores: Some(Scores::default()),
        }
    }
}

impl Reuse<'_> {
    /// No admission or plan shared: every node's admissions simulated in full (`tm`'s
    /// `Prepared::simulate`, not its lean admission) on its whole usage, and every node
    /// planned in full ([`Planner::plan`], not [`Planner::score`]) (the straightforward
    /// judgement the shared one is tested against).
    #[cfg(test)]
    pub(crate) fn plain() -> Self {
        Reuse {
            admissions: None,
            scores: None,
            ..Reuse::default()
        }
    }
}

/// The kubelet's admissions of one pod on one node, shared through the call's
/// [`Admissions`] when it has them.
struct Kubelet<'k, 's> {
    lean: &'k LeanPod<'s>,
    req: &'k PodRequest,
    machine: u64,
    memo: Option<&'k mut Admissions>,
    /// The node's usage, and the part of it the pod's admissions read (made once).
    used: &'k NodeUsage,
    relevant: Option<NodeUsage>,
    /// The node state of the lean admission, made at the first draw and shared by all.
    state: Option<Result<LeanState<'k, 's>, SimError>>,
}

impl Kubelet<'_, '_> {
    /// The admission of the pod on the node's usage (`seed`: the draw of the plugins'
    /// random choices), or `None` when it cannot be simulated on this data (which is not
    /// held against the node).
    fn on_used(&mut self, seed: u64) -> Option<Rc<Brief>> {
        let Some(memo) = self.memo.as_deref_mut() else {
            let full = self
                .lean
                .prepared()
                .simulate(&self.req.pod, self.used, seed);
            return brief_of(self.req, full.map(|o| Brief::of(&o))).map(Rc::new);
        };
        let r = (self.relevant).get_or_insert_with(|| self.lean.relevant_usage(self.used));
        let used = self.used;
        let key = if (r.gpus.len(), r.nics.len(), r.cpus.len())
            == (used.gpus.len(), used.nics.len(), used.cpus.len())
        {
            // Nothing left out: the states that read as this one are mostly this very
            // state (judged once a call), so the admission is not kept (keeping them all
            // costs more memory and time than the rare share saves).
            None
        } else {
            let key = (
                self.machine,
                seed,
                r.gpus.clone(),
                r.nics.clone(),
                r.cpus.clone(),
            );
            if let Some(o) = memo.get(&key) {
                return o.clone();
            }
            Some(key)
        };
        let (lean, req) = (self.lean, self.req);
        let admitted = match self.state.get_or_insert_with(|| lean.state(used)) {
            Ok(state) => state.admit(seed),
            Err(e) => Err(e.clone()),
        };
        let o = brief_of(req, admitted).map(Rc::new);
        if let (Some(key), Some(memo)) = (key, self.memo.as_deref_mut()) {
            memo.insert(key, o.clone());
        }
        o
    }

    /// The admission of the pod on the node with nothing in use (draw 0).
    fn on_free(&mut self) -> Option<Rc<Brief>> {
        let free = NodeUsage::empty();
        let Some(memo) = self.memo.as_deref_mut() else {
            let full = self.lean.prepared().simulate(&self.req.pod, &free, 0);
            return brief_of(self.req, full.map(|o| Brief::of(&o))).map(Rc::new);
        };
        let key = (self.machine, 0, Vec::new(), Vec::new(), CpuSet::new());
        if let Some(o) = memo.get(&key) {
            return o.clone();
        }
        let o = brief_of(self.req, self.lean.state(&free).and_then(|s| s.admit(0))).map(Rc::new);
        memo.insert(key, o.clone());
        o
    }
}

/// The priority of what the kubelet would allocate, averaged over [`KUBELET_DRAWS`]
/// draws of the device plugins' random choices (`first` is draw 0). Draws that allocate
/// alike score alike: each distinct allocation is scored once.
fn kubelet_priority(
    kubelet: &mut Kubelet<'_, '_>,
    planner: &Planner<'_>,
    reading: &Reading,
    e: &Effective,
    first: &Brief,
) -> i64 {
    let points = |o: &Brief| score_points(&kubelet_score(planner, reading, o), e.fragmentation);
    let mut scored: Vec<(Rc<Brief>, f64)> = Vec::new();
    let first_points = points(first);
    let mut total = first_points;
    let mut n = 1.0;
    for seed in 1..KUBELET_DRAWS {
        if let Some(o) = kubelet.on_used(seed).filter(|o| o.admitted) {
            let p = if *o == *first {
                first_points
            } else if let Some((_, p)) = scored.iter().find(|(b, _)| *b == o) {
                *p
            } else {
                let p = points(&o);
                scored.push((o, p));
                p
            };
            total += p;
            n += 1.0;
        }
    }
    to_priority(total / n)
}

/// The kubelet's admission, or `None` when it cannot be simulated on this data (which
/// is not held against the node).
fn brief_of(req: &PodRequest, admission: Result<Brief, SimError>) -> Option<Brief> {
    match admission {
        Ok(o) => Some(o),
        Err(err) => {
            tracing::debug!(pod = %req.key, error = %err, "Topology Manager simulation skipped");
            None
        }
    }
}

/// Draws of the kubelet's allocation a score averages: GPU device plugins without a
/// preferred allocation get their devices in Go's random set order (the `tm` crate's
/// `unsorted` allocator), so one draw is one possible outcome, not the outcome.
pub(crate) const KUBELET_DRAWS: u64 = 4;

/// The alignment of what the kubelet would allocate: its GPU↔closest-NIC pairs (as
/// `nvidia-smi topo -m` classes them), the NUMA nodes it spans and the fragmentation
/// left on the node (`planner`: the node's; `reading`: its usage before the pod, as the
/// planner reads it).
fn kubelet_score(planner: &Planner<'_>, reading: &Reading, o: &Brief) -> Score {
    let mut s = Score {
        pairs: 0,
        gdr_pairs: 0,
        worst_pair: None,
        pair_rank_sum: 0,
        numa_span: o.numa_nodes_used.len(),
        numa_distance: 0,
        gpu_interconnect: 0,
        fragmentation: planner.fragmentation(reading, &o.devices),
    };
    for p in &o.pairs {
        let Some(class) = p.class else { continue };
        s.pairs += 1;
        s.gdr_pairs += usize::from(p.gdr);
        s.worst_pair = s.worst_pair.max(Some(class));
        s.pair_rank_sum += class.rank();
    }
    s
}

/// What a node's MIG devices say of a pod, before any topology judging.
pub(crate) enum MigSeen {
    /// The node's MIG devices cannot hold the pod's set (now, or ever).
    Reject(Judged),
    /// A single-strategy node offers the pod's `nvidia.com/gpu` as MIG instances of its
    /// one profile: nothing of the whole-GPU topology applies, so the node passes as
    /// unmanaged.
    Pass,
}

/// The MIG verdict of each candidate for a pod asking `nvidia.com/mig-*`, or
/// `nvidia.com/gpu` where a node's device plugin uses the single strategy (empty for
/// other pods): a rejection where the node's MIG devices cannot hold the set now
/// (unresolvable when no geometry of the node ever could); a pass for a single-strategy
/// node that holds it; `None` where a mixed node holds it or the node shows no MIG
/// (judged as any node).
pub(crate) fn mig_verdicts<N: AsRef<str>>(
    state: &ClusterState,
    req: &PodRequest,
    names: &[N],
) -> Vec<Option<MigSeen>> {
    // A plain `nvidia.com/gpu` pod only meets MIG on single-strategy nodes: without any
    // MIG node (the common cluster) the names are not looked up one by one.
    if !req.mig.has_profiles() && (req.mig.gpus == 0 || !state.has_mig()) {
        return Vec::new();
    }
    names
        .iter()
        .map(|n| {
            let node = state.mig_node(n.as_ref())?;
            let single = node.strategy == Some(Strategy::Single);
            if !single && !req.mig.has_profiles() {
                return None;
            }
            let Err(short) = node.fits_now(&req.mig) else {
                return single.then_some(MigSeen::Pass);
            };
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
            Some(MigSeen::Reject(Judged::new(Verdict::Reject {
                message,
                unresolvable: never,
                kind: RejectKind::Mig,
            })))
        })
        .collect()
}
