//! The warm call in one pass: when the cache holds a verdict for every candidate the
//! call has to judge, the candidates are visited under the one lock that found them.
//!
//! Finding what a call has to judge and then visiting its candidates read every node's
//! slot, dense data and cached verdict twice, in the scheduler's order (at random in
//! memory: at 20,000 nodes that was most of a warm call, in perf). Here each is read once:
//! the first pass notes what each candidate gets (a few bytes, in order); the second says
//! it. A call that finds any node state without a verdict visits nothing here and goes
//! the long way ([`Decider::pending`], judging, [`Decider::visit_judged`]).

use std::time::SystemTime;

use crate::plugin::judge::{MigSeen, Seen, mig_verdicts};
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
    /// nothing and returns the node states to judge ([`Decider::pending`]).
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
        let Some(cache) = &self.cache else {
            return Err(self.pending(state, req, names, now));
        };
        let mig = mig_verdicts(state, req, names);
        let mut cache = cache.lock().unwrap_or_else(|p| p.into_inner());
        let found = cache
            .peek_mut(req)
            .and_then(|shape| find_all(state, names, &mig, now, |s, k| shape.index(s, k)));
        let Some(found) = found else {
            drop(cache);
            return Err(self.pending(state, req, names, now));
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

/// The first pass over `names`: what each candidate gets, or `None` at the first node
/// state `index` finds no verdict for.
fn find_all<N: AsRef<str>>(
    state: &ClusterState,
    names: &[N],
    mig: &[Option<MigSeen>],
    now: SystemTime,
    mut index: impl FnMut(Slot, u64) -> Option<u32>,
) -> Option<Vec<Found>> {
    let slots = state.slots_of(names);
    let mut found = Vec::with_capacity(slots.len());
    for (i, &slot) in slots.iter().enumerate() {
        found.push(match mig.get(i).and_then(Option::as_ref) {
            Some(MigSeen::Reject(_)) => Found::Mig,
            Some(MigSeen::Pass) => Found::NotManaged,
            None => match slot.and_then(|s| Some((s, state.hot(s)?))) {
                None => Found::Unknown,
                Some((s, hot)) if !hot.known => Found::NotKnown(s),
                Some((_, hot)) if state.is_stale_at(hot.reported_at, now) => Found::Stale,
                Some((s, hot)) => Found::Cached(index(s, hot.state_key)?),
            },
        });
    }
    Some(found)
}
