//! The pure decision core: filter and prioritize one pod over candidate nodes of a
//! [`ClusterState`], with an optional verdict cache keyed by (node state, pod request).
//!
//! Per node: the Topology Manager simulation (the node's policy and scope, via
//! `topoalign-tm`) on the node's free devices, then the planner (`topoalign-plan`) for
//! the best alignment it can still reach and the pod's required pair class. Nodes without
//! usable data are never filtered and get [`NEUTRAL_SCORE`].

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::SystemTime;

use topoalign_plan::{Bound, PlanError, Planner};
use topoalign_tm::{Case, Policy, ResourceMap, simulate};
use topoalign_topology::NodeUsage;

use crate::podreq::PodRequest;
use crate::protocol::{FailedNodesMap, HostPriority};
use crate::score::{NEUTRAL_SCORE, priority};
use crate::state::{ClusterState, Effective, NodeView};

/// A judged node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// The pod fits and aligns; its priority.
    Fit(i64),
    /// The node cannot take the pod aligned.
    Reject {
        /// Why, in words (shown in the pod's events by the scheduler).
        message: String,
        /// Whether preempting pods on the node could not help.
        unresolvable: bool,
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
    cache: Option<Mutex<HashMap<(u64, u64), Verdict>>>,
    cache_limit: usize,
}

impl Decider {
    /// A decider with a verdict cache of at most `cache_limit` entries (0: no cache).
    pub fn new(resources: ResourceMap, cache_limit: usize) -> Self {
        Decider {
            resources,
            cache: (cache_limit > 0).then(|| Mutex::new(HashMap::new())),
            cache_limit,
        }
    }

    /// The resource map pods are read with.
    pub fn resources(&self) -> &ResourceMap {
        &self.resources
    }

    /// Decides every candidate: judged verdicts, or neutral with the reason.
    pub fn decide(
        &self,
        state: &ClusterState,
        req: &PodRequest,
        names: &[String],
        now: SystemTime,
    ) -> (Vec<Decision>, CacheStats) {
        let mut stats = CacheStats::default();
        if !req.is_managed() {
            let d = vec![Decision::Neutral(NeutralReason::NotManaged); names.len()];
            return (d, stats);
        }
        let mut guard = self
            .cache
            .as_ref()
            .map(|m| m.lock().unwrap_or_else(|p| p.into_inner()));
        if let Some(c) = guard.as_mut()
            && c.len() > self.cache_limit
        {
            c.clear();
        }
        let mut planners: HashMap<u64, Planner<'_>> = HashMap::new();
        let out = names
            .iter()
            .map(|name| match state.node(name) {
                None => Decision::Neutral(NeutralReason::Unknown),
                Some(NodeView::Broken(why)) => {
                    Decision::Neutral(NeutralReason::Broken(why.clone()))
                }
                Some(NodeView::Known(e)) if state.is_stale(e, now) => {
                    Decision::Neutral(NeutralReason::Stale)
                }
                Some(NodeView::Known(e)) => {
                    let key = (e.state_key, req.hash);
                    let cached = guard.as_ref().and_then(|c| c.get(&key).cloned());
                    let v = match cached {
                        Some(v) => {
                            stats.hits += 1;
                            v
                        }
                        None => {
                            stats.misses += 1;
                            let v = self.judge(e, req, &mut planners);
                            if let Some(c) = guard.as_mut() {
                                c.insert(key, v.clone());
                            }
                            v
                        }
                    };
                    match v {
                        Verdict::Neutral(why) => Decision::Neutral(NeutralReason::Undecided(why)),
                        v => Decision::Judged(v),
                    }
                }
            })
            .collect();
        (out, stats)
    }

    /// The filter verb.
    pub fn filter(
        &self,
        state: &ClusterState,
        req: &PodRequest,
        names: &[String],
        now: SystemTime,
    ) -> (FilterOutcome, CacheStats) {
        let (decisions, stats) = self.decide(state, req, names, now);
        let mut out = FilterOutcome::default();
        for (name, d) in names.iter().zip(decisions) {
            let pass = match d {
                Decision::Judged(Verdict::Reject {
                    message,
                    unresolvable,
                }) => {
                    if unresolvable {
                        out.unresolvable.insert(name.clone(), message);
                    } else {
                        out.failed.insert(name.clone(), message);
                    }
                    false
                }
                Decision::Judged(_) => true,
                Decision::Neutral(why) => {
                    out.neutral.push((name.clone(), why));
                    true
                }
            };
            out.passed.push(pass);
        }
        (out, stats)
    }

    /// The prioritize verb.
    pub fn prioritize(
        &self,
        state: &ClusterState,
        req: &PodRequest,
        names: &[String],
        now: SystemTime,
    ) -> (PrioritizeOutcome, CacheStats) {
        let (decisions, stats) = self.decide(state, req, names, now);
        let mut out = PrioritizeOutcome::default();
        for (name, d) in names.iter().zip(decisions) {
            let score = match d {
                Decision::Judged(Verdict::Fit(s)) => s,
                Decision::Judged(_) => 0,
                Decision::Neutral(why) => {
                    out.neutral.push((name.clone(), why));
                    NEUTRAL_SCORE
                }
            };
            out.scores.push(HostPriority {
                host: name.clone(),
                score,
            });
        }
        (out, stats)
    }

    /// Judges one node with usable data.
    fn judge<'s>(
        &self,
        e: &'s Effective,
        req: &PodRequest,
        planners: &mut HashMap<u64, Planner<'s>>,
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
        if strict && let Some(message) = self.tm_rejects(e, req, &e.used) {
            let unresolvable = self.tm_rejects(e, req, &NodeUsage::empty()).is_some();
            return Verdict::Reject {
                message: format!(
                    "Topology Manager ({}, scope {}) would reject the pod: {message}",
                    settings.topology_manager_policy.as_str(),
                    settings.topology_manager_scope.as_str()
                ),
                unresolvable,
            };
        }
        match planner.plan(request, &e.used) {
            Ok(plan) => Verdict::Fit(priority(&plan, e.fragmentation)),
            Err(PlanError::Unsatisfiable { bound, detail, .. }) => {
                let unresolvable = planner.plan(request, &NodeUsage::empty()).is_err();
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
                }
            }
            Err(e) => Verdict::Neutral(format!("planner: {e}")),
        }
    }

    /// The Topology Manager's rejection message, or `None` when it admits (or cannot be
    /// simulated on this data, which is not held against the node).
    fn tm_rejects(&self, e: &Effective, req: &PodRequest, usage: &NodeUsage) -> Option<String> {
        let case = Case {
            topology: &e.info.topology.topology,
            settings: &e.info.settings,
            resources: &self.resources,
            pod: &req.pod,
            usage,
            seed: 0,
        };
        match simulate(&case) {
            Ok(o) if !o.admitted => Some(format!(
                "{}: {}",
                o.reason.as_deref().unwrap_or("rejected"),
                o.message.as_deref().unwrap_or("")
            )),
            Ok(_) => None,
            Err(err) => {
                tracing::debug!(pod = %req.key, error = %err, "Topology Manager simulation skipped");
                None
            }
        }
    }
}
