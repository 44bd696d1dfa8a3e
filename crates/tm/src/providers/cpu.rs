//! Static CPU manager hints, mirroring kubernetes
//! `pkg/kubelet/cm/cpumanager/policy_static.go` (`GetTopologyHints`,
//! `GetPodTopologyHints`, `generateCPUTopologyHints`, `guaranteedCPUs`).

use topoalign_topology::CpuSet;

use crate::bitmask::iterate_masks;
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
    let mut nodes: Vec<u32> = state.numa_of.values().copied().collect();
    nodes.sort_unstable();
    nodes.dedup();
    let available = state.available();
    let numa = |c: u32| state.numa_of.get(&c).copied();
    let mut min_affinity_size = nodes.len() as u32;
    let mut hints = Vec::new();
    'masks: for mask in iterate_masks(&nodes) {
        let in_mask = state.numa_of.values().filter(|n| mask.is_set(**n)).count() as u64;
        if in_mask >= request && mask.count() < min_affinity_size {
            min_affinity_size = mask.count();
        }
        let mut matching = 0u64;
        for &c in reusable.ids() {
            if !numa(c).is_some_and(|n| mask.is_set(n)) {
                continue 'masks;
            }
            matching += 1;
        }
        matching += available
            .ids()
            .iter()
            .filter(|&&c| numa(c).is_some_and(|n| mask.is_set(n)))
            .count() as u64;
        if matching < request {
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
