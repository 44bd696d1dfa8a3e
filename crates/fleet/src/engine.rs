//! The discrete-event simulation: one pod stream, one copy of the fleet per policy, a
//! scheduler that tries nodes in a fixed order, a FIFO pending queue with patience.

use std::cmp::Ordering;
use std::collections::{BinaryHeap, VecDeque};
use std::sync::Arc;

use serde::Serialize;
use topoalign_plan::CostKey;
use topoalign_rng::Rng;
use topoalign_topology::{GpuNicPath, Topology};

use crate::dra::MatchOn;
use crate::error::FleetError;
use crate::metrics::{PolicyReport, UtilSample};
use crate::node::{Assignment, NodeState};
use crate::placers::{Attempt, NodeKind, PlaceOptions};
use crate::policy::Policy;
use crate::workload::{self, PodArrival, StreamLength, WorkloadSpec};

/// One kind of node in the fleet and how many of it.
#[derive(Debug, Clone)]
pub struct NodeGroup {
    /// The topology (a profile).
    pub topology: Arc<Topology>,
    /// Number of nodes of this kind.
    pub count: usize,
}

/// Everything a run needs.
#[derive(Debug, Clone)]
pub struct SimConfig {
    /// The fleet, in node order (nodes of the first group first).
    pub fleet: Vec<NodeGroup>,
    /// The pod stream.
    pub workload: WorkloadSpec,
    /// The seed of the stream and of every random choice.
    pub seed: u64,
    /// Policies to run, in report order.
    pub policies: Vec<Policy>,
    /// How long a pod waits in the pending queue before it times out (minutes).
    pub patience: f64,
    /// The DRA constraint attribute.
    pub dra_match: MatchOn,
    /// The DRA search budget per node.
    pub dra_budget: u64,
    /// Points of the utilisation time series.
    pub samples: usize,
}

/// The fleet's size, checked once for every simulation: 1 to 100,000 nodes (`--nodes`).
pub(crate) fn check_node_count(fleet: &[NodeGroup]) -> Result<usize, FleetError> {
    let nodes: usize = fleet.iter().map(|g| g.count).sum();
    if nodes == 0 {
        return Err(FleetError::invalid("--nodes", 0, "at least 1 node"));
    }
    if nodes > 100_000 {
        return Err(FleetError::invalid(
            "--nodes",
            nodes,
            "at most 100000 nodes",
        ));
    }
    Ok(nodes)
}

impl SimConfig {
    /// Checks every parameter.
    pub fn validate(&self) -> Result<(), FleetError> {
        check_node_count(&self.fleet)?;
        if !(self.patience.is_finite() && self.patience >= 0.0) {
            return Err(FleetError::invalid(
                "--patience",
                self.patience,
                "a finite number >= 0",
            ));
        }
        if self.dra_budget == 0 {
            return Err(FleetError::invalid("--dra-budget", 0, "at least 1 step"));
        }
        if self.samples < 2 || self.samples > 10_000 {
            return Err(FleetError::invalid(
                "--samples",
                self.samples,
                "2 to 10000 points",
            ));
        }
        if self.policies.is_empty() {
            return Err(FleetError::UnknownPolicy(String::new()));
        }
        self.workload.validate()
    }
}

/// The result of a run.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SimReport {
    /// The seed.
    pub seed: u64,
    /// (profile, node count) per group.
    pub fleet: Vec<(String, usize)>,
    /// Total GPUs in the fleet.
    pub fleet_gpus: usize,
    /// The workload parameters.
    pub workload: WorkloadSpec,
    /// Pods in the stream.
    pub pods: usize,
    /// GPU+NIC pairs asked for by the whole stream.
    pub pairs_requested: u64,
    /// Simulated time span (minutes).
    pub horizon: f64,
    /// One report per policy.
    pub policies: Vec<PolicyReport>,
}

/// Runs the simulation.
pub fn simulate(config: &SimConfig) -> Result<SimReport, FleetError> {
    simulate_with_progress(config, &mut |_, _| {})
}

/// Runs the simulation, calling `progress(done, total)` as pods are processed (total =
/// pods × policies), at most every 256 pods and once at the end of each policy.
pub fn simulate_with_progress(
    config: &SimConfig,
    progress: &mut dyn FnMut(u64, u64),
) -> Result<SimReport, FleetError> {
    config.validate()?;
    let pods = workload::generate(&config.workload, config.seed)?;
    // One model, DRA publication, kubelet and planner per node type, shared by every
    // node of the type and every policy.
    let kinds = config
        .fleet
        .iter()
        .map(|g| NodeKind::new(&g.topology))
        .collect::<Result<Vec<_>, _>>()?;
    let node_kind: Vec<usize> = config
        .fleet
        .iter()
        .enumerate()
        .flat_map(|(k, g)| std::iter::repeat_n(k, g.count))
        .collect();
    let horizon = match config.workload.length {
        StreamLength::Duration(d) => d,
        StreamLength::Pods(_) => pods.last().map_or(0.0, |p| p.at),
    };
    let total = (pods.len() * config.policies.len()) as u64;
    let mut policies = Vec::new();
    for (k, &p) in config.policies.iter().enumerate() {
        let base = (k * pods.len()) as u64;
        let run = Run::new(p, config, &kinds, &node_kind, horizon);
        policies.push(run.execute(&pods, &mut |done| progress(base + done, total))?);
    }
    Ok(SimReport {
        seed: config.seed,
        fleet: config
            .fleet
            .iter()
            .map(|g| (g.topology.name.clone(), g.count))
            .collect(),
        fleet_gpus: node_kind.iter().map(|&k| kinds[k].model.gpus.len()).sum(),
        workload: config.workload.clone(),
        pods: pods.len(),
        pairs_requested: pods.iter().map(|p| u64::from(p.gpus)).sum(),
        horizon,
        policies,
    })
}

/// A running pod's departure.
#[derive(Debug, Clone)]
struct Departure {
    at: f64,
    seq: usize,
    node: usize,
    assignment: Assignment,
}

impl PartialEq for Departure {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}
impl Eq for Departure {}
impl PartialOrd for Departure {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Departure {
    /// Reversed so that the max-heap pops the earliest departure first.
    fn cmp(&self, other: &Self) -> Ordering {
        other
            .at
            .total_cmp(&self.at)
            .then_with(|| other.seq.cmp(&self.seq))
    }
}

/// One policy's run over its own copy of the fleet.
struct Run<'a, 't> {
    policy: Policy,
    config: &'a SimConfig,
    kinds: &'a [NodeKind<'t>],
    node_kind: &'a [usize],
    states: Vec<NodeState>,
    departures: BinaryHeap<Departure>,
    pending: VecDeque<(PodArrival, f64)>,
    rng: Rng,
    horizon: f64,
    grid_next: usize,
    fleet_gpus: usize,
    used_gpus: usize,
    report: PolicyReport,
}

impl<'a, 't> Run<'a, 't> {
    fn new(
        policy: Policy,
        config: &'a SimConfig,
        kinds: &'a [NodeKind<'t>],
        node_kind: &'a [usize],
        horizon: f64,
    ) -> Self {
        let states = node_kind
            .iter()
            .map(|&k| NodeState::new(&kinds[k].model))
            .collect();
        let fleet_gpus = node_kind.iter().map(|&k| kinds[k].model.gpus.len()).sum();
        Run {
            policy,
            config,
            kinds,
            node_kind,
            states,
            departures: BinaryHeap::new(),
            pending: VecDeque::new(),
            rng: Rng::derive(config.seed, policy.as_str()),
            horizon,
            grid_next: 0,
            fleet_gpus,
            used_gpus: 0,
            report: PolicyReport::new(policy),
        }
    }

    fn execute(
        mut self,
        pods: &[PodArrival],
        progress: &mut dyn FnMut(u64),
    ) -> Result<PolicyReport, FleetError> {
        for (i, pod) in pods.iter().enumerate() {
            if i % 256 == 0 {
                progress(i as u64);
            }
            self.depart_until(pod.at)?;
            self.sample_until(pod.at);
            self.expire(pod.at);
            if !self.try_schedule(pod, pod.at)? {
                self.pending
                    .push_back((*pod, pod.at + self.config.patience));
            }
        }
        self.depart_until(self.horizon)?;
        self.sample_until(self.horizon);
        self.expire(self.horizon);
        self.report.left_pending = self.pending.len() as u64;
        self.report.running_at_end = self.departures.len() as u64;
        self.report.finish();
        progress(pods.len() as u64);
        Ok(self.report)
    }

    /// Processes departures up to `t`, retrying the pending queue after each.
    fn depart_until(&mut self, t: f64) -> Result<(), FleetError> {
        while self.departures.peek().is_some_and(|d| d.at <= t) {
            let Some(d) = self.departures.pop() else {
                break;
            };
            self.sample_until(d.at);
            self.states[d.node].release(&d.assignment);
            self.used_gpus -= d.assignment.gpus.len();
            self.expire(d.at);
            self.retry_pending(d.at)?;
        }
        Ok(())
    }

    /// Tries every pending pod in FIFO order.
    fn retry_pending(&mut self, now: f64) -> Result<(), FleetError> {
        let mut keep = VecDeque::with_capacity(self.pending.len());
        while let Some((pod, deadline)) = self.pending.pop_front() {
            if !self.try_schedule(&pod, now)? {
                keep.push_back((pod, deadline));
            }
        }
        self.pending = keep;
        Ok(())
    }

    /// Drops pending pods whose patience ran out before `now`.
    fn expire(&mut self, now: f64) {
        let before = self.pending.len();
        self.pending.retain(|&(_, deadline)| deadline >= now);
        self.report.timed_out += (before - self.pending.len()) as u64;
    }

    /// Records utilisation samples at grid points up to `t` (the state is constant
    /// between events).
    fn sample_until(&mut self, t: f64) {
        let n = self.config.samples;
        while self.grid_next < n {
            let at = self.horizon * self.grid_next as f64 / (n - 1) as f64;
            if at > t {
                break;
            }
            let util = if self.fleet_gpus == 0 {
                0.0
            } else {
                self.used_gpus as f64 / self.fleet_gpus as f64
            };
            self.report.utilisation.push(UtilSample { at, util });
            self.grid_next += 1;
        }
    }

    /// Schedules `pod` now if a node takes it. Returns true when the pod left the queue
    /// for good (placed or rejected).
    fn try_schedule(&mut self, pod: &PodArrival, now: f64) -> Result<bool, FleetError> {
        let opts = PlaceOptions {
            dra_match: self.config.dra_match,
            dra_budget: self.config.dra_budget,
        };
        let mut best: Option<(usize, Assignment, Vec<GpuNicPath>, Quality)> = None;
        for node in 0..self.states.len() {
            let kind = &self.kinds[self.node_kind[node]];
            let state = &self.states[node];
            if !state.fits_by_count(&kind.model, pod.gpus, pod.nics, pod.cpus) {
                continue;
            }
            match kind.place(self.policy, state, pod, opts, &mut self.rng)? {
                Attempt::Fit {
                    assignment,
                    pairs,
                    cost,
                } => {
                    // Across nodes only the pairs' quality counts (GDR pairs, worst class,
                    // class ranks); equal quality goes to the first node in order, the
                    // scheduler's first fit, so that topoalign packs the fleet exactly as
                    // the other policies do. Policies without a cost take the first fit.
                    let Some(cost) = cost else {
                        best = Some((node, assignment, pairs, Quality::default()));
                        break;
                    };
                    let quality = Quality::of(&cost);
                    if best.as_ref().is_none_or(|b| quality < b.3) {
                        best = Some((node, assignment, pairs, quality));
                    }
                    if quality.is_ideal() {
                        // No node can do better: stop as first fit would.
                        break;
                    }
                }
                Attempt::NoFit => {}
                Attempt::BudgetExceeded => self.report.dra_budget_exceeded += 1,
                Attempt::Rejected => {
                    // The kube-scheduler bound the pod here by counts; the kubelet
                    // refused it. The pod fails and is not retried.
                    self.report.rejected += 1;
                    return Ok(true);
                }
            }
        }
        let Some((node, assignment, pairs, _)) = best else {
            return Ok(false);
        };
        self.report.record_placement(pod, &pairs, now - pod.at);
        self.states[node].take(&assignment);
        self.used_gpus += assignment.gpus.len();
        self.departures.push(Departure {
            at: now + pod.lifetime,
            seq: pod.id,
            node,
            assignment,
        });
        Ok(true)
    }
}

/// The part of a plan's cost the scheduler compares across nodes: pairs without GDR,
/// worst pair class, sum of pair class ranks (lower is better).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord)]
struct Quality {
    no_gdr: u32,
    worst: u32,
    rank_sum: u32,
}

impl Quality {
    fn of(cost: &CostKey) -> Self {
        Quality {
            no_gdr: cost.no_gdr,
            worst: cost.worst,
            rank_sum: cost.rank_sum,
        }
    }

    /// Every pair PIX with GDR: nothing is better.
    fn is_ideal(&self) -> bool {
        self.no_gdr == 0 && self.rank_sum == 0
    }
}
