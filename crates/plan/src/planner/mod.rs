//! [`Planner`]: precompute once, then plan many requests against changing usage.

mod assemble;
mod checks;
mod class_problem;
mod explain;
mod host;
mod usage;
mod witness;

use topoalign_topology::{PcieClass, Topology};

use crate::error::{Bound, PlanError};
use crate::model::Model;
use crate::problem::{Found, Problem};
use crate::request::{GpuLinkBound, Request, Usage};
use crate::search;
use crate::types::{Plan, Score};

pub use usage::Reading;
pub(crate) use usage::Taken;

/// A reusable planner for one topology.
#[derive(Debug, Clone)]
pub struct Planner<'t> {
    /// The topology planned on.
    topo: &'t Topology,
    /// Its precomputed class tables.
    model: Model,
}

impl<'t> Planner<'t> {
    /// Precomputes the class tables of a (valid) topology.
    pub fn new(topo: &'t Topology) -> Self {
        Planner {
            topo,
            model: Model::build(topo),
        }
    }

    /// The topology this planner plans on.
    pub fn topology(&self) -> &'t Topology {
        self.topo
    }

    /// Plans one request: the optimal choice under the crate's lexicographic order, or
    /// why there is none.
    pub fn plan(&self, req: &Request, usage: &Usage) -> Result<Plan, PlanError> {
        let taken = self.resolve(usage)?;
        self.check_request(req)?;
        self.check_counts(req, &taken)?;
        if let Some(found) = self.run(req, &taken) {
            return Ok(self.build(req, &taken, &found));
        }
        Err(self.blame(req, &taken, false, |r, found| {
            Some(Box::new(self.build(r, &taken, found)))
        }))
    }

    /// The score of the plan [`Planner::plan`] gives on any usage that reads as
    /// `reading` (see [`Planner::reading`]), or its error without the relaxation plan:
    /// what judging a node needs, without assembling the plan's devices, CPUs, memory
    /// and explanations.
    pub fn score(&self, req: &Request, reading: &Reading) -> Result<Score, PlanError> {
        self.check_request(req)?;
        self.check_counts(req, reading)?;
        match self.run(req, reading) {
            Some(found) => Ok(self.score_of(&found)),
            None => Err(self.blame(req, reading, true, |_, _| None)),
        }
    }

    /// Whether [`Planner::score`] finds a plan on `reading` (`Ok`), or its error: a
    /// greedy choice that meets the bounds answers first; otherwise the search stops at
    /// the first plan it meets instead of proving the best.
    pub fn feasible(&self, req: &Request, reading: &Reading) -> Result<(), PlanError> {
        self.check_request(req)?;
        self.check_counts(req, reading)?;
        if self.witness(req, reading) {
            return Ok(());
        }
        let p = self.problem(req, reading);
        match search::solve_any(&self.model, &p) {
            Some(_) => Ok(()),
            None => Err(self.blame(req, reading, true, |_, _| None)),
        }
    }

    /// The error of a request no choice meets: the bound to blame and the best plan
    /// without it (made by `relaxed_plan` from the relaxed request and its answer, if
    /// at all; with `any`, the answer is the first found, not the best).
    fn blame(
        &self,
        req: &Request,
        taken: &Reading,
        any: bool,
        relaxed_plan: impl Fn(&Request, &(Problem, Found)) -> Option<Box<Plan>>,
    ) -> PlanError {
        let mut relaxed = req.clone();
        let mut tries: Vec<(Bound, Request)> = Vec::new();
        if req.max_pair.is_some() {
            relaxed.max_pair = None;
            tries.push((Bound::MaxPair, relaxed.clone()));
        }
        if req.gpu_link == GpuLinkBound::Nvlink {
            let mut r = req.clone();
            r.gpu_link = GpuLinkBound::Any;
            tries.push((Bound::GpuLink, r));
            if req.max_pair.is_some() {
                let mut both = relaxed.clone();
                both.gpu_link = GpuLinkBound::Any;
                tries.push((Bound::Combined, both));
            }
        }
        for (bound, r) in tries {
            let found = if any {
                let p = self.problem(&r, taken);
                search::solve_any(&self.model, &p).map(|f| (p, f))
            } else {
                self.run(&r, taken)
            };
            if let Some(found) = found {
                let detail = match bound {
                    Bound::MaxPair => format!(
                        "no free GPU/NIC choice keeps every pair at {} or better",
                        req.max_pair.map_or("?", PcieClass::as_str)
                    ),
                    Bound::GpuLink => {
                        format!("no {} free GPUs are all joined by NVLink/xGMI", req.gpus)
                    }
                    _ => "max-pair and gpu-link cannot both be met".to_string(),
                };
                return PlanError::Unsatisfiable {
                    bound,
                    detail,
                    relaxation: relaxed_plan(&r, &found),
                };
            }
        }
        PlanError::Unsatisfiable {
            bound: Bound::Combined,
            detail: "no choice meets every bound".to_string(),
            relaxation: None,
        }
    }

    /// Solves one request against resolved usage: the problem and its best answer, or
    /// `None` when no choice meets the bounds.
    fn run(&self, req: &Request, taken: &Reading) -> Option<(Problem, Found)> {
        let p = self.problem(req, taken);
        search::solve(&self.model, &p).map(|f| (p, f))
    }

    /// The precomputed class tables.
    pub(crate) fn model(&self) -> &Model {
        &self.model
    }
}
