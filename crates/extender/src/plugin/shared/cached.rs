//! The first pass over a call's candidates: what each gets from the cache, and the node
//! states the call still has to judge, found together under one lock.
//!
//! Finding what a call has to judge and then visiting its candidates read every node's
//! slot, dense data and cached verdict twice, in the scheduler's order (at random in
//! memory: at 20,000 nodes that was most of a warm call, in perf). Here each is read once:
//! the pass notes what each candidate gets (a few bytes, in order) and which states have
//! no verdict. A warm call (none without) is then said from the notes; any other goes on
//! to judging and [`Decider::visit_judged`].

use std::time::SystemTime;

use crate::plugin::cache::Shape;
use crate::plugin::judge::{MigSeen, Seen, mig_verdicts};
use crate::plugin::keys::KeyMap;
use crate::plugin::podreq::PodRequest;
use crate::plugin::shared::{CacheStats, Decider, Fresh, Pending};
use crate::plugin::state::{ClusterState, NodeView, Slot};

/// What the first pass found for one candidate (said by the second).
#[derive(Debug, Clone, Copy)]
enum Found {
    /// The MIG judgement decides (its verdict in the call's MIG list).
    Mig,
    /// Passed as not managed (a MIG node that takes the pod as it is).
    NotManaged,
    /// No data for the node.
    Unknown,
    /// Data the node's view tells about (broken, or none).
    NotKnown(Slot),
    /// The agent's report is too old.
    Stale,
    /// The cached verdict at this index of the pod's shape.
    Cached(u32),
}

impl Decider {
    /// Calls `f(index, name, seen)` for every candidate in order when no candidate's
    /// node state lacks a cached verdict (the warm call), with the state's lock the caller
    /// holds and the cache's held throughout: `Ok` with the counts. Otherwise calls
    /// nothing and returns the node states to judge: one per distinct state with no
    /// cached verdict for `req`, its data shared (so that the state's lock can be let go
    /// before judging).
    pub(crate) fn visit_cached<N: AsRef<str>>(
        &self,
        state: &ClusterState,
        req: &PodRequest,
        names: &[N],
        now: SystemTime,
        f: &mut impl FnMut(usize, &str, Seen<'_>),
    ) -> Result<CacheStats, Pending> {
        if !req.is_managed() {
            return Ok(self.visit_judged(state, req, names, now, &Fresh::default(), f));
        }
        let mig = mig_verdicts(state, req, names);
        let mut cache = self
            .cache
            .as_ref()
            .map(|m| m.lock().unwrap_or_else(|p| p.into_inner()));
        let shape = cache.as_mut().and_then(|c| c.peek_mut(req));
        let (found, pending) = find_all(state, names, &mig, now, shape);
        let (Some(found), Some(cache)) = (found, cache.as_mut()) else {
            return Err(pending);
        };
        let shape = cache.shape(req);
        let mut stats = CacheStats::default();
        for (i, (n, found)) in names.iter().zip(found).enumerate() {
            let name = n.as_ref();
            let seen = match found {
                Found::Mig => match mig.get(i) {
                    Some(Some(MigSeen::Reject(j))) => Seen::Judged(j),
                    _ => Seen::NotManaged,
                },
                Found::NotManaged => Seen::NotManaged,
                Found::Unknown => Seen::Unknown,
                Found::NotKnown(slot) => match state.view(slot) {
                    Some(NodeView::Broken(why)) => Seen::Broken(why),
                    _ => Seen::Unknown,
                },
                Found::Stale => Seen::Stale,
                Found::Cached(v) => match shape.judged(v) {
                    Some(j) => {
                        stats.hits += 1;
                        Seen::Judged(j)
                    }
                    None => Seen::OverBudget,
                },
            };
            f(i, name, seen);
        }
        Ok(stats)
    }
}

/// The one pass over `names`: what each candidate gets (`None` once a node state has no
/// verdict in `shape`), and the states without one. A candidate the MIG judgement decides
/// needs no verdict.
fn find_all<N: AsRef<str>>(
    state: &ClusterState,
    names: &[N],
    mig: &[Option<MigSeen>],
    now: SystemTime,
    mut shape: Option<&mut Shape>,
) -> (Option<Vec<Found>>, Pending) {
    let slots = state.slots_of(names);
    let mut found = Some(Vec::with_capacity(slots.len()));
    let mut pending = Pending::default();
    let mut seen: KeyMap<()> = KeyMap::default();
    for (i, &slot) in slots.iter().enumerate() {
        let next = match mig.get(i).and_then(Option::as_ref) {
            Some(MigSeen::Reject(_)) => Found::Mig,
            Some(MigSeen::Pass) => Found::NotManaged,
            None => match slot.and_then(|s| Some((s, state.hot(s)?))) {
                None => Found::Unknown,
                Some((s, hot)) if !hot.known => Found::NotKnown(s),
                Some((_, hot)) if state.is_stale_at(hot.reported_at, now) => Found::Stale,
                Some((s, hot)) => match shape.as_mut().and_then(|sh| sh.index(s, hot.state_key)) {
                    Some(v) => Found::Cached(v),
                    None => {
                        found = None;
                        if seen.insert(hot.state_key, ()).is_none()
                            && let Some(NodeView::Known(e)) = state.view(s)
                        {
                            pending.nodes.push((hot.state_key, e.clone()));
                        }
                        continue;
                    }
                },
            },
        };
        if let Some(found) = found.as_mut() {
            found.push(next);
        }
    }
    (found, pending)
}
