//! The one entry point that judges a pod on candidate nodes, whichever wing it takes:
//! [`judge_all`] gives each candidate's [`NodeVerdict`] (fits or why not, and its
//! priority). The HTTP verbs write their answers from it; the offline decision reads it.
//!
//! A pod whose ResourceClaims use known DeviceClasses is judged by the DRA wing on
//! ResourceSlices ([`DraShared`]); any other pod by the device-plugin wing on the
//! NodeResourceTopology/label state ([`Decider`] over [`ClusterState`]). Each call's
//! metrics and logs are written here, once, after its candidates are judged.

use std::collections::BTreeMap;
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant, SystemTime};

use serde_json::Value;

use crate::dra::room::Waiting;
use crate::dra::shared::DraShared;
use crate::dra::verdict::{DraNode, PodClaims, priorities};
use crate::metrics::{Metrics, label};
use crate::plugin::judge::{Judged, RejectKind, Seen, Verdict};
use crate::plugin::podreq::{PodError, PodRequest, pod_request};
use crate::plugin::shared::{CacheStats, Decider, Fresh, Pending};
use crate::plugin::state::ClusterState;
use crate::score::NEUTRAL_SCORE;
use crate::turns::Turns;

/// What a judgement is for: the metrics label, and whether metrics and logs are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verb {
    /// The scheduler's filter call.
    Filter,
    /// The scheduler's prioritize call.
    Prioritize,
    /// An offline explanation: no metrics, no logs of the call.
    Explain,
}

impl Verb {
    /// The metrics and log label.
    pub fn as_str(self) -> &'static str {
        match self {
            Verb::Filter => "filter",
            Verb::Prioritize => "prioritize",
            Verb::Explain => "explain",
        }
    }
}

/// Everything a pod is judged with: both wings' states and deciders, and where the
/// call's metrics go (none: offline).
#[derive(Debug, Clone, Copy)]
pub struct Judges<'a> {
    /// The device-plugin wing's node state.
    pub state: &'a RwLock<ClusterState>,
    /// The device-plugin wing's decision core.
    pub decider: &'a Decider,
    /// The DRA wing's state (`None`: no DRA wing, every pod is judged by the
    /// device-plugin wing, as offline where there are no slices).
    pub dra: Option<&'a DraShared>,
    /// Where the call's counters go (`None`: not counted).
    pub metrics: Option<&'a Metrics>,
    /// The call's work budget, for the log when it runs out.
    pub budget: Duration,
    /// Turns at judging node states the cache lacks, shared by the server's calls
    /// (`None`: judged at once, as offline).
    pub turns: Option<&'a Turns>,
}

/// One candidate's ruling, borrowed for the visit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ruling<'a> {
    /// Judged by the device-plugin wing.
    Plugin(Seen<'a>),
    /// Judged by the DRA wing (`None`: the pod's claims could not be judged now).
    Dra(Option<&'a DraNode>),
}

/// Why a candidate fails the filter, borrowed for the visit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Refusal<'a> {
    /// Why, in words.
    pub message: &'a str,
    /// The same as a JSON string (quotes included), when already written.
    pub message_json: Option<&'a [u8]>,
    /// Whether preempting pods on the node could not help.
    pub unresolvable: bool,
}

impl<'a> Ruling<'a> {
    /// The filter's answer: `None` when the node passes.
    pub fn refusal(&self) -> Option<Refusal<'a>> {
        match *self {
            Ruling::Plugin(seen) => seen.rejection().map(|r| Refusal {
                message: r.message,
                message_json: Some(r.message_json),
                unresolvable: r.unresolvable,
            }),
            Ruling::Dra(Some(DraNode::Reject(m))) => Some(Refusal {
                message: m,
                message_json: None,
                unresolvable: false,
            }),
            Ruling::Dra(_) => None,
        }
    }
}

/// One candidate's verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NodeVerdict<'a> {
    /// Its index among the candidates.
    pub index: usize,
    /// The node.
    pub name: &'a str,
    /// What was found.
    pub ruling: Ruling<'a>,
    /// Its priority (0 for a node that fails the filter).
    pub score: i64,
}

impl NodeVerdict<'_> {
    /// Whether the node passes the filter.
    pub fn passes(&self) -> bool {
        self.ruling.refusal().is_none()
    }
}

/// Which wing judged the pod.
#[derive(Debug, Clone)]
pub enum Judgement {
    /// The device-plugin wing, on this request.
    Plugin(Box<PodRequest>),
    /// The DRA wing.
    Dra,
}

/// Judges `pod` on every candidate of `names` and calls `f` with each verdict in order:
/// the DRA wing for a pod with claims of known classes, else the device-plugin wing
/// (its verdicts from the cache, or judged now with no lock held, until `deadline`;
/// nodes not judged by then pass with the neutral score). The call's metrics and logs
/// are written afterwards (not for [`Verb::Explain`]). Fails only when the pod cannot be
/// read.
pub fn judge_all<N: AsRef<str>>(
    judges: &Judges<'_>,
    verb: Verb,
    pod: &Value,
    names: &[N],
    deadline: Option<Instant>,
    mut f: impl FnMut(NodeVerdict<'_>),
) -> Result<Judgement, PodError> {
    if let Some(dra) = judges.dra {
        let claims = dra.resolve(pod);
        if !matches!(claims, PodClaims::NotOurs) {
            let (verdicts, scores) =
                judge_dra(dra, judges.metrics, verb, pod, claims, names, deadline);
            for (index, ((n, v), score)) in names.iter().zip(&verdicts).zip(scores).enumerate() {
                f(NodeVerdict {
                    index,
                    name: n.as_ref(),
                    ruling: Ruling::Dra(v.as_deref()),
                    score,
                });
            }
            return Ok(Judgement::Dra);
        }
    }
    let req = pod_request(pod, judges.decider.resources())?;
    judge_plugin(judges, verb, &req, names, deadline, f);
    Ok(Judgement::Plugin(Box::new(req)))
}

/// The device-plugin wing of [`judge_all`].
fn judge_plugin<N: AsRef<str>>(
    judges: &Judges<'_>,
    verb: Verb,
    req: &PodRequest,
    names: &[N],
    deadline: Option<Instant>,
    mut f: impl FnMut(NodeVerdict<'_>),
) {
    let now = SystemTime::now();
    let mut tally = Tally::default();
    let mut failed = 0usize;
    let mut each = |index: usize, name: &str, seen: Seen<'_>| {
        if verb != Verb::Explain {
            tally.note(verb, &req.key, name, &seen);
        }
        if seen.rejection().is_some() {
            failed += 1;
        }
        f(NodeVerdict {
            index,
            name,
            ruling: Ruling::Plugin(seen),
            score: seen.score(),
        });
    };
    // A warm call is visited under the lock that finds its verdicts cached; any other
    // judges what it has to with no lock held, then visits.
    let first = {
        let state = judges.state.read().unwrap_or_else(|p| p.into_inner());
        judges
            .decider
            .visit_cached(&state, req, names, now, &mut each)
    };
    let stats = match first {
        Ok(stats) => stats,
        Err(pending) => {
            let fresh = judge_within(judges, verb, req, &pending, deadline);
            let state = judges.state.read().unwrap_or_else(|p| p.into_inner());
            judges
                .decider
                .visit_judged(&state, req, names, now, &fresh, &mut each)
        }
    };
    if let Some(m) = judges.metrics {
        tally.record(m, verb, &req.key, stats);
    }
    if verb == Verb::Filter && req.is_managed() {
        tracing::debug!(pod = %req.key, candidates = names.len(), failed, "filter");
    }
}

/// Judges the node states a call has to (found under the state's read lock and shared)
/// with no lock held, until `deadline`. Logs and counts a budget spent.
fn judge_within(
    judges: &Judges<'_>,
    verb: Verb,
    req: &PodRequest,
    pending: &Pending,
    deadline: Option<Instant>,
) -> Fresh {
    // Only a call with states to judge waits for a turn; one still waiting when its
    // budget is spent judges nothing.
    let fresh = match judges.turns.filter(|_| !pending.is_empty()) {
        None => judges.decider.judge_pending(req, pending, deadline),
        Some(turns) => match turns.take(deadline) {
            Some(_turn) => judges.decider.judge_pending(req, pending, deadline),
            None => Fresh::none_of(pending),
        },
    };
    if fresh.skipped > 0
        && let Some(m) = judges.metrics
    {
        m.budget_spent
            .get_or_create(&label("verb", verb.as_str()))
            .inc();
        tracing::warn!(
            verb = verb.as_str(),
            pod = %req.key,
            judged = fresh.len(),
            not_judged = fresh.skipped,
            budget_ms = judges.budget.as_millis() as u64,
            "work budget spent: the node states not judged pass with a neutral score (their verdicts are cached for the next calls as they are judged)"
        );
    }
    fresh
}

/// What one call saw, counted while the candidates are judged and written to the
/// metrics and logs once afterwards.
#[derive(Debug, Default)]
struct Tally {
    /// Nodes filtered out, by [`RejectKind`] (counted per node of a 20,000-node call: an
    /// array, not a map keyed by label).
    filtered: [u64; RejectKind::ALL.len()],
    neutral: BTreeMap<&'static str, (u64, Vec<String>)>,
}

impl Tally {
    fn note(&mut self, verb: Verb, pod: &str, name: &str, seen: &Seen<'_>) {
        if verb == Verb::Filter
            && let Some(r) = seen.rejection()
        {
            self.filtered[r.kind as usize] += 1;
        }
        let Some(label) = seen.neutral_label() else {
            return;
        };
        let verb = verb.as_str();
        let (count, sample) = self.neutral.entry(label).or_default();
        *count += 1;
        if sample.len() < 5 && label != "not_managed" {
            sample.push(name.to_string());
        }
        let why = match seen {
            Seen::Broken(w) => Some(*w),
            Seen::Judged(Judged {
                verdict: Verdict::Neutral(w),
                ..
            }) => Some(w.as_str()),
            _ => None,
        };
        if let Some(why) = why {
            tracing::debug!(verb, pod, node = %name, why, "node not judged");
        }
    }

    fn record(self, metrics: &Metrics, verb: Verb, pod: &str, stats: CacheStats) {
        let verb = verb.as_str();
        metrics.cache_hits.inc_by(stats.hits);
        metrics.cache_misses.inc_by(stats.misses);
        for (kind, n) in RejectKind::ALL.iter().zip(self.filtered) {
            if n > 0 {
                metrics
                    .filtered
                    .get_or_create(&label("reason", kind.label()))
                    .inc_by(n);
            }
        }
        for (reason, (count, sample)) in self.neutral {
            metrics
                .neutral
                .get_or_create(&label("reason", reason))
                .inc_by(count);
            if reason != "not_managed" {
                tracing::info!(verb, pod, reason, count, nodes = ?sample, "nodes passed with a neutral score");
            }
        }
    }
}

/// The DRA wing of [`judge_all`].
///
/// - Filter: every candidate judged; the ones whose claims cannot be allocated are
///   dropped, except a node on which the extender holds an allocation it assumed
///   ([`DraShared::assume`]): the pod it was assumed for may have gone elsewhere, so the
///   extender's view of that node may be fuller than the scheduler's, and the scheduler's
///   own DRA plugin has already kept only nodes the pod fits on. With one candidate left
///   the scheduler takes it without asking for priorities: the extender assumes the pod
///   goes there.
/// - Prioritize (and the offline explanation): every candidate judged, then weighed
///   against each other and the pods waiting for a node ([`priorities`]); the scheduler
///   takes the one top candidate, and the extender assumes the pod goes there.
///
/// Before either, what was assumed for the pod goes (it is being scheduled again). Then
/// the metrics and logs.
fn judge_dra<N: AsRef<str>>(
    dra: &DraShared,
    metrics: Option<&Metrics>,
    verb: Verb,
    pod: &Value,
    claims: PodClaims,
    names: &[N],
    deadline: Option<Instant>,
) -> (Vec<Option<Arc<DraNode>>>, Vec<i64>) {
    let quiet = verb == Verb::Explain;
    let filter = verb == Verb::Filter;
    let verb = verb.as_str();
    let text = |p: &str| pod.pointer(p).and_then(Value::as_str).unwrap_or("");
    let key = format!("{}/{}", text("/metadata/namespace"), text("/metadata/name"));
    let uid = text("/metadata/uid");
    let now = Instant::now();
    if !quiet {
        dra.settle(uid, now);
    }
    let mut outcomes: BTreeMap<&'static str, (u64, Vec<String>)> = BTreeMap::new();
    let mut note = |outcome: &'static str, name: &str| {
        let (n, sample) = outcomes.entry(outcome).or_default();
        *n += 1;
        if sample.len() < 5 {
            sample.push(name.to_string());
        }
    };
    let mut foreign = false;
    let mut resolved = None;
    let verdicts: Vec<Option<Arc<DraNode>>> = match claims {
        PodClaims::Judge(r) => {
            foreign = r.foreign;
            if r.from_template > 0 && !quiet {
                tracing::debug!(verb, pod = %key, claims = r.from_template, "generated claims not seen yet; judged on their templates");
            }
            let judged = dra.judge_nodes(&r, names, deadline);
            for (n, v) in names.iter().zip(&judged) {
                note(v.outcome(), n.as_ref());
                if let DraNode::Neutral(why) = &**v
                    && !quiet
                {
                    tracing::debug!(verb, pod = %key, node = %n.as_ref(), why = why.why(), "node not judged");
                }
            }
            let verdicts: Vec<Option<Arc<DraNode>>> = if filter {
                let st = dra.read();
                judged
                    .into_iter()
                    .zip(names)
                    .map(|(v, n)| {
                        let phantom =
                            matches!(&*v, DraNode::Reject(_)) && st.holds_assumed_on(n.as_ref());
                        (!phantom).then_some(v)
                    })
                    .collect()
            } else {
                judged.into_iter().map(Some).collect()
            };
            resolved = Some(r);
            verdicts
        }
        PodClaims::Unjudged(label, why) => {
            if !quiet {
                tracing::info!(verb, pod = %key, reason = label, %why, "pod's claims not judged; every node passes with a neutral score");
            }
            for n in names {
                note(label, n.as_ref());
            }
            vec![None; names.len()]
        }
        PodClaims::NotOurs => vec![None; names.len()],
    };
    let refs: Vec<Option<&DraNode>> = verdicts.iter().map(Option::as_deref).collect();
    let scores = match &resolved {
        Some(r) if filter => {
            let passing: Vec<usize> = (0..names.len())
                .filter(|i| !matches!(refs[*i], Some(DraNode::Reject(_))))
                .collect();
            if let ([only], false) = (passing.as_slice(), quiet) {
                dra.assume(uid, r, names[*only].as_ref(), now);
            }
            vec![NEUTRAL_SCORE; names.len()]
        }
        Some(r) => {
            let waiting = if dra.read().keep_room {
                dra.waiting(uid)
            } else {
                Waiting::none()
            };
            let scores = priorities(names, &refs, foreign, &waiting);
            if !quiet {
                tracing::debug!(verb, pod = %key, waiting = waiting.needs().len(), "candidates weighed against the pods waiting");
                let top = (0..names.len())
                    .filter(|i| matches!(refs[*i], Some(DraNode::Fit(_))))
                    .max_by_key(|i| (scores[*i], std::cmp::Reverse(*i)));
                if let Some(i) = top {
                    dra.assume(uid, r, names[i].as_ref(), now);
                }
            }
            scores
        }
        None => vec![NEUTRAL_SCORE; names.len()],
    };
    if let Some(metrics) = metrics {
        record_dra(metrics, verb, &key, outcomes);
    }
    (verdicts, scores)
}

/// Writes the DRA outcomes of one call to the metrics and logs.
fn record_dra(
    metrics: &Metrics,
    verb: &str,
    key: &str,
    outcomes: BTreeMap<&'static str, (u64, Vec<String>)>,
) {
    for (outcome, (n, sample)) in outcomes {
        metrics
            .dra_verdicts
            .get_or_create(&vec![
                ("verb".to_string(), verb.to_string()),
                ("outcome".to_string(), outcome.to_string()),
            ])
            .inc_by(n);
        match outcome {
            "fit" => {}
            "reject" => {
                if verb == "filter" {
                    metrics
                        .filtered
                        .get_or_create(&label("reason", "dra_claim"))
                        .inc_by(n);
                }
            }
            neutral => {
                metrics
                    .neutral
                    .get_or_create(&label("reason", neutral))
                    .inc_by(n);
                tracing::info!(verb, pod = %key, reason = neutral, count = n, nodes = ?sample, "nodes passed with a neutral score");
            }
        }
    }
}
