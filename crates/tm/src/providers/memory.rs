//! Static memory manager hints, mirroring kubernetes
//! `pkg/kubelet/cm/memorymanager/policy_static.go` (`GetTopologyHints`,
//! `calculateHints`, `isHintPreferred`) for regular memory.

use std::collections::BTreeMap;

use crate::bitmask::iterate_masks;
use crate::hint::{ProviderHints, TopologyHint};
use crate::node::MemoryNode;
use crate::pod::MEMORY;

/// Mirrors `calculateHints`: a mask qualifies when its allocatable memory holds the
/// request, no single node of a multi-node group is used alone, no node already used
/// alone (or with another group) joins a multi-node mask, and its free memory holds the
/// request. Preferred iff the width is the narrowest whose *allocatable* memory fits.
/// Like the kubelet, a request that fits nowhere yields no entry at all, which the merge
/// then reads as "no preference".
pub(crate) fn memory_hints(state: &BTreeMap<u32, MemoryNode>, requested: u64) -> ProviderHints {
    let mut out = ProviderHints::new();
    if requested == 0 {
        return out;
    }
    let nodes: Vec<u32> = state.keys().copied().collect();
    let mut min_affinity_size = nodes.len() as u32;
    let mut hints = Vec::new();
    for mask in iterate_masks(&nodes) {
        let bits = mask.bits();
        let single = bits.len() == 1;
        let node = |id: &u32| state.get(id);
        let free: u64 = bits.iter().filter_map(node).map(|n| n.free).sum();
        let allocatable: u64 = bits.iter().filter_map(node).map(|n| n.allocatable).sum();
        if allocatable < requested {
            continue;
        }
        if mask.count() < min_affinity_size {
            min_affinity_size = mask.count();
        }
        if single && node(&bits[0]).is_some_and(|n| n.cells.len() > 1) {
            continue;
        }
        let conflict = bits
            .iter()
            .filter_map(node)
            .any(|n| !single && n.assignments > 0 && (n.cells.len() == 1 || n.cells != bits));
        if conflict || free < requested {
            continue;
        }
        hints.push(TopologyHint::new(mask, false));
    }
    if hints.is_empty() {
        return out;
    }
    for h in &mut hints {
        h.preferred = h.affinity.map(|m| m.count()) == Some(min_affinity_size);
    }
    out.insert(MEMORY.to_string(), Some(hints));
    out
}
