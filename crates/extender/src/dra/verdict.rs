//! What the DRA wing finds: a pod's claims as it reads them, one node's decision, and
//! the candidates' priorities scored against each other.

use std::collections::BTreeSet;

use k8s_openapi::api::resource::v1::ResourceClaimSpec;

use std::collections::HashMap;

use crate::dra::judge::{DraFit, FOREIGN_BANDS, dra_points};
use crate::dra::room::{Room, Supply, Waiting};
use crate::protocol::MAX_EXTENDER_PRIORITY;
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
    /// Every claim can be allocated: what the allocation reaches and costs (weighed
    /// against the other candidates by [`priorities`]).
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

/// How a fitting candidate stands against the others, best first when sorted: the
/// class band (claims of other drivers: the worst GPU–NIC class the stock allocator gives,
/// [`FOREIGN_BANDS`]), then the waiting pods it would leave without a node, then pair
/// quality (claims of topoalign's classes: [`dra_points`], in thousandths, negated), then
/// the room left on the node (packing: the fullest node first).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct Standing {
    band: usize,
    unplaced: usize,
    quality: i64,
    left: usize,
    tier: i64,
    broken: usize,
    good_left: usize,
    expected: usize,
}

impl Standing {
    fn of(fit: &DraFit, (unplaced, expected): (usize, usize), foreign: bool) -> Standing {
        let (band, quality) = if foreign {
            let band = match fit.ranks.iter().max() {
                None => 0,
                Some(r) if *r <= 2 => 0,
                Some(3) => 1,
                Some(_) => 2,
            };
            (band, 0)
        } else {
            let q = dra_points(&fit.ranks, fit.spoiled);
            (0, -(q * 1000.0).round() as i64)
        };
        let worst = fit.ranks.iter().copied().max().unwrap_or(0);
        let (b, a) = (fit.capacity_before, fit.capacity_after);
        let broken = std::iter::successors(Some(1usize), |l| l.checked_mul(2))
            .take_while(|l| *l <= b)
            .filter(|l| *l > a)
            .max()
            .unwrap_or(0);
        Standing {
            band,
            unplaced,
            quality,
            left: fit.capacity_after,
            tier: if worst <= 1 { 0 } else { worst },
            broken,
            good_left: fit.good_after,
            expected,
        }
    }

    fn key(&self) -> (usize, usize, i64, i64, i64) {
        let left = self.left as i64;
        let broken = self.broken as i64;
        match order() {
            23 if self.tier == 1 => (self.band, self.unplaced, 0, 0, 0),
            23 => (self.band, self.unplaced, broken, self.quality, left),
            24 if self.tier == 1 => (self.band, self.unplaced, 0, 0, 0),
            24 => (self.band, self.unplaced, self.quality, left, 0),
            1 => (self.band, self.unplaced, left, self.quality, 0),
            2 => (self.band, self.unplaced, self.tier, left, self.quality),
            3 => (self.band, self.unplaced, broken, self.quality, left),
            4 => (self.band, self.unplaced, broken, left, self.quality),
            5 => (self.band, self.unplaced, self.tier, broken, self.quality),
            6 => (self.band, self.unplaced, self.quality, self.good_left as i64, left),
            7 => (self.band, self.unplaced, self.quality, broken, left),
            8 => (self.band, self.unplaced, self.expected as i64, self.quality, left),
            9 => (self.band, self.unplaced + self.expected, self.quality, left, 0),
            10 => (self.band, self.unplaced, self.expected as i64, left, self.quality),
            11 => (self.band, self.unplaced, self.expected as i64, broken, self.quality),
            12 => (self.band, self.unplaced, self.expected as i64, broken, left),
            13 => (self.band, self.unplaced, 0, 0, 0),
            14 => (self.band, self.unplaced, self.tier, 0, 0),
            15 => (self.band, self.unplaced, self.expected as i64, 0, 0),
            16 => (self.band, self.unplaced, self.expected as i64, self.tier, 0),
            17 => (self.band, self.unplaced, self.quality, 0, 0),
            18 | 20 => (self.band, self.unplaced, self.tier, self.quality, 0),
            19 => (self.band, self.unplaced, self.expected as i64, self.tier, self.quality),
            21 => (self.band, self.unplaced, -left, self.quality, 0),
            22 => (self.band, self.unplaced, self.quality, -left, 0),
            _ => (self.band, self.unplaced, self.quality, left, 0),
        }
    }
}

fn order() -> u8 {
    static ORDER: std::sync::OnceLock<u8> = std::sync::OnceLock::new();
    *ORDER.get_or_init(|| {
        std::env::var("TOPOALIGN_DRA_ORDER")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    })
}

/// The priorities of a pod's candidates (`names`, in order) from their DRA verdicts,
/// weighed against each other and the pods `waiting` ([`Standing`]: the room the waiting
/// pods need first, then the pairs' class, then packing). The best candidate (the first
/// by name among equals) scores 10 (the top of its class band for claims of other
/// drivers: 10, 8 or 4), alone, so that the scheduler, which adds its own smaller scores
/// to the extender's times its weight times 10, takes it and the extender knows where the
/// pod goes; the others score one less per step down the order, at least the bottom of
/// their band. A rejected node scores 0, a node not judged the neutral score.
pub fn priorities<N: AsRef<str>>(
    names: &[N],
    verdicts: &[Option<&DraNode>],
    foreign: bool,
    waiting: &Waiting,
) -> Vec<i64> {
    let fits: Vec<(usize, &DraFit)> = verdicts
        .iter()
        .enumerate()
        .filter_map(|(i, v)| match v {
            Some(DraNode::Fit(f)) => Some((i, f)),
            _ => None,
        })
        .collect();
    let before = |f: &DraFit| (f.capacity_before, f.good_before);
    let after = |f: &DraFit| (f.capacity_after, f.good_after);
    let room = Room::of(fits.iter().map(|(_, f)| before(f)));
    let mut unplaced: HashMap<(Supply, Supply), (usize, usize)> = HashMap::new();
    let mut standings: Vec<(usize, Standing)> = fits
        .iter()
        .map(|(i, f)| {
            let u = if waiting.is_empty() && waiting.expected.is_empty() {
                (0, 0)
            } else {
                *unplaced
                    .entry((before(f), after(f)))
                    .or_insert_with(|| {
                        let (u, rest) = room.with(before(f), after(f)).unplaced_of(waiting.needs());
                        (u, rest.unplaced_of(&waiting.expected).0)
                    })
            };
            (*i, Standing::of(f, u, foreign))
        })
        .collect();
    let name = |i: usize| names.get(i).map_or("", |n| n.as_ref());
    if order() == 23 || order() == 24 {
        let saturated = standings.iter().map(|(_, s)| s.expected).min().unwrap_or(0) > 0;
        for (_, s) in standings.iter_mut() {
            if saturated {
                s.tier = 1; // marks: first fit
            } else {
                s.tier = 0;
            }
        }
    }
    if (18..=20).contains(&order()) {
        // first fit's node among the fewest unplaced, and the nodes whose room goes the same way
        let best_u = standings.iter().map(|(_, s)| s.unplaced).min().unwrap_or(0);
        let ff = standings
            .iter()
            .filter(|(_, s)| s.unplaced == best_u)
            .min_by(|a, b| name(a.0).cmp(name(b.0)))
            .map(|(i, _)| *i);
        if let Some(ff) = ff {
            let fit_of = |i: usize| match verdicts[i] {
                Some(DraNode::Fit(f)) => Some(f),
                _ => None,
            };
            let tr = |f: &DraFit| if order() == 20 { (f.capacity_before, f.capacity_after, 0, 0) } else { (f.capacity_before, f.capacity_after, f.good_before, f.good_after) };
            let t = fit_of(ff).map(tr);
            for (i, s) in standings.iter_mut() {
                let same = fit_of(*i).map(tr) == t;
                s.tier = i64::from(!same);
            }
        }
    }
    standings.sort_by(|(a, sa), (b, sb)| {
        sa.key()
            .cmp(&sb.key())
            .then_with(|| name(*a).cmp(name(*b)))
    });
    let mut scores: Vec<i64> = verdicts
        .iter()
        .map(|v| match v {
            Some(DraNode::Reject(_)) => 0,
            _ => NEUTRAL_SCORE,
        })
        .collect();
    let bands: &[(i64, i64)] = if foreign {
        &FOREIGN_BANDS
    } else {
        &[(MAX_EXTENDER_PRIORITY, 1)]
    };
    let (mut band, mut step) = (usize::MAX, 0i64);
    let mut prev: Option<(usize, usize, i64, i64, i64)> = None;
    for (pos, (i, s)) in standings.iter().enumerate() {
        if s.band != band {
            (band, step) = (s.band, 0);
        } else if prev != Some(s.key()) {
            step += 1;
        }
        prev = Some(s.key());
        let (hi, lo) = bands[s.band.min(bands.len() - 1)];
        scores[*i] = if pos == 0 { hi } else { (hi - 1 - step).max(lo) };
    }
    scores
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
