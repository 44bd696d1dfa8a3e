//! The lean admission: the verdict and the allocation of [`Prepared::simulate`] without
//! its explanation (no merge records, no provider names, no per-device labels), for
//! callers that judge one pod on thousands of node states (the scheduler extender).
//!
//! A [`LeanPod`] is the pod read once against a prepared node (its device pools, each
//! container's requests, the NUMA masks in `IterateBitMasks` order); a [`LeanState`] is
//! one node state (the pools with its usage applied, as bitsets by device index, and the
//! first merge, which every draw shares because it is made before anything is allocated);
//! [`LeanState::admit`] runs one draw. Devices are indices into a pool sorted by address,
//! so ascending bits are Go's sorted sets and every shuffle sees the same elements in the
//! same order as the full simulation's: the answer is [`Brief::of`] the full outcome,
//! always (the `lean` integration test checks it over random nodes, pods, usages,
//! policies, scopes and draws).
//!
//! Nodes under the static CPU or memory manager, and inputs the full simulation refuses,
//! take the full simulation (the answer is its [`Brief`]).

use topoalign_kube_types::kubelet_settings::{Policy, Scope};
use topoalign_kube_types::{TOPOLOGY_AFFINITY_ERROR, UNEXPECTED_ADMISSION_ERROR};
use topoalign_rng::Rng;
use topoalign_topology::{Bdf, CpuSet};

use crate::bitmask::{NumaMask, iterate_masks};
use crate::hint::TopologyHint;
use crate::merge::{MaskComparison, merge_lists};
use crate::node::{Pool, Usage, check_usage_cpus};
use crate::outcome::{GpuPair, Outcome};
use crate::pod::Pod;
use crate::policy::TopologyManager;
use crate::prepared::Prepared;
use crate::resources::PluginAllocator;
use crate::simulate::{SimError, gpu_pairs};

/// What an admission decides, without its explanation: what a scheduler needs of an
/// [`Outcome`] (see [`Brief::of`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Brief {
    /// Whether the pod was admitted.
    pub admitted: bool,
    /// `TopologyAffinityError` or `UnexpectedAdmissionError` when rejected.
    pub reason: Option<String>,
    /// The rejection message.
    pub message: Option<String>,
    /// Every device allocated: container by container, resource by resource (in
    /// name order), by address within one resource.
    pub devices: Vec<Bdf>,
    /// Every exclusive CPU allocated.
    pub cpus: CpuSet,
    /// Memory taken, (NUMA node, bytes), container by container.
    pub memory: Vec<(u32, u64)>,
    /// NUMA nodes of everything allocated.
    pub numa_nodes_used: Vec<u32>,
    /// For each allocated GPU, its best allocated NIC.
    pub pairs: Vec<GpuPair>,
}

impl Brief {
    /// The brief of a full outcome.
    pub fn of(o: &Outcome) -> Brief {
        let mut cpus = CpuSet::new();
        for a in &o.allocations {
            cpus = cpus.union(&a.cpus);
        }
        Brief {
            admitted: o.admitted,
            reason: o.reason.clone(),
            message: o.message.clone(),
            devices: (o.allocations.iter())
                .flat_map(|a| a.devices.iter().flat_map(|(_, d)| d.iter().map(|d| d.bdf)))
                .collect(),
            cpus,
            memory: (o.allocations.iter())
                .flat_map(|a| a.memory.iter().copied())
                .collect(),
            numa_nodes_used: o.numa_nodes_used.clone(),
            pairs: o.pairs.clone(),
        }
    }
}

/// A set of device indices.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Bits(Vec<u64>);

impl Bits {
    fn new(n: usize) -> Self {
        Bits(vec![0; n.div_ceil(64)])
    }
    fn get(&self, i: usize) -> bool {
        self.0[i / 64] & (1 << (i % 64)) != 0
    }
    fn set(&mut self, i: usize) {
        self.0[i / 64] |= 1 << (i % 64);
    }
    fn clear_all(&mut self) {
        self.0.iter_mut().for_each(|w| *w = 0);
    }
    fn and(&self, o: &Bits) -> Bits {
        Bits(self.0.iter().zip(&o.0).map(|(a, b)| a & b).collect())
    }
    fn or(&self, o: &Bits) -> Bits {
        Bits(self.0.iter().zip(&o.0).map(|(a, b)| a | b).collect())
    }
    fn and_not(&self, o: &Bits) -> Bits {
        Bits(self.0.iter().zip(&o.0).map(|(a, b)| a & !b).collect())
    }
    fn or_with(&mut self, o: &Bits) {
        self.0.iter_mut().zip(&o.0).for_each(|(a, b)| *a |= b);
    }
    fn count(&self) -> usize {
        self.0.iter().map(|w| w.count_ones() as usize).sum()
    }
    fn ones(&self) -> impl Iterator<Item = usize> + '_ {
        self.0.iter().enumerate().flat_map(|(k, &w)| {
            let mut w = w;
            std::iter::from_fn(move || {
                (w != 0).then(|| {
                    let b = w.trailing_zeros() as usize;
                    w &= w - 1;
                    k * 64 + b
                })
            })
        })
    }
}

/// One device pool of the pod, read once.
#[derive(Debug, Clone)]
struct LeanPool {
    /// The pool with nothing allocated (its devices sorted by address).
    pool: Pool,
    /// The position of its resource among the pod's extended resources (the seed of
    /// its plugin's random choices).
    position: usize,
    /// `deviceHasTopologyAlignment`.
    has_topology: bool,
    /// Devices per NUMA node id (ids up to 63), allocated ones included.
    total: [u64; 64],
    /// Every device.
    all: Bits,
    /// The devices of each NUMA node id, by id.
    on: Vec<(u32, Bits)>,
    /// The devices without a NUMA node.
    unknown: Bits,
}

/// The lean path, or the full simulation where the lean one does not go.
#[derive(Debug, Clone)]
enum Path {
    Lean(Box<LeanPlan>),
    Full,
}

/// What the lean admission precomputes for one pod on one prepared node.
#[derive(Debug, Clone)]
struct LeanPlan {
    tm: TopologyManager,
    pools: Vec<LeanPool>,
    /// Per container (init ones first): its requests as (pool, amount), pool order,
    /// and whether its allocation is kept for reuse (an init container, not a sidecar).
    containers: Vec<(Vec<(usize, u64)>, bool)>,
    /// The pod-level requests (pod scope).
    pod_requests: Vec<(usize, u64)>,
    /// `IterateBitMasks` over the machine's NUMA nodes.
    masks: Vec<NumaMask>,
    comparison: MaskComparison,
}

/// A pod read once against a prepared node (which it keeps) for many lean admissions.
#[derive(Debug, Clone)]
pub struct LeanPod<'p> {
    node: Prepared<'p>,
    pod: &'p Pod,
    path: Path,
}

impl<'p> LeanPod<'p> {
    /// Reads `pod` once on `node` for [`LeanPod::state`] and [`LeanState::admit`].
    pub fn new(node: Prepared<'p>, pod: &'p Pod) -> Self {
        let path = node
            .lean_plan(pod)
            .map_or(Path::Full, |p| Path::Lean(Box::new(p)));
        LeanPod { node, pod, path }
    }

    /// The prepared node.
    pub fn prepared(&self) -> &Prepared<'p> {
        &self.node
    }

    /// The pod.
    pub fn pod(&self) -> &'p Pod {
        self.pod
    }
}

impl LeanPod<'_> {
    /// [`Prepared::relevant_usage`] of the pod, read with its pools made once.
    pub fn relevant_usage(&self, usage: &Usage) -> Usage {
        let Path::Lean(plan) = &self.path else {
            return self.node.relevant_usage(self.pod, usage);
        };
        let topo = self.node.topology;
        let valid = usage.gpus.iter().all(|b| topo.gpu_index(*b).is_some())
            && usage.nics.iter().all(|b| topo.nic_index(*b).is_some())
            && check_usage_cpus(usage, &self.node.cpus).is_ok();
        if !valid {
            return usage.clone();
        }
        let held = |list: &[Bdf], gpus: bool| -> Vec<Bdf> {
            let mut out: Vec<Bdf> = (list.iter().copied())
                .filter(|b| {
                    (plan.pools.iter())
                        .any(|p| p.pool.holds_gpus() == gpus && p.pool.device(*b).is_some())
                })
                .collect();
            out.sort_unstable();
            out.dedup();
            out
        };
        // The lean path has no static CPU manager: no CPU is read.
        Usage {
            gpus: held(&usage.gpus, true),
            nics: held(&usage.nics, false),
            ..Usage::default()
        }
    }
}

impl Prepared<'_> {
    fn lean_plan(&self, pod: &Pod) -> Option<LeanPlan> {
        let tm = self.tm.as_ref().ok()?;
        if self.reserved_cpus.is_some() || self.memory.is_some() {
            return None;
        }
        let names = pod.extended_resources();
        let (pools, _, _) = self.pools(pod, 0).ok()?;
        let pools: Vec<LeanPool> = (pools.into_iter())
            .map(|pool| {
                let position = names.iter().position(|n| *n == pool.name).unwrap_or(0);
                let mut total = [0u64; 64];
                for n in pool.devices.iter().filter_map(|d| d.numa) {
                    if n <= NumaMask::MAX_ID {
                        total[n as usize] += 1;
                    }
                }
                let n = pool.devices.len();
                let mut all = Bits::new(n);
                let mut unknown = Bits::new(n);
                let mut on: Vec<(u32, Bits)> = Vec::new();
                for (i, d) in pool.devices.iter().enumerate() {
                    all.set(i);
                    match d.numa {
                        None => unknown.set(i),
                        Some(x) => match on.iter_mut().find(|(y, _)| *y == x) {
                            Some((_, b)) => b.set(i),
                            None => {
                                let mut b = Bits::new(n);
                                b.set(i);
                                on.push((x, b));
                            }
                        },
                    }
                }
                LeanPool {
                    has_topology: pool.has_topology(),
                    pool,
                    position,
                    total,
                    all,
                    on,
                    unknown,
                }
            })
            .collect();
        let init = pod.init_containers.len();
        let containers = (pod.all_containers().enumerate())
            .map(|(ci, c)| {
                let req = (pools.iter().enumerate())
                    .map(|(i, p)| (i, c.limit_value(&p.pool.name)))
                    .filter(|(_, n)| *n > 0)
                    .collect();
                (req, ci < init && !c.restartable)
            })
            .collect();
        let pod_requests = (pools.iter().enumerate())
            .map(|(i, p)| (i, pod.pod_level(|c| c.limit_value(&p.pool.name))))
            .filter(|(_, n)| *n > 0)
            .collect();
        let comparison = if tm.policy != Policy::SingleNumaNode && tm.options.prefer_closest_numa {
            MaskComparison::Closest
        } else {
            MaskComparison::Narrowest
        };
        Some(LeanPlan {
            tm: tm.clone(),
            pools,
            containers,
            pod_requests,
            masks: iterate_masks(&tm.numa.nodes),
            comparison,
        })
    }
}

/// One node state for the draws of a [`LeanPod`].
#[derive(Debug, Clone)]
pub struct LeanState<'a, 'p> {
    lean: &'a LeanPod<'p>,
    usage: &'a Usage,
    /// Per pool: the devices `usage` holds.
    used: Vec<Bits>,
    /// The first merge (pod scope: the pod's; container scope: the first container's),
    /// made before anything is allocated and so the same for every draw.
    first: Option<(TopologyHint, bool)>,
}

impl<'p> LeanPod<'p> {
    /// The node state `usage` for [`LeanState::admit`]; the full simulation's error where
    /// it refuses the usage (on the full path, each draw answers it instead).
    pub fn state<'a>(&'a self, usage: &'a Usage) -> Result<LeanState<'a, 'p>, SimError> {
        let Path::Lean(plan) = &self.path else {
            // Each draw is the full simulation, which answers its errors.
            return Ok(LeanState {
                lean: self,
                usage,
                used: Vec::new(),
                first: None,
            });
        };
        let topo = self.node.topology;
        let valid = usage.gpus.iter().all(|b| topo.gpu_index(*b).is_some())
            && usage.nics.iter().all(|b| topo.nic_index(*b).is_some())
            && check_usage_cpus(usage, &self.node.cpus).is_ok();
        if !valid {
            // The full simulation names the first bad entry.
            self.node.simulate(self.pod, usage, 0)?;
        }
        let mut used: Vec<Bits> = (plan.pools.iter())
            .map(|p| Bits::new(p.pool.devices.len()))
            .collect();
        for (list, gpus) in [(&usage.gpus, true), (&usage.nics, false)] {
            for b in list {
                for (p, u) in plan.pools.iter().zip(used.iter_mut()) {
                    if p.pool.holds_gpus() == gpus
                        && let Ok(i) = p.pool.devices.binary_search_by_key(b, |d| d.id)
                    {
                        u.set(i);
                    }
                }
            }
        }
        let first_requests = match plan.tm.scope {
            _ if plan.tm.policy == Policy::None => None,
            Scope::Pod => Some(&plan.pod_requests),
            Scope::Container => plan.containers.first().map(|(r, _)| r),
        };
        let empty: Vec<Bits> = Vec::new();
        let first = first_requests.map(|r| plan.merge(r, &used, &empty));
        Ok(LeanState {
            lean: self,
            usage,
            used,
            first,
        })
    }
}

impl LeanPlan {
    /// The Topology Manager's merge of the device manager's hints for `requests` (the
    /// CPU and memory managers are off on the lean path: no hints, "don't care").
    fn merge(
        &self,
        requests: &[(usize, u64)],
        allocated: &[Bits],
        reuse: &[Bits],
    ) -> (TopologyHint, bool) {
        let mut owned: Vec<Vec<TopologyHint>> = Vec::with_capacity(requests.len());
        const ANY: [TopologyHint; 1] = [TopologyHint {
            affinity: None,
            preferred: true,
        }];
        const NONE: [TopologyHint; 1] = [TopologyHint {
            affinity: None,
            preferred: false,
        }];
        for &(pi, n) in requests {
            owned.push(self.device_hints(pi, n, &allocated[pi], reuse.get(pi)));
        }
        let single = self.tm.policy == Policy::SingleNumaNode;
        if single {
            for l in &mut owned {
                l.retain(|h| h.preferred && h.affinity.is_none_or(|m| m.count() == 1));
            }
        }
        let mut lists: Vec<&[TopologyHint]> = Vec::with_capacity(requests.len() + 2);
        for (k, &(pi, _)) in requests.iter().enumerate() {
            lists.push(match &owned[k] {
                _ if !self.pools[pi].has_topology => &ANY,
                l if l.is_empty() && !single => &NONE,
                l => l,
            });
        }
        if requests.is_empty() {
            lists.push(&ANY);
        }
        // The CPU and memory managers' "no resources".
        lists.push(&ANY);
        lists.push(&ANY);
        let numa = &self.tm.numa;
        let mut best = merge_lists(numa, &lists, self.comparison);
        match self.tm.policy {
            Policy::None => (TopologyHint::any(false), true),
            Policy::BestEffort => (best, true),
            Policy::Restricted => (best, best.preferred),
            Policy::SingleNumaNode => {
                if best.affinity == Some(numa.default_affinity()) {
                    best = TopologyHint::any(best.preferred);
                }
                (best, best.preferred)
            }
        }
    }

    /// `GetTopologyHints` of the device manager for one pool: `[]` for "impossible"
    /// (shortage), the generated hints otherwise (a pool without topology is read as
    /// nil by the caller).
    fn device_hints(
        &self,
        pi: usize,
        requested: u64,
        allocated: &Bits,
        reuse: Option<&Bits>,
    ) -> Vec<TopologyHint> {
        let p = &self.pools[pi];
        if !p.has_topology {
            return Vec::new();
        }
        let mut free = [0u64; 64];
        let mut reused_mask = 0u64;
        let mut reused_outside = false;
        let mut reused = 0u64;
        for (x, b) in &p.on {
            if *x <= NumaMask::MAX_ID {
                free[*x as usize] = b.and_not(allocated).count() as u64;
            }
            if let Some(r) = reuse {
                let k = b.and(r).count() as u64;
                reused += k;
                if k > 0 {
                    if *x <= NumaMask::MAX_ID {
                        reused_mask |= 1 << x;
                    } else {
                        reused_outside = true;
                    }
                }
            }
        }
        let union = match reuse {
            Some(r) => p.all.and_not(allocated).or(r).count(),
            None => p.all.and_not(allocated).count(),
        } as u64;
        if union < requested {
            return Vec::new();
        }
        let sum_in = |counts: &[u64; 64], mask: NumaMask| -> u64 {
            let mut m = mask.0;
            let mut s = 0;
            while m != 0 {
                s += counts[m.trailing_zeros() as usize];
                m &= m - 1;
            }
            s
        };
        let mut min_affinity_size = self.tm.numa.nodes.len() as u32;
        let mut hints = Vec::new();
        for &mask in &self.masks {
            if sum_in(&p.total, mask) >= requested && mask.count() < min_affinity_size {
                min_affinity_size = mask.count();
            }
            if reused_outside || reused_mask & !mask.0 != 0 {
                continue;
            }
            if reused + sum_in(&free, mask) < requested {
                continue;
            }
            hints.push(TopologyHint::new(mask, false));
        }
        for h in &mut hints {
            if h.affinity.map(NumaMask::count) == Some(min_affinity_size) {
                h.preferred = true;
            }
        }
        hints
    }
}

impl LeanState<'_, '_> {
    /// The admission of draw `seed` (Go's random iteration orders and the unsorted
    /// plugins' choices): [`Brief::of`] [`Prepared::simulate`] of the same case.
    pub fn admit(&self, seed: u64) -> Result<Brief, SimError> {
        let lean = self.lean;
        let Path::Lean(plan) = &lean.path else {
            return Ok(Brief::of(&lean.node.simulate(lean.pod, self.usage, seed)?));
        };
        Ok(plan.admit(&lean.node, self, seed))
    }
}

/// A rejected brief.
fn rejected(out: &mut Brief, reason: &str, message: &str) {
    out.admitted = false;
    out.reason = Some(reason.to_string());
    out.message = Some(message.to_string());
}

impl LeanPlan {
    /// One draw of the admission (the lean `admit` of the `simulate` module).
    fn admit(&self, node: &Prepared<'_>, state: &LeanState<'_, '_>, seed: u64) -> Brief {
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
