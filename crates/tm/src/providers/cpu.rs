//! Static CPU manager hints, mirroring kubernetes
//! `pkg/kubelet/cm/cpumanager/policy_static.go` (`GetTopologyHints`,
//! `GetPodTopologyHints`, `generateCPUTopologyHints`, `guaranteedCPUs`).

use std::collections::{BTreeMap, BTreeSet};

use topoalign_topology::CpuSet;

use crate::bitmask::{NumaMask, iterate_masks};
use crate::hint::{ProviderHints, TopologyHint};
use crate::node::CpuState;
use crate::pod::{CPU, Container, Pod, QosClass};

/// Mirrors `guaranteedCPUs`: the container's integer CPU request in a Guaranteed pod,
/// else 0.
pub(crate) fn guaranteed_cpus(pod: &Pod, container: &Container) -> u64 {
    if pod.qos() != QosClass::Guaranteed {
        return 0;
    }
    match container.requests.get(CPU) {
        Some(q) if q.is_integer() => u64::try_from(q.value()).unwrap_or(0),
        _ => 0,
    }
}

/// Mirrors `podGuaranteedCPUs`.
pub(crate) fn pod_guaranteed_cpus(pod: &Pod) -> u64 {
    pod.pod_level(|c| guaranteed_cpus(pod, c))
}

/// Mirrors `GetTopologyHints`: no hints (don't care) when nothing is requested.
pub(crate) fn cpu_hints(state: &CpuState, reusable: &CpuSet, requested: u64) -> ProviderHints {
    let mut out = ProviderHints::new();
    if requested == 0 {
        return out;
    }
    out.insert(
        CPU.to_string(),
        Some(generate_cpu_topology_hints(state, reusable, requested)),
    );
    out
}

/// Mirrors `generateCPUTopologyHints` (without the `align-by-socket` option): masks
/// covering every reusable CPU with enough reusable + available CPUs; preferred iff the
/// width is the narrowest that all CPUs of the machine (reserved included) could fill.
pub(crate) fn generate_cpu_topology_hints(
    state: &CpuState,
    reusable: &CpuSet,
    request: u64,
) -> Vec<TopologyHint> {
    // Per-node counts once, then a sum over each mask's nodes (not a pass over every CPU
    // per mask): every CPU of the machine, the available ones.
    let mut total: BTreeMap<u32, u64> = BTreeMap::new();
    for &n in state.numa_of.values() {
        *total.entry(n).or_default() += 1;
    }
    let nodes: Vec<u32> = total.keys().copied().collect();
    let mut free: BTreeMap<u32, u64> = BTreeMap::new();
    for c in state.available().ids() {
        if let Some(&n) = state.numa_of.get(c) {
            *free.entry(n).or_default() += 1;
        }
    }
    // The reusable CPUs' nodes; `None` when one has no node (no mask covers it).
    let reusable_nodes: Option<BTreeSet<u32>> = (reusable.ids().iter())
        .map(|c| state.numa_of.get(c).copied())
        .collect();
    let reused = reusable.ids().len() as u64;
    let sum_in = |counts: &BTreeMap<u32, u64>, mask: NumaMask| -> u64 {
        (counts.iter())
            .filter(|(n, _)| mask.is_set(**n))
            .map(|(_, c)| c)
            .sum()
    };
    let mut min_affinity_size = nodes.len() as u32;
    let mut hints = Vec::new();
    for mask in iterate_masks(&nodes) {
        if sum_in(&total, mask) >= request && mask.count() < min_affinity_size {
            min_affinity_size = mask.count();
        }
        let covered = (reusable_nodes.as_ref()).is_some_and(|r| r.iter().all(|&n| mask.is_set(n)));
        if !covered || reused + sum_in(&free, mask) < request {
            continue;
        }
        hints.push(TopologyHint::new(mask, false));
    }
    for h in &mut hints {
        if h.affinity.map(|m| m.count()) == Some(min_affinity_size) {
            h.preferred = true;
        }
    }
    hints
}
