//! What the DRA wing finds: a pod's claims as it reads them, one node's decision, and
//! the candidates' priorities scored against each other.

use std::collections::{BTreeSet, HashMap};

use k8s_openapi::api::resource::v1::ResourceClaimSpec;

use crate::dra::judge::{DraFit, FOREIGN_BANDS, dra_points};
use crate::dra::room::{Room, Supply, Waiting};
use crate::protocol::MAX_EXTENDER_PRIORITY;
use crate::score::NEUTRAL_SCORE;

/// The hasher of the priorities' maps (keys are addresses and small tuples made here).
type Fast = foldhash::fast::FixedState;

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

/// How a fitting candidate stands against the others.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Standing {
    /// Claims of other drivers: the band of the worst GPU–NIC class the stock allocator
    /// gives ([`FOREIGN_BANDS`]; 0 for topoalign's claims).
    band: usize,
    /// Waiting pods left without a node once the pod goes there.
    unplaced: usize,
    /// Pods of the shapes that came lately left without a node after those.
    lately: usize,
    /// Pair quality ([`dra_points`] in thousandths, negated: lower is better; 0 for
    /// claims of other drivers).
    quality: i64,
    /// Pairs the node has left after the pod (packing: the fullest node first).
    left: usize,
    /// A claim of other drivers: packed even when the cluster runs full (see
    /// `priorities`).
    foreign: bool,
}

impl Standing {
    fn of(fit: &DraFit, (unplaced, lately): (usize, usize), foreign: bool) -> Standing {
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
        Standing {
            band,
            unplaced,
            lately,
            quality,
            left: fit.capacity_after,
            foreign,
        }
    }

    /// The order, best first: band, waiting pods left without a node, then (unless
    /// `by_name`: the cluster runs full for the shapes that came lately and the pod is a
    /// small one of topoalign's claims) pair quality and packing; candidates equal on it
    /// go by name.
    fn key(&self, by_name: bool) -> (usize, usize, i64, usize) {
        if by_name && !self.foreign {
            (self.band, self.unplaced, 0, 0)
        } else {
            (self.band, self.unplaced, self.quality, self.left)
        }
    }
}

/// The priorities of a pod's candidates (`names`, in order) from their DRA verdicts,
/// weighed against each other and the pods `waiting`.
///
/// - First the room the waiting pods need (`Room::place`): a candidate that leaves
///   fewer of them without a node goes first (a whole node kept while an 8-pair pod
///   waits, a half for a 4-pair pod; nothing kept while nothing waits).
/// - Then, while every candidate still leaves room for the shapes that came lately
///   ([`Waiting::lately`], after the waiting pods), pair quality (`dra_points`), then
///   packing (the node left with the fewest pairs first). When some candidate does not
///   (the cluster runs full for those shapes: where the pod goes decides whether the next
///   one like them finds a node), a small pod (fewer pairs than half the largest
///   candidate node has in all) does not weigh quality: the candidates go by name, as
///   the stock scheduler's tie-break takes nodes in its filter's order, packing the nodes
///   it has started; a pod of half a node or more still goes by quality (it has few
///   candidates, and its many pairs weigh most in what the cluster gets). Measured on
///   the `placement-dra` stream replayed offline (`crates/extender/tests/it/replay.rs`,
///   seeds 11–50, cluster full): quality for every pod turned away more pods than stock;
///   weighing the shapes that came lately like the waiting pods turned away more than by
///   name; by name for every pod gave 585 unschedulable against stock's 616 and mean
///   rank 0.572 against 0.583; by name for small pods only 582 and 0.561 (lighter load:
///   265 and 0.407 → 262 and 0.339, stock 287 and 0.525).
/// - Claims of other drivers (`foreign`) go by the class band the stock allocator gives
///   first (`FOREIGN_BANDS`): the extender cannot change the devices, only the node.
///   Within a band they are packed (after the room for waiting pods) even when the
///   cluster runs full: on the `vendor` stream replayed offline (40 seeds,
///   `crates/extender/tests/it/replay.rs`) packing left 104 pods unschedulable against
///   stock's 110 and by name 112, with GDR on every GPU for 1468 pods against 1464 by
///   name and stock's 1410.
///
/// The best candidate scores 10 (the top of its band for claims of other drivers: 10, 8
/// or 4), alone, so that the scheduler, which adds its own smaller scores to the
/// extender's times its weight times 10, takes it and the extender knows where the pod
/// goes ([`crate::dra::shared::DraShared::assume`]); candidates as good as it (after it by
/// name) score one less, and each step down the order one less again, at least the
/// bottom of their band. A rejected node scores 0, a node
/// not judged the neutral score.
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
    // The room is weighed only when something waits or came lately.
    let weigh = !(waiting.is_empty() && waiting.lately.is_empty());
    let room = if weigh {
        Room::of(fits.iter().map(|(_, f)| before(f)))
    } else {
        Room::default()
    };
    // Nodes of one kind with the same devices held share one verdict (one `Arc`, by
    // address here): each distinct verdict is weighed once. Nodes going the same way
    // (supply before, after) leave the same pods without one. (Maps keyed by addresses
    // and small tuples, with foldhash: SipHash and growth were half of a warm call.)
    let addr = |f: &DraFit| f as *const DraFit as usize;
    let mut unplaced: HashMap<(Supply, Supply), (usize, usize), Fast> = HashMap::default();
    let mut distinct: HashMap<usize, Standing, Fast> =
        HashMap::with_capacity_and_hasher(fits.len(), Fast::default());
    for (_, f) in &fits {
        if distinct.contains_key(&addr(f)) {
            continue;
        }
        let u = if weigh {
            *unplaced.entry((before(f), after(f))).or_insert_with(|| {
                let (u, rest) = room.with(before(f), after(f)).place(waiting.needs());
                (u, rest.place(&waiting.lately).0)
            })
        } else {
            (0, 0)
        };
        distinct.insert(addr(f), Standing::of(f, u, foreign));
    }
    // Full for the shapes that came lately: a small pod goes by name; a pod of half the
    // largest candidate or more still by quality.
    let full = distinct.values().any(|s| s.lately > 0);
    let whole = fits
        .iter()
        .map(|(_, f)| f.capacity_whole)
        .max()
        .unwrap_or(0);
    let pairs = fits.first().map_or(0, |(_, f)| f.ranks.len());
    let by_name = full && pairs * 2 < whole;
    // The steps down the order: the distinct standings' keys, sorted and deduplicated,
    // numbered within their band.
    let mut keys: Vec<(usize, usize, i64, usize)> =
        distinct.values().map(|s| s.key(by_name)).collect();
    keys.sort_unstable();
    keys.dedup();
    let mut steps: Vec<i64> = Vec::with_capacity(keys.len());
    let (mut band, mut step) = (usize::MAX, 0i64);
    for k in &keys {
        if k.0 != band {
            (band, step) = (k.0, 0);
        } else {
            step += 1;
        }
        steps.push(step);
    }
    let bands: &[(i64, i64)] = if foreign {
        &FOREIGN_BANDS
    } else {
        &[(MAX_EXTENDER_PRIORITY, 1)]
    };
    // A distinct verdict's score below the top, its band's top, and whether it has the
    // best standing.
    let best = keys.first().copied();
    let scored = |s: &Standing| -> (i64, i64, bool) {
        let (hi, lo) = bands[s.band.min(bands.len() - 1)];
        let key = s.key(by_name);
        let step = keys
            .binary_search(&key)
            .ok()
            .and_then(|i| steps.get(i))
            .copied()
            .unwrap_or(0);
        (hi, (hi - 1 - step).max(lo), Some(key) == best)
    };
    let name = |i: usize| names.get(i).map_or("", |n| n.as_ref());
    let mut scores: Vec<i64> = verdicts
        .iter()
        .map(|v| match v {
            Some(DraNode::Reject(_)) => 0,
            _ => NEUTRAL_SCORE,
        })
        .collect();
    let mut top: Option<(usize, i64)> = None;
    for (i, f) in &fits {
        let Some((hi, below, is_best)) = distinct.get(&addr(f)).map(scored) else {
            continue;
        };
        scores[*i] = below;
        // The one best candidate: the first by name of the best standing.
        if is_best && top.is_none_or(|(t, _)| name(*i) < name(t)) {
            top = Some((*i, hi));
        }
    }
    if let Some((i, hi)) = top {
        scores[i] = hi;
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dra::room::Need;

    /// A fit of `ranks` on a node going from `before` to `after` free pairs.
    fn fit(ranks: &[i64], before: usize, after: usize) -> DraNode {
        DraNode::Fit(DraFit {
            ranks: ranks.to_vec(),
            spoiled: 0,
            gpus: before - after,
            capacity_before: before,
            capacity_after: after,
            capacity_whole: 8,
            good_before: 0,
            good_after: 0,
        })
    }

    fn plain(pairs: usize) -> Need {
        Need { pairs, good: false }
    }

    fn scores(nodes: &[DraNode], foreign: bool, waiting: &Waiting) -> Vec<i64> {
        let names: Vec<String> = (0..nodes.len()).map(|i| format!("n{i}")).collect();
        let refs: Vec<Option<&DraNode>> = nodes.iter().map(Some).collect();
        priorities(&names, &refs, foreign, waiting)
    }

    #[test]
    fn the_best_candidate_alone_scores_ten() {
        // PIX on a free node, PIX on a node half used (packs), NODE pairs, rejected.
        let nodes = [
            fit(&[0], 8, 7),
            fit(&[0], 4, 3),
            fit(&[3], 4, 3),
            DraNode::Reject("no".into()),
        ];
        assert_eq!(scores(&nodes, false, &Waiting::none()), [8, 10, 7, 0]);
        // Equal candidates: the first by name alone scores 10.
        let twins = [fit(&[0], 8, 7), fit(&[0], 8, 7)];
        assert_eq!(scores(&twins, false, &Waiting::none()), [10, 9]);
        // One verdict shared by two nodes (nodes of a kind): still one top.
        let shared = fit(&[0], 8, 7);
        assert_eq!(
            priorities(
                &["b", "a"],
                &[Some(&shared), Some(&shared)],
                false,
                &Waiting::none()
            ),
            [9, 10]
        );
        // Not judged: neutral.
        let names = ["a", "b"];
        let n = fit(&[0], 8, 7);
        assert_eq!(
            priorities(&names, &[None, Some(&n)], false, &Waiting::none()),
            [NEUTRAL_SCORE, 10]
        );
    }

    #[test]
    fn room_is_kept_for_what_waits() {
        // Two nodes: a whole one (8 free) with PIX pairs, a 4 with NODE pairs.
        let nodes = [fit(&[0], 8, 7), fit(&[3], 4, 3)];
        assert_eq!(scores(&nodes, false, &Waiting::none()), [10, 8]);
        // An 8-pair pod waits: the whole node stays whole.
        let big = Waiting::new([plain(8)]);
        assert_eq!(scores(&nodes, false, &big), [8, 10]);
        // Two 4-pair pods wait: either way both find room (the 8 keeps two halves, or a
        // half and the 4 the other): quality decides.
        let halves = Waiting::new([plain(4), plain(4)]);
        assert_eq!(scores(&nodes, false, &halves), [10, 8]);
    }

    #[test]
    fn on_a_cluster_full_for_the_shapes_that_came_lately_small_pods_go_by_name() {
        // Lately an 8-pair pod came; neither node can hold one after this pod: quality
        // is not weighed, the first by name goes first (the stock tie-break).
        let nodes = [fit(&[3], 6, 5), fit(&[0], 6, 5)];
        let mut w = Waiting::none();
        w.lately = vec![plain(8)];
        assert_eq!(scores(&nodes, false, &w), [10, 9]);
        // Full as long as one candidate would leave it without a node: here the whole
        // node keeps it only if the pod goes elsewhere.
        let roomy = [fit(&[3], 6, 5), fit(&[0], 6, 5), fit(&[0], 8, 7)];
        assert_eq!(scores(&roomy, false, &w), [10, 9, 9]);
        // Room for it wherever the pod goes (two whole nodes): quality again.
        let spare = [fit(&[3], 8, 7), fit(&[0], 8, 7), fit(&[0], 8, 7)];
        assert_eq!(scores(&spare, false, &w), [8, 10, 9]);
        assert_eq!(scores(&nodes, false, &Waiting::none()), [8, 10]);
        // A pod of half a node (4 of 8 pairs) still goes by quality when full.
        let half = [fit(&[3; 4], 6, 2), fit(&[0; 4], 6, 2)];
        assert_eq!(scores(&half, false, &w), [8, 10]);
        // One pair less than half: by name again.
        let under = [fit(&[3; 3], 6, 3), fit(&[0; 3], 6, 3)];
        assert_eq!(scores(&under, false, &w), [10, 9]);
    }

    #[test]
    fn claims_of_other_drivers_go_by_class_band_first() {
        // NODE, SYS, PHB, no pairs.
        let nodes = [
            fit(&[3], 4, 3),
            fit(&[4], 4, 3),
            fit(&[2], 4, 3),
            fit(&[], 4, 3),
        ];
        let s = scores(&nodes, true, &Waiting::none());
        // The best (PHB or no pair, by name: n2) alone at 10; n3 in the same band 9;
        // NODE 7 (its band's first, not the best candidate); SYS 3.
        assert_eq!(s, [7, 3, 10, 9]);
        assert!(s[0] > NEUTRAL_SCORE && s[1] < NEUTRAL_SCORE);
    }
}
