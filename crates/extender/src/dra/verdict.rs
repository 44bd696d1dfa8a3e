//! What the DRA wing finds: a pod's claims as it reads them, one node's decision, and
//! the candidates' priorities scored against each other.

use std::collections::BTreeSet;

use k8s_openapi::api::resource::v1::ResourceClaimSpec;

use crate::dra::judge::{CapacityLevels, DraFit, dra_score, foreign_score};
use crate::score::NEUTRAL_SCORE;

/// `(namespace, name)` of a claim or template.
pub(crate) type ObjKey = (String, String);

/// A pod's claims as the DRA path reads them.
#[derive(Debug, Clone, PartialEq)]
pub enum PodClaims {
    /// No `spec.resourceClaims`, or none of them uses a known DeviceClass: not the DRA
    /// path's pod.
    NotOurs,
    /// The claims cannot be judged now (neutral everywhere, never filtered): a metrics
    /// label and why.
    Unjudged(&'static str, String),
    /// The claim specs to judge.
    Judge(Resolved),
}

/// The claims of one pod, ready to judge.
#[derive(Debug, Clone, PartialEq)]
pub struct Resolved {
    /// The specs of the claims that use known classes, in pod order.
    pub specs: Vec<ResourceClaimSpec>,
    /// Whether some claim uses other drivers' classes (judged with
    /// [`crate::dra::foreign::judge_foreign`] on every class); else every claim uses
    /// topoalign's.
    pub foreign: bool,
    /// The pod's own claims (their devices are not taken from it).
    pub own: BTreeSet<ObjKey>,
    /// Claims judged on their template's spec (the generated claim not seen yet).
    pub from_template: usize,
    /// A hash of the specs (cache key part).
    pub hash: u64,
}

/// Why a node passes with the neutral score on the DRA path.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum DraNeutral {
    /// The node has no slices of the driver (not a topoalign node, or not published yet).
    NoSlices,
    /// The allocator's search ran out of budget.
    Budget(String),
    /// The claim or the slices could not be evaluated (unsupported CEL, bad quantity …).
    Error(String),
    /// Other drivers' devices that publish no NUMA node or PCI address: the pairs' class
    /// is unknown.
    Blind(String),
    /// The call's work budget ran out before the node was judged.
    OverBudget,
}

impl DraNeutral {
    /// The metrics label.
    pub fn label(&self) -> &'static str {
        match self {
            DraNeutral::NoSlices => "dra_no_slices",
            DraNeutral::Budget(_) => "dra_budget",
            DraNeutral::Error(_) => "dra_error",
            DraNeutral::Blind(_) => "dra_blind",
            DraNeutral::OverBudget => "dra_over_budget",
        }
    }

    /// Why, in words.
    pub fn why(&self) -> &str {
        match self {
            DraNeutral::NoSlices => "no ResourceSlices for the claims on the node",
            DraNeutral::OverBudget => "the call's work budget ran out before the node was judged",
            DraNeutral::Budget(w) | DraNeutral::Error(w) | DraNeutral::Blind(w) => w,
        }
    }
}

/// One node's DRA decision.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum DraNode {
    /// Every claim can be allocated: what the allocation reaches and costs (scored
    /// against the other candidates with `dra_score`).
    Fit(DraFit),
    /// Some claim cannot be allocated on the node's free devices.
    Reject(String),
    /// Not judged: passes with the neutral score.
    Neutral(DraNeutral),
}

impl DraNode {
    /// The outcome label of the `dra_verdicts` metric.
    pub fn outcome(&self) -> &'static str {
        match self {
            DraNode::Fit(..) => "fit",
            DraNode::Reject(_) => "reject",
            DraNode::Neutral(n) => n.label(),
        }
    }
}

/// The priorities of a pod's candidates (in order) from their DRA verdicts, scored
/// against each other: the capacity a placement uses up weighs by how many candidates can
/// still hold as many pairs (`CapacityLevels`); claims of other drivers (`foreign`)
/// score by the class the stock allocator gives first (`foreign_score`), topoalign's
/// by `dra_score`. A rejected node scores 0, a node not judged the neutral score.
pub fn priorities(verdicts: &[Option<&DraNode>], foreign: bool, weight: f64) -> Vec<i64> {
    let levels = CapacityLevels::of(verdicts.iter().filter_map(|v| match v {
        Some(DraNode::Fit(f)) => Some(f.capacity_before),
        _ => None,
    }));
    verdicts
        .iter()
        .map(|v| match v {
            Some(DraNode::Fit(f)) if foreign => foreign_score(f, &levels, weight),
            Some(DraNode::Fit(f)) => dra_score(f, &levels, weight),
            Some(DraNode::Reject(_)) => 0,
            _ => NEUTRAL_SCORE,
        })
        .collect()
}

/// Whether a verdict may be shared by every node of a kind: it names no device, pool,
/// slice or node (a fit, a rejection, a search out of budget). Errors and blind verdicts
/// name what they could not read, so they stay the node's own.
pub(crate) fn shareable(v: &DraNode) -> bool {
    matches!(
        v,
        DraNode::Fit(_) | DraNode::Reject(_) | DraNode::Neutral(DraNeutral::Budget(_))
    )
}
