//! Room for what is waiting: the pods pending with claims the DRA path judges
//! ([`crate::dra::pending`]) each need so many pairs on one node. A placement that takes
//! the room one of them needs leaves it unschedulable when its turn comes; the candidates
//! are weighed first by how many of the waiting pods would still find a node after the
//! pod goes there ([`Room::place`]), then by pair quality, then packed (the node left
//! with the least room first), and the scheduler is given one clear first choice
//! ([`crate::dra::verdict::priorities`]).
//!
//! No constant of one cluster's size: the room kept is what the waiting pods ask for —
//! a whole node while an 8-pair pod waits, half of one for a 4-pair pod — and nothing
//! while nothing waits.

use std::collections::BTreeMap;

use k8s_openapi::api::resource::v1::ResourceClaimSpec;
use topoalign_dra::attr;
use topoalign_dra::publish::{CLASS_GPU, CLASS_PAIR};

/// Waiting pods weighed at most per call: the first ones in the scheduler's order (its
/// queue takes pods by priority, then by age), which a placement affects first.
pub const WAITING_LIMIT: usize = 256;

/// What one pod's claims need on one node: pairs (or GPUs), and whether they must be
/// PXB or better.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct Need {
    /// Pairs (or GPUs) on one node.
    pub pairs: usize,
    /// Whether they must be PXB or better (GPUDirect RDMA pairs).
    pub good: bool,
}

/// Pods that left the queue last (bound, or given up), whose shapes stand for what is
/// coming next ([`Waiting::lately`]).
pub const RECENT: usize = 10;

/// What the pods waiting for a node need, in the order the scheduler takes them, and
/// what the pods that left the queue last needed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Waiting {
    needs: Vec<Need>,
    /// What the last [`RECENT`] pods that left the queue needed, oldest first: the
    /// shapes that came lately, expected again.
    pub lately: Vec<Need>,
}

impl Waiting {
    /// No pod waiting.
    pub fn none() -> Waiting {
        Waiting::default()
    }

    /// The pods' needs, in the scheduler's order; at most [`WAITING_LIMIT`] are kept,
    /// pods that need nothing are dropped.
    pub fn new(needs: impl IntoIterator<Item = Need>) -> Waiting {
        Waiting {
            needs: needs
                .into_iter()
                .filter(|n| n.pairs > 0)
                .take(WAITING_LIMIT)
                .collect(),
            lately: Vec::new(),
        }
    }

    /// The needs, in order.
    pub fn needs(&self) -> &[Need] {
        &self.needs
    }

    /// Whether no pod waits.
    pub fn is_empty(&self) -> bool {
        self.needs.is_empty()
    }
}

/// Whether a selector asks for PXB-or-better pairs: it bounds the pair's `rank` at 1
/// (`rank <= 1`, `rank < 2`; as `topoalign claims --max-class PXB` writes it) or
/// requires `gdr`.
fn asks_good(expr: &str) -> bool {
    let e: String = expr.split_whitespace().collect();
    let bound = |name: &str| {
        [format!("[\"{name}\"]"), format!(".{name}")]
            .into_iter()
            .filter_map(|a| e.find(&a).map(|i| &e[i + a.len()..]))
            .next()
            .map(str::to_string)
    };
    let digit = |rest: &str| rest.chars().next().and_then(|c| c.to_digit(10));
    if let Some(rest) = bound(attr::RANK) {
        if let Some(b) = rest.strip_prefix("<=").and_then(digit) {
            return b <= 1;
        }
        if let Some(b) = rest.strip_prefix('<').and_then(digit) {
            return b <= 2;
        }
    }
    bound(attr::GDR).is_some_and(|rest| !rest.starts_with("==false"))
}

/// What a pod's claims need on one node ([`Need`]): for claims of topoalign's classes
/// the devices requested of the pair and GPU classes (NICs come with them), PXB or better
/// when a pair request's selector asks it; for other drivers' claims the most requested
/// of any one class (a GPU and its NIC are one pair). A request takes its `exactly`
/// count (1 when unset) or its first `firstAvailable` alternative's; a request for all
/// devices of a class counts nothing (it takes what the node has, not a size room can be
/// kept for).
pub fn claim_need(specs: &[ResourceClaimSpec], foreign: bool) -> Need {
    let mut by_class: BTreeMap<&str, usize> = BTreeMap::new();
    let mut good = false;
    for spec in specs {
        let requests = spec.devices.as_ref().and_then(|d| d.requests.as_ref());
        for r in requests.into_iter().flatten() {
            let (class, mode, count, selectors) =
                match (&r.exactly, r.first_available.iter().flatten().next()) {
                    (Some(e), _) => (
                        &e.device_class_name,
                        &e.allocation_mode,
                        e.count,
                        &e.selectors,
                    ),
                    (None, Some(s)) => (
                        &s.device_class_name,
                        &s.allocation_mode,
                        s.count,
                        &s.selectors,
                    ),
                    (None, None) => continue,
                };
            if mode.as_deref() == Some("All") {
                continue;
            }
            let n = usize::try_from(count.unwrap_or(1).max(0)).unwrap_or(0);
            *by_class.entry(class.as_str()).or_default() += n;
            good |= class == CLASS_PAIR
                && selectors
                    .iter()
                    .flatten()
                    .filter_map(|s| s.cel.as_ref())
                    .any(|c| asks_good(&c.expression));
        }
    }
    if foreign {
        return Need {
            pairs: by_class.values().copied().max().unwrap_or(0),
            good: false,
        };
    }
    Need {
        pairs: [CLASS_PAIR, CLASS_GPU]
            .iter()
            .filter_map(|c| by_class.get(c))
            .sum(),
        good,
    }
}

/// What one node can still give at once: pairs (`DraFit::capacity_*`), and GPUs with a
/// PXB-or-better pair (`DraFit::good_*`).
pub(crate) type Supply = (usize, usize);

/// Nodes by what each can still give: how many nodes have room for so many pairs, so many
/// of them PXB or better, sorted by supply (a few distinct supplies per call: a sorted
/// vector clones with one allocation, where a map allocated per entry).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Room(Vec<(Supply, usize)>);

impl Room {
    /// The room of nodes with these supplies.
    pub(crate) fn of(supplies: impl IntoIterator<Item = Supply>) -> Room {
        let mut all: Vec<Supply> = supplies.into_iter().collect();
        all.sort_unstable();
        let mut r: Vec<(Supply, usize)> = Vec::new();
        for s in all {
            match r.last_mut() {
                Some((last, n)) if *last == s => *n += 1,
                _ => r.push((s, 1)),
            }
        }
        Room(r)
    }

    fn add(&mut self, s: Supply) {
        match self.0.binary_search_by_key(&s, |(k, _)| *k) {
            Ok(i) => self.0[i].1 += 1,
            Err(i) => self.0.insert(i, (s, 1)),
        }
    }

    fn remove(&mut self, s: Supply) {
        if let Ok(i) = self.0.binary_search_by_key(&s, |(k, _)| *k) {
            self.0[i].1 -= 1;
            if self.0[i].1 == 0 {
                self.0.remove(i);
            }
        }
    }

    /// The room once one node's supply goes from `before` to `after`.
    pub(crate) fn with(&self, before: Supply, after: Supply) -> Room {
        let mut r = self.clone();
        r.remove(before);
        r.add(after);
        r
    }

    /// How many of the waiting pods find no node, taken in order, each placed on the node
    /// with the least room that holds it (the fewest pairs, then the fewest good ones: the
    /// large rooms and the good pairs stay for the pods that need them, as the extender
    /// steers them); a pod takes good pairs first, as the allocator does.
    #[cfg(test)]
    pub(crate) fn unplaced(&self, waiting: &Waiting) -> usize {
        self.clone().place(waiting.needs()).0
    }

    /// How many of `needs` find no node (as [`Waiting::needs`] are placed: in order, each
    /// on the node with the least room that holds it), and the room left.
    pub(crate) fn place(mut self, needs: &[Need]) -> (usize, Room) {
        let mut unplaced = 0;
        for need in needs {
            let s = need.pairs;
            let from = self.0.partition_point(|((cap, _), _)| *cap < s);
            let fits = self.0[from..]
                .iter()
                .map(|(k, _)| *k)
                .find(|(_, good)| !need.good || *good >= s);
            let Some((cap, good)) = fits else {
                unplaced += 1;
                continue;
            };
            self.remove((cap, good));
            self.add((cap - s, good - good.min(s)));
        }
        (unplaced, self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use topoalign_dra::claim::{ClaimShape, ClaimSpec, claim_spec};

    fn plain(pairs: usize) -> Need {
        Need { pairs, good: false }
    }

    #[test]
    fn waiting_pods_take_the_tightest_room_in_order() {
        let room = Room::of([(8, 8), (2, 0)]);
        let w = Waiting::new([plain(1), plain(8)]);
        // A 1-pair pod then an 8-pair pod: both fit (the small one on the 2).
        assert_eq!(room.unplaced(&w), 0);
        // The current pod on the whole node leaves the 8-pair pod without one…
        assert_eq!(room.with((8, 8), (7, 7)).unplaced(&w), 1);
        // … on the small node it does not.
        assert_eq!(room.with((2, 0), (1, 0)).unplaced(&w), 0);
        // Halves for 4-pair pods: two of them fit an 8 only while it is whole.
        let halves = Waiting::new([plain(4), plain(4)]);
        assert_eq!(Room::of([(8, 0)]).unplaced(&halves), 0);
        assert_eq!(Room::of([(7, 0)]).unplaced(&halves), 1);
        assert_eq!(Room::default().unplaced(&Waiting::none()), 0);
        assert_eq!(Waiting::new([plain(0), plain(2)]).needs(), [plain(2)]);
        assert_eq!(
            Waiting::new(vec![plain(1); 1000]).needs().len(),
            WAITING_LIMIT
        );
    }

    #[test]
    fn pods_that_need_good_pairs_find_them_or_not() {
        let good = Need {
            pairs: 1,
            good: true,
        };
        // Good pairs on the 4, none on the 2: a plain pod takes the 2, the good pod the 4.
        let room = Room::of([(4, 4), (2, 0)]);
        assert_eq!(room.unplaced(&Waiting::new([plain(1), good])), 0);
        // Only one good pair left, taken by a plain pod first where nothing else fits.
        let tight = Room::of([(1, 1)]);
        assert_eq!(tight.unplaced(&Waiting::new([plain(1), good])), 1);
        assert_eq!(tight.unplaced(&Waiting::new([good])), 0);
    }

    #[test]
    fn claims_count_pairs_or_gpus_and_the_class_they_need() {
        let pairs = |n, shape, max_rank| {
            let mut c = ClaimSpec::pairs(n);
            c.shape = shape;
            c.max_rank = max_rank;
            claim_spec(&c).unwrap()
        };
        assert_eq!(
            claim_need(&[pairs(4, ClaimShape::Pairs, None)], false),
            plain(4)
        );
        assert_eq!(
            claim_need(&[pairs(2, ClaimShape::Pairs, Some(1))], false),
            Need {
                pairs: 2,
                good: true
            }
        );
        assert_eq!(
            claim_need(&[pairs(2, ClaimShape::Pairs, Some(2))], false),
            plain(2)
        );
        assert_eq!(
            claim_need(&[pairs(3, ClaimShape::Ladder, None)], false),
            plain(3)
        );
        assert_eq!(
            claim_need(
                &[
                    pairs(1, ClaimShape::Pairs, None),
                    pairs(2, ClaimShape::Pairs, None)
                ],
                false
            ),
            plain(3)
        );
        let foreign: ResourceClaimSpec =
            serde_json::from_value(serde_json::json!({"devices": {"requests": [
            {"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com", "count": 2}},
            {"name": "nic", "exactly": {"deviceClassName": "dranet.net", "count": 2}},
            {"name": "all", "exactly": {"deviceClassName": "x", "allocationMode": "All"}}]}}))
            .unwrap();
        assert_eq!(claim_need(std::slice::from_ref(&foreign), true), plain(2));
        assert_eq!(claim_need(&[foreign], false), plain(0));
        assert!(asks_good("device.attributes[\"topoalign.dev\"].rank < 2"));
        assert!(asks_good("device.attributes[\"topoalign.dev\"][\"gdr\"]"));
        assert!(!asks_good(
            "device.attributes[\"topoalign.dev\"][\"gdr\"] == false"
        ));
        assert!(!asks_good(
            "device.attributes[\"topoalign.dev\"][\"rank\"] <= 3"
        ));
    }
}
