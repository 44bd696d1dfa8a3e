//! One draw of the lean admission: the containers' merges and the device manager's
//! allocation over device indices.

use topoalign_kube_types::kubelet_settings::{Policy, Scope};
use topoalign_kube_types::{TOPOLOGY_AFFINITY_ERROR, UNEXPECTED_ADMISSION_ERROR};
use topoalign_rng::Rng;
use topoalign_topology::CpuSet;

use super::tables::pairs;
use super::{Bits, Brief, LeanPlan, LeanPool, LeanState, rejected};
use crate::bitmask::NumaMask;
use crate::hint::TopologyHint;
use crate::node::Device;
use crate::prepared::Prepared;
use crate::resources::PluginAllocator;

/// One pool during a draw.
struct PoolDraw {
    /// Its allocated devices: the node state's, then the pod's.
    allocated: Bits,
    /// The devices the pod's init containers leave for reuse.
    reuse: Bits,
    /// Its plugin's random choices.
    rng: Rng,
}

/// What the devices given so far add to the brief's NUMA nodes and pairs.
struct Given {
    /// NUMA node ids up to 63, as a mask.
    numa: u64,
    /// Larger NUMA node ids.
    wide: Vec<u32>,
    /// GPUs and NICs, by topology index.
    gpus: Bits,
    nics: Bits,
}

impl Given {
    fn add(&mut self, d: &Device) {
        match d.numa {
            Some(n) if n <= NumaMask::MAX_ID => self.numa |= 1 << n,
            Some(n) => self.wide.push(n),
            None => {}
        }
        if let Some(g) = d.gpu {
            self.gpus.set(g);
        }
        if let Some(n) = d.nic {
            self.nics.set(n);
        }
    }
}

impl LeanPlan {
    /// One draw of the admission (the lean `admit` of the `simulate` module).
    pub(super) fn admit(&self, node: &Prepared<'_>, state: &LeanState<'_, '_>, seed: u64) -> Brief {
        let mut out = Brief {
            admitted: true,
            reason: None,
            message: None,
            devices: Vec::new(),
            cpus: CpuSet::new(),
            memory: Vec::new(),
            numa_nodes_used: Vec::new(),
            pairs: Vec::new(),
        };
        let unaligned = "Resources cannot be allocated with Topology Locality";
        let none = self.tm.policy == Policy::None;
        let pod_affinity = if !none && self.tm.scope == Scope::Pod {
            let (best, admit) = state.first.unwrap_or((TopologyHint::any(false), false));
            if !admit {
                rejected(&mut out, TOPOLOGY_AFFINITY_ERROR, unaligned);
                return out;
            }
            Some(best.affinity)
        } else {
            None
        };
        let mut draws: Vec<PoolDraw> = (self.pools.iter().enumerate().zip(&state.used))
            .map(|((pi, p), used)| PoolDraw {
                allocated: used.clone(),
                reuse: Bits::new(p.pool.devices.len()),
                rng: self.rng(node, pi, seed),
            })
            .collect();
        let topo = node.topology;
        let mut given = Given {
            numa: 0,
            wide: Vec::new(),
            gpus: Bits::new(topo.gpus.len()),
            nics: Bits::new(topo.nics.len()),
        };
        let mut scratch = Vec::with_capacity(self.largest_pool);
        out.devices.reserve(self.most_given);
        for (ci, (requests, keep)) in self.containers.iter().enumerate() {
            let affinity = match pod_affinity {
                _ if none => None,
                Some(a) => a,
                None => {
                    let (best, admit) = match (ci, state.first) {
                        (0, Some(f)) => f,
                        _ => {
                            let d = &draws;
                            self.merge(requests, move |pi| (&d[pi].allocated, Some(&d[pi].reuse)))
                        }
                    };
                    if !admit {
                        rejected(&mut out, TOPOLOGY_AFFINITY_ERROR, unaligned);
                        break;
                    }
                    best.affinity
                }
            };
            let mut failed = None;
            for &(pi, n) in requests {
                let p = &self.pools[pi];
                let d = &mut draws[pi];
                let mut taken = Bits::new(p.pool.devices.len());
                let r = devices_to_allocate(
                    p,
                    &mut d.allocated,
                    n as usize,
                    &d.reuse,
                    affinity,
                    &mut d.rng,
                    &mut taken,
                    &mut scratch,
                );
                if let Err(e) = r {
                    failed = Some(format!("Allocate failed due to {e}, which is unexpected"));
                    break;
                }
                for i in taken.ones() {
                    // A device's record is the same in every pool that holds it (the
                    // full simulation reads the first such pool's).
                    let dev = &p.pool.devices[i];
                    out.devices.push(dev.id);
                    given.add(dev);
                }
                if *keep {
                    d.reuse.or_with(&taken);
                } else {
                    d.reuse.and_not_with(&taken);
                }
            }
            if let Some(msg) = failed {
                rejected(&mut out, UNEXPECTED_ADMISSION_ERROR, &msg);
                break;
            }
        }
        self.finish(node, given, &mut out);
        out
    }

    /// The random source of pool `pi`'s plugin in draw `seed`: made with the plan for the
    /// first draws.
    fn rng(&self, node: &Prepared<'_>, pi: usize, seed: u64) -> Rng {
        let cached = usize::try_from(seed)
            .ok()
            .and_then(|s| s.checked_mul(self.pools.len()))
            .and_then(|at| self.rngs.get(at + pi));
        match cached {
            Some(r) => r.clone(),
            None => new_rng(node, &self.pools[pi], seed),
        }
    }

    /// The NUMA nodes and GPU↔NIC pairs of what was given.
    fn finish(&self, node: &Prepared<'_>, given: Given, out: &mut Brief) {
        let mut ids = NumaMask(given.numa).bits();
        ids.extend(given.wide);
        ids.sort_unstable();
        ids.dedup();
        out.numa_nodes_used = ids;
        let table = self.pair_table.as_ref();
        out.pairs = pairs(node, table, given.gpus.ones(), given.nics.ones());
    }
}

/// The random source of pool `p`'s plugin in draw `seed` (as the full simulation's pools
/// make it).
pub(super) fn new_rng(node: &Prepared<'_>, p: &LeanPool, seed: u64) -> Rng {
    let pool_seed = seed
        .wrapping_add(p.position as u64)
        .wrapping_mul(0x2545_f491_4f6c_dd1d);
    let allocator = node
        .resources
        .allocator(&p.pool.name, p.pool.kind, pool_seed);
    Rng::new(match allocator {
        PluginAllocator::Unsorted(s) => s,
        PluginAllocator::LowestAddress => pool_seed,
    })
}

/// Why devices could not be allocated.
struct AllocError(String);

impl std::fmt::Display for AllocError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// `allocateRemainingFrom` over device indices: takes the devices of `from` not yet in
/// `taken`, in a shuffled order, until none is needed; true when done.
fn take_from(
    from: impl Iterator<Item = usize>,
    pool: &mut Bits,
    taken: &mut Bits,
    needed: &mut usize,
    rng: &mut Rng,
    scratch: &mut Vec<usize>,
) -> bool {
    scratch.clear();
    scratch.extend(from.filter(|d| !taken.get(*d)));
    rng.shuffle(scratch);
    for &d in scratch.iter() {
        pool.set(d);
        taken.set(d);
        *needed -= 1;
        if *needed == 0 {
            return true;
        }
    }
    false
}

/// The plugin's `GetPreferredAllocation(offer ∪ taken, taken, size)` as a set of
/// indices: the lowest-address plugin keeps `taken` and adds the offer's lowest devices
/// up to `size`; the unsorted one prefers nothing.
fn preferred(allocator: PluginAllocator, offer: &Bits, taken: &Bits, size: usize) -> Bits {
    let mut out = taken.clone();
    if let PluginAllocator::Unsorted(_) = allocator {
        out.clear_all();
        return out;
    }
    let mut all = offer.clone();
    all.or_with(taken);
    let mut len = out.count();
    for d in all.ones() {
        if len >= size {
            break;
        }
        if !out.get(d) {
            out.set(d);
            len += 1;
        }
    }
    out
}

/// `devicesToAllocate` over device indices (the `allocate` module's, step by step);
/// the devices given are left in `taken`.
#[allow(clippy::too_many_arguments)]
fn devices_to_allocate(
    p: &LeanPool,
    pool: &mut Bits,
    required: usize,
    reusable: &Bits,
    affinity: Option<NumaMask>,
    rng: &mut Rng,
    taken: &mut Bits,
    scratch: &mut Vec<usize>,
) -> Result<(), AllocError> {
    let n = p.pool.devices.len();
    let mut needed = required;
    taken.clear_all();
    if needed == 0 {
        return Ok(());
    }
    if take_from(reusable.ones(), pool, taken, &mut needed, rng, scratch) {
        return Ok(());
    }
    let available = p.all.and_not(pool);
    let free = available.count();
    if free < needed {
        return Err(AllocError(format!(
            "requested number of devices unavailable for {}. Requested: {needed}, Available: {free}",
            p.pool.name,
        )));
    }
    // `filterByAffinity`: aligned, unaligned and no-topology devices.
    let (aligned, unaligned, none) = match affinity {
        Some(m) if p.has_topology => {
            let mut on = Bits::new(n);
            for (x, b) in &p.on {
                if m.is_set(*x) {
                    on.or_with(b);
                }
            }
            let mut none = available.clone();
            none.and_with(&p.unknown);
            let mut unaligned = available.and_not(&on);
            unaligned.and_not_with(&p.unknown);
            let mut aligned = on;
            aligned.and_with(&available);
            (aligned, unaligned, none)
        }
        _ => (Bits::new(n), Bits::new(n), available.clone()),
    };
    // Only the plugin's kind of choice matters here (not its seed).
    let allocator = p.pool.allocator;
    let short = |needed: usize| {
        AllocError(format!(
            "unexpectedly allocated less resources than required. Requested: {required}, Got: {}",
            required - needed
        ))
    };
    if needed < aligned.count() {
        let mut pick = preferred(allocator, &aligned, taken, required);
        pick.and_with(&aligned);
        if take_from(pick.ones(), pool, taken, &mut needed, rng, scratch)
            || take_from(aligned.ones(), pool, taken, &mut needed, rng, scratch)
        {
            return Ok(());
        }
        return Err(short(needed));
    }
    if take_from(aligned.ones(), pool, taken, &mut needed, rng, scratch) {
        return Ok(());
    }
    let mut pick = preferred(allocator, &available, taken, required);
    pick.and_with(&available);
    if take_from(pick.ones(), pool, taken, &mut needed, rng, scratch)
        || take_from(unaligned.ones(), pool, taken, &mut needed, rng, scratch)
        || take_from(none.ones(), pool, taken, &mut needed, rng, scratch)
    {
        return Ok(());
    }
    Err(short(needed))
}
