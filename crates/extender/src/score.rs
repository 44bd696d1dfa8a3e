//! From a plan to an extender priority: the achievable alignment on the node's free
//! devices, minus the fragmentation the placement would cause, on 0 ..= 10.

use topoalign_plan::Score;

use crate::protocol::MAX_EXTENDER_PRIORITY;

/// The score a node gets when the extender cannot judge it (no, stale or broken data):
/// the middle of the scale, so that it neither wins over a node known to align the pod
/// well nor loses to one known to align it badly.
pub(crate) const NEUTRAL_SCORE: i64 = MAX_EXTENDER_PRIORITY / 2;

/// Alignment quality of a score (the planner's, or one measured on what the kubelet
/// would allocate) in 0.0 ..= 1.0: for pods with NICs, half the mean pair quality (PIX 1,
/// PXB 0.75, PHB 0.5, NODE 0.25, SYS 0) and half the share of pairs with GPUDirect RDMA;
/// 1.0 for GPU-only pods. Each NUMA node spanned beyond the first costs 0.1.
pub(crate) fn score_quality(s: &Score) -> f64 {
    let mut q = if s.pairs == 0 {
        1.0
    } else {
        let pairs = s.pairs as f64;
        let pair_q = 1.0 - f64::from(s.pair_rank_sum) / (4.0 * pairs);
        let gdr_q = s.gdr_pairs as f64 / pairs;
        0.5 * pair_q + 0.5 * gdr_q
    };
    q -= 0.1 * s.numa_span.saturating_sub(1) as f64;
    q.clamp(0.0, 1.0)
}

/// Points taken per switch, NUMA node or fabric island the placement leaves partially
/// used (the planner's fragmentation measure), and given back per group it completes.
pub(crate) const FRAGMENTATION_WEIGHT: f64 = 0.25;
/// The most points fragmentation can take (so alignment quality dominates).
pub(crate) const MAX_FRAGMENTATION_PENALTY: f64 = 2.0;

/// The priority of a plan's score: `10 × quality − 0.25 × (fragmentation after −
/// before)`, the penalty bounded to −1 ..= 2 points, rounded and clamped to 0 ..= 10.
pub(crate) fn score_priority(s: &Score, fragmentation_before: u32) -> i64 {
    to_priority(score_points(s, fragmentation_before))
}

/// Points rounded and clamped to the protocol's 0 ..= 10.
pub(crate) fn to_priority(points: f64) -> i64 {
    (points.round() as i64).clamp(0, MAX_EXTENDER_PRIORITY)
}

/// The unrounded points of [`score_priority`] (to average several draws).
pub(crate) fn score_points(s: &Score, fragmentation_before: u32) -> f64 {
    let caused = i64::from(s.fragmentation) - i64::from(fragmentation_before);
    let penalty = (FRAGMENTATION_WEIGHT * caused as f64).clamp(-1.0, MAX_FRAGMENTATION_PENALTY);
    MAX_EXTENDER_PRIORITY as f64 * score_quality(s) - penalty
}
