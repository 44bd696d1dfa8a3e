//! One draw of the lean admission: the containers' merges and the device manager's
//! allocation over device indices.

use topoalign_kube_types::kubelet_settings::{Policy, Scope};
use topoalign_kube_types::{TOPOLOGY_AFFINITY_ERROR, UNEXPECTED_ADMISSION_ERROR};
use topoalign_rng::Rng;
use topoalign_topology::CpuSet;

use super::{Bits, Brief, LeanPlan, LeanPool, LeanState, rejected};
use crate::bitmask::NumaMask;
use crate::hint::TopologyHint;
use crate::prepared::Prepared;
use crate::resources::PluginAllocator;
use crate::simulate::gpu_pairs;

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
        let mut allocated = state.used.clone();
        let mut rngs: Vec<Rng> = (self.pools.iter())
            .map(|p| {
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
            })
            .collect();
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
        let mut reuse: Vec<Bits> = (self.pools.iter())
            .map(|p| Bits::new(p.pool.devices.len()))
            .collect();
        let mut scratch = Vec::new();
        for (ci, (requests, keep)) in self.containers.iter().enumerate() {
            let affinity = match pod_affinity {
                _ if none => None,
                Some(a) => a,
                None => {
                    let (best, admit) = match (ci, state.first) {
                        (0, Some(f)) => f,
                        _ => self.merge(requests, &allocated, &reuse),
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
                let mut taken = Bits::new(p.pool.devices.len());
                let r = devices_to_allocate(
                    p,
                    &mut allocated[pi],
                    n as usize,
                    &reuse[pi],
                    affinity,
                    &mut rngs[pi],
                    &mut taken,
                    &mut scratch,
                );
                if let Err(e) = r {
                    failed = Some(format!("Allocate failed due to {e}, which is unexpected"));
                    break;
                }
                out.devices
                    .extend(taken.ones().map(|d| p.pool.devices[d].id));
                let r = &mut reuse[pi];
                for (w, t) in r.0.iter_mut().zip(&taken.0) {
                    if *keep {
                        *w |= t;
                    } else {
                        *w &= !t;
                    }
                }
            }
            if let Some(msg) = failed {
                rejected(&mut out, UNEXPECTED_ADMISSION_ERROR, &msg);
                break;
            }
        }
        self.finish(node, &mut out);
        out
    }

    /// The NUMA nodes and GPU↔NIC pairs of what was allocated.
    fn finish(&self, node: &Prepared<'_>, out: &mut Brief) {
        let mut used = 0u64;
        let mut wide: Vec<u32> = Vec::new();
        let mut gpus = Vec::new();
        let mut nics = Vec::new();
        for b in &out.devices {
            // A device's pool is the first one holding it (as the full simulation finds
            // a pool by name; addresses are unique across GPU and NIC pools).
            let Some(d) = self.pools.iter().find_map(|p| p.pool.device(*b)) else {
                continue;
            };
            match d.numa {
                Some(n) if n <= NumaMask::MAX_ID => used |= 1 << n,
                Some(n) => wide.push(n),
                None => {}
            }
            if let Some(g) = d.gpu {
                gpus.push(g);
            }
            if let Some(n) = d.nic {
                nics.push(n);
            }
        }
        let mut ids = NumaMask(used).bits();
        ids.extend(wide);
        ids.sort_unstable();
        ids.dedup();
        out.numa_nodes_used = ids;
        out.pairs = gpu_pairs(node, gpus, nics);
    }
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

/// The plugin's `GetPreferredAllocation(offer, taken, size)` as a set of indices.
fn preferred(
    allocator: PluginAllocator,
    offer: impl Iterator<Item = usize>,
    taken: &Bits,
    size: usize,
    n: usize,
) -> Bits {
    let mut out = Bits::new(n);
    if let PluginAllocator::LowestAddress = allocator {
        out.0.copy_from_slice(&taken.0);
        let mut len = out.count();
        for d in offer {
            if len >= size {
                break;
            }
            if !out.get(d) {
                out.set(d);
                len += 1;
            }
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
            let none = available.and(&p.unknown);
            let aligned = available.and(&on);
            let unaligned = available.and_not(&on).and_not(&p.unknown);
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
        let offer = aligned.or(taken);
        let pick = preferred(allocator, offer.ones(), taken, required, n).and(&aligned);
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
    let offer = available.or(taken);
    let pick = preferred(allocator, offer.ones(), taken, required, n).and(&available);
    if take_from(pick.ones(), pool, taken, &mut needed, rng, scratch)
        || take_from(unaligned.ones(), pool, taken, &mut needed, rng, scratch)
        || take_from(none.ones(), pool, taken, &mut needed, rng, scratch)
    {
        return Ok(());
    }
    Err(short(needed))
}
