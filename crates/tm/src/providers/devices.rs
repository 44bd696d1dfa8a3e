//! Device manager hints, mirroring kubernetes
//! `pkg/kubelet/cm/devicemanager/topology_hints.go`.

use std::collections::{BTreeMap, BTreeSet};

use topoalign_topology::Bdf;

use crate::bitmask::{NumaMask, iterate_masks};
use crate::hint::{ProviderHints, TopologyHint};
use crate::node::Pool;

/// Mirrors `GetTopologyHints` / `GetPodTopologyHints` for freshly admitted pods: for every
/// requested resource, nil when no device reports a NUMA node, empty when fewer devices
/// are free (plus reusable) than requested, else the generated hints.
/// `requests` maps pool index → amount; zero amounts are skipped.
pub(crate) fn device_hints(
    pools: &[Pool],
    requests: &BTreeMap<usize, u64>,
    reusable: &BTreeMap<usize, BTreeSet<Bdf>>,
    numa_nodes: &[u32],
) -> ProviderHints {
    let mut out = ProviderHints::new();
    let empty = BTreeSet::new();
    for (&pi, &requested) in requests {
        let pool = &pools[pi];
        if !pool.has_topology() {
            out.insert(pool.name.clone(), None);
            continue;
        }
        let available = pool.available();
        let reuse = reusable.get(&pi).unwrap_or(&empty);
        let union = available.union(reuse).count() as u64;
        if union < requested {
            out.insert(pool.name.clone(), Some(Vec::new()));
            continue;
        }
        out.insert(
            pool.name.clone(),
            Some(generate_device_topology_hints(
                pool, &available, reuse, requested, numa_nodes,
            )),
        );
    }
    out
}

/// Mirrors `generateDeviceTopologyHints`: every NUMA mask (in `IterateBitMasks` order)
/// that covers all reusable devices and holds enough reusable + available devices; a hint
/// is preferred iff its width equals the narrowest width whose devices (allocated ones
/// included) could hold the request.
pub(crate) fn generate_device_topology_hints(
    pool: &Pool,
    available: &BTreeSet<Bdf>,
    reusable: &BTreeSet<Bdf>,
    request: u64,
    numa_nodes: &[u32],
) -> Vec<TopologyHint> {
    // Per-node counts once, then a sum over each mask's nodes (not a pass over every
    // device per mask): all the pool's devices, the available ones.
    let mut total: BTreeMap<u32, u64> = BTreeMap::new();
    for n in pool.devices.iter().filter_map(|d| d.numa) {
        *total.entry(n).or_default() += 1;
    }
    let mut free: BTreeMap<u32, u64> = BTreeMap::new();
    for n in available
        .iter()
        .filter_map(|id| pool.device(*id).and_then(|d| d.numa))
    {
        *free.entry(n).or_default() += 1;
    }
    // Reusable devices with a NUMA node (the others neither count nor constrain).
    let reused: Vec<u32> = (reusable.iter())
        .filter_map(|id| pool.device(*id).and_then(|d| d.numa))
        .collect();
    let sum_in = |counts: &BTreeMap<u32, u64>, mask: NumaMask| -> u64 {
        (counts.iter())
            .filter(|(n, _)| mask.is_set(**n))
            .map(|(_, c)| c)
            .sum()
    };
    let mut min_affinity_size = numa_nodes.len() as u32;
    let mut hints = Vec::new();
    for mask in iterate_masks(numa_nodes) {
        if sum_in(&total, mask) >= request && mask.count() < min_affinity_size {
            min_affinity_size = mask.count();
        }
        if !reused.iter().all(|&n| mask.is_set(n)) {
            continue;
        }
        if (reused.len() as u64) + sum_in(&free, mask) < request {
            continue;
        }
        hints.push(TopologyHint::new(mask, false));
    }
    TopologyHint::prefer_size(&mut hints, min_affinity_size);
    hints
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::node::Device;
    use crate::resources::{DeviceKind, PluginAllocator};

    fn pool(numas: &[Option<u32>]) -> Pool {
        Pool {
            name: "x.io/dev".into(),
            kind: DeviceKind::Gpus(None),
            allocator: PluginAllocator::LowestAddress,
            devices: numas
                .iter()
                .enumerate()
                .map(|(i, n)| Device {
                    id: Bdf::new(0, i as u8 + 1, 0, 0),
                    numa: *n,
                    gpu: None,
                    nic: None,
                })
                .collect(),
            allocated: BTreeSet::new(),
        }
    }

    fn show(h: &[TopologyHint]) -> Vec<String> {
        h.iter().map(ToString::to_string).collect()
    }

    #[test]
    fn four_per_node_request_four() {
        let p = pool(&[
            Some(0),
            Some(0),
            Some(0),
            Some(0),
            Some(1),
            Some(1),
            Some(1),
            Some(1),
        ]);
        let h = generate_device_topology_hints(&p, &p.available(), &BTreeSet::new(), 4, &[0, 1]);
        assert_eq!(show(&h), ["{0}T", "{1}T", "{0,1}F"]);
        let h8 = generate_device_topology_hints(&p, &p.available(), &BTreeSet::new(), 8, &[0, 1]);
        assert_eq!(show(&h8), ["{0,1}T"]);
    }

    #[test]
    fn allocated_devices_still_count_for_the_minimal_width() {
        let mut p = pool(&[Some(0), Some(0), Some(1), Some(1)]);
        p.allocated.insert(Bdf::new(0, 1, 0, 0));
        let h = generate_device_topology_hints(&p, &p.available(), &BTreeSet::new(), 2, &[0, 1]);
        // NUMA 0 has only one free device: {0} is infeasible, yet width 1 stays the
        // minimum, so {0,1} is not preferred.
        assert_eq!(show(&h), ["{1}T", "{0,1}F"]);
    }

    #[test]
    fn reusable_devices_pin_the_mask() {
        let p = pool(&[Some(0), Some(0), Some(1), Some(1)]);
        let reuse: BTreeSet<Bdf> = [Bdf::new(0, 1, 0, 0)].into();
        let avail: BTreeSet<Bdf> = p.available().difference(&reuse).copied().collect();
        let h = generate_device_topology_hints(&p, &avail, &reuse, 1, &[0, 1]);
        assert_eq!(show(&h), ["{0}T", "{0,1}F"]);
    }

    #[test]
    fn no_topology_is_dont_care_and_shortage_is_impossible() {
        let p = pool(&[None, None]);
        let mut req = BTreeMap::new();
        req.insert(0usize, 1u64);
        let h = device_hints(&[p], &req, &BTreeMap::new(), &[0, 1]);
        assert_eq!(h.get("x.io/dev"), Some(&None));
        let q = pool(&[Some(0)]);
        req.insert(0, 2);
        let h = device_hints(&[q], &req, &BTreeMap::new(), &[0, 1]);
        assert_eq!(h.get("x.io/dev"), Some(&Some(vec![])));
    }
}
