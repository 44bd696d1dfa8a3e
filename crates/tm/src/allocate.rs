//! What the managers hand out once the Topology Manager has decided: the device manager's
//! `devicesToAllocate` + `filterByAffinity` (kubernetes
//! `pkg/kubelet/cm/devicemanager/manager.go`), and simplified CPU and memory takes.

use std::collections::{BTreeMap, BTreeSet};

use topoalign_rng::Rng;
use topoalign_topology::{Bdf, CpuSet};

use crate::bitmask::{NumaMask, iterate_masks};
use crate::node::{CpuState, MemoryNode, Pool};
use crate::resources::PluginAllocator;

/// Mirrors `filterByAffinity`: (aligned, unaligned, no-topology) devices. Without a mask
/// (or without topology) every device is "no affinity".
fn filter_by_affinity(
    pool: &Pool,
    available: &BTreeSet<Bdf>,
    affinity: Option<NumaMask>,
) -> (Vec<Bdf>, Vec<Bdf>, Vec<Bdf>) {
    let (mut aligned, mut unaligned, mut none) = (Vec::new(), Vec::new(), Vec::new());
    let mask = match affinity {
        Some(m) if pool.has_topology() => m,
        _ => return (aligned, unaligned, available.iter().copied().collect()),
    };
    for id in available {
        match pool.device(*id).and_then(|d| d.numa) {
            None => none.push(*id),
            Some(n) if mask.is_set(n) => aligned.push(*id),
            Some(_) => unaligned.push(*id),
        }
    }
    (aligned, unaligned, none)
}

/// The plugin's `GetPreferredAllocation(available, mustInclude, size)`; empty when the
/// plugin does not implement it.
fn preferred_allocation(
    allocator: PluginAllocator,
    available: &BTreeSet<Bdf>,
    must_include: &BTreeSet<Bdf>,
    size: usize,
) -> BTreeSet<Bdf> {
    match allocator {
        PluginAllocator::Unsorted(_) => BTreeSet::new(),
        PluginAllocator::LowestAddress => {
            let mut out: BTreeSet<Bdf> = must_include.clone();
            for id in available {
                if out.len() >= size {
                    break;
                }
                out.insert(*id);
            }
            out
        }
    }
}

/// `allocateRemainingFrom`: takes devices (in Go's random set order) until none is
/// needed; true when done.
fn take_from(
    devices: &BTreeSet<Bdf>,
    allocated: &mut BTreeSet<Bdf>,
    pool: &mut Pool,
    needed: &mut usize,
    rng: &mut Rng,
) -> bool {
    let mut order: Vec<Bdf> = devices.difference(allocated).copied().collect();
    rng.shuffle(&mut order);
    for d in order {
        pool.allocated.insert(d);
        allocated.insert(d);
        *needed -= 1;
        if *needed == 0 {
            return true;
        }
    }
    false
}

/// Why devices could not be allocated (the kubelet's `UnexpectedAdmissionError`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct AllocError(pub String);

/// Mirrors `devicesToAllocate` for a container that holds nothing yet: reusable devices
/// first, then (when the aligned devices suffice) the plugin's preferred choice among the
/// aligned ones, else all aligned ones, the plugin's choice among all available, then the
/// unaligned and the no-topology ones. Go's set iteration is random: the order within
/// each step is a shuffle by `rng`.
pub(crate) fn devices_to_allocate(
    pool: &mut Pool,
    required: usize,
    reusable: &BTreeSet<Bdf>,
    affinity: Option<NumaMask>,
    rng: &mut Rng,
) -> Result<Vec<Bdf>, AllocError> {
    let mut needed = required;
    let mut allocated: BTreeSet<Bdf> = BTreeSet::new();
    if needed == 0 {
        return Ok(Vec::new());
    }
    if take_from(reusable, &mut allocated, pool, &mut needed, rng) {
        return Ok(allocated.into_iter().collect());
    }
    let available = pool.available();
    if available.len() < needed {
        return Err(AllocError(format!(
            "requested number of devices unavailable for {}. Requested: {needed}, Available: {}",
            pool.name,
            available.len()
        )));
    }
    let (aligned, unaligned, no_affinity) = filter_by_affinity(pool, &available, affinity);
    let aligned: BTreeSet<Bdf> = aligned.into_iter().collect();
    let unaligned: BTreeSet<Bdf> = unaligned.into_iter().collect();
    let no_affinity: BTreeSet<Bdf> = no_affinity.into_iter().collect();
    let allocator = pool.allocator;
    if needed < aligned.len() {
        let offer: BTreeSet<Bdf> = aligned.union(&allocated).copied().collect();
        let preferred = preferred_allocation(allocator, &offer, &allocated, required);
        let pick: BTreeSet<Bdf> = preferred.intersection(&aligned).copied().collect();
        if take_from(&pick, &mut allocated, pool, &mut needed, rng)
            || take_from(&aligned, &mut allocated, pool, &mut needed, rng)
        {
            return Ok(allocated.into_iter().collect());
        }
        return Err(AllocError(format!(
            "unexpectedly allocated less resources than required. Requested: {required}, Got: {}",
            required - needed
        )));
    }
    if take_from(&aligned, &mut allocated, pool, &mut needed, rng) {
        return Ok(allocated.into_iter().collect());
    }
    let offer: BTreeSet<Bdf> = available.union(&allocated).copied().collect();
    let preferred = preferred_allocation(allocator, &offer, &allocated, required);
    let pick: BTreeSet<Bdf> = preferred.intersection(&available).copied().collect();
    if take_from(&pick, &mut allocated, pool, &mut needed, rng)
        || take_from(&unaligned, &mut allocated, pool, &mut needed, rng)
        || take_from(&no_affinity, &mut allocated, pool, &mut needed, rng)
    {
        return Ok(allocated.into_iter().collect());
    }
    Err(AllocError(format!(
        "unexpectedly allocated less resources than required. Requested: {required}, Got: {}",
        required - needed
    )))
}

/// The static CPU manager's `allocateCPUs`, simplified: reusable CPUs first, then CPUs
/// of the affinity's NUMA nodes, then any; lowest ids first within each step (the
/// kubelet's `takeByTopology` packs whole cores and sockets — the NUMA counts, which is
/// what later hints read, agree whenever the aligned nodes have enough free CPUs).
pub(crate) fn allocate_cpus(
    state: &mut CpuState,
    count: u64,
    reusable: &CpuSet,
    affinity: Option<NumaMask>,
) -> Result<CpuSet, AllocError> {
    let mut chosen: Vec<u32> = reusable
        .ids()
        .iter()
        .copied()
        .take(count as usize)
        .collect();
    let free = state.available();
    let in_affinity =
        |c: &u32| affinity.is_some_and(|m| state.numa_of.get(c).is_some_and(|n| m.is_set(*n)));
    let aligned: Vec<u32> = free.ids().iter().copied().filter(in_affinity).collect();
    let rest: Vec<u32> = free
        .ids()
        .iter()
        .copied()
        .filter(|c| !in_affinity(c))
        .collect();
    for c in aligned.into_iter().chain(rest) {
        if chosen.len() as u64 >= count {
            break;
        }
        chosen.push(c);
    }
    if (chosen.len() as u64) < count {
        return Err(AllocError(format!(
            "not enough cpus available to satisfy request: requested={count}, available={}",
            free.len() + reusable.len()
        )));
    }
    let set = CpuSet::from_ids(chosen);
    state.assigned = state.assigned.union(&set);
    Ok(set)
}

/// The static memory manager's `Allocate`, simplified: a nil or too-small affinity is
/// widened to the narrowest mask containing it whose free memory fits; memory is then
/// taken from its nodes in id order and the nodes are grouped (`Cells`).
pub(crate) fn allocate_memory(
    state: &mut BTreeMap<u32, MemoryNode>,
    bytes: u64,
    affinity: Option<NumaMask>,
) -> Result<Vec<(u32, u64)>, AllocError> {
    if bytes == 0 {
        return Ok(Vec::new());
    }
    let nodes: Vec<u32> = state.keys().copied().collect();
    let base = affinity.unwrap_or_default();
    let free_in = |m: NumaMask| -> u64 {
        m.bits()
            .iter()
            .filter_map(|n| state.get(n))
            .map(|n| n.free)
            .sum()
    };
    let mask = iterate_masks(&nodes)
        .into_iter()
        .filter(|m| base.is_subset_of(*m) && free_in(*m) >= bytes)
        .min_by(|a, b| {
            if a.is_narrower_than(*b) {
                std::cmp::Ordering::Less
            } else if b.is_narrower_than(*a) {
                std::cmp::Ordering::Greater
            } else {
                std::cmp::Ordering::Equal
            }
        })
        .ok_or_else(|| AllocError(format!("not enough free memory for {bytes} bytes")))?;
    let bits = mask.bits();
    let mut left = bytes;
    let mut taken = Vec::new();
    for id in &bits {
        if let Some(n) = state.get_mut(id) {
            let t = n.free.min(left);
            n.free -= t;
            left -= t;
            n.cells = bits.clone();
            n.assignments += 1;
            if t > 0 {
                taken.push((*id, t));
            }
        }
    }
    Ok(taken)
}
