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
use topoalign_rng::Rng;
use topoalign_topology::{Bdf, CpuSet};

use crate::bitmask::{NumaMask, iterate_masks};
use crate::hint::TopologyHint;
use crate::merge::MaskComparison;
use crate::node::{Pool, Usage, check_usage_cpus};
use crate::outcome::{GpuPair, Outcome};
use crate::pod::Pod;
use crate::policy::TopologyManager;
use crate::prepared::{Prepared, held_by};
use crate::simulate::SimError;

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

mod bits;
mod draw;
mod hints;
mod tables;

use bits::Bits;
use tables::{Holders, PairTable};

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
    /// The pools holding each of the node's GPUs, and each of its NICs.
    gpu_holders: Holders,
    nic_holders: Holders,
    /// The paths from the node's GPUs to the NICs the pod can get, when it asks for GPUs
    /// and NICs (and the table is not too large).
    pair_table: Option<PairTable>,
    /// The random sources of the first [`CACHED_DRAWS`] draws, draw by draw, pool by
    /// pool (made once: a draw clones them).
    rngs: Vec<Rng>,
    /// The most devices of one pool, and the most devices one draw can give.
    largest_pool: usize,
    most_given: usize,
}

/// The draws whose random sources a plan keeps (the extender makes four per node state).
const CACHED_DRAWS: u64 = 8;

impl LeanPlan {
    /// The holders of the node's GPUs (`gpus`) or NICs.
    fn holders(&self, gpus: bool) -> &Holders {
        if gpus {
            &self.gpu_holders
        } else {
            &self.nic_holders
        }
    }
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
        // One look-up per entry: whether it is the node's, and whether a pool holds it.
        let a = &self.node.addresses;
        let mut known = true;
        let mut held = |list: &[Bdf], gpus: bool| {
            let holders = plan.holders(gpus);
            held_by(list, |b| match holders.of(a, b, gpus) {
                Some(h) => !h.is_empty(),
                None => {
                    known = false;
                    false
                }
            })
        };
        let (gpus, nics) = (held(&usage.gpus, true), held(&usage.nics, false));
        if !known || check_usage_cpus(usage, &self.node.cpus).is_err() {
            return usage.clone();
        }
        // The lean path has no static CPU manager: no CPU is read.
        Usage {
            gpus,
            nics,
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
        let containers: Vec<(Vec<(usize, u64)>, bool)> = (pod.all_containers().enumerate())
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
        let asks = |gpus: bool| pools.iter().any(|p| p.pool.holds_gpus() == gpus);
        // The NICs the pod can get: the only ones its pairs may name.
        let mut held_nics: Vec<usize> = (pools.iter())
            .flat_map(|p| p.pool.devices.iter().filter_map(|d| d.nic))
            .collect();
        held_nics.sort_unstable();
        held_nics.dedup();
        let rngs = (0..CACHED_DRAWS)
            .flat_map(|seed| pools.iter().map(move |p| (seed, p)))
            .map(|(seed, p)| draw::new_rng(self, p, seed))
            .collect();
        let size = |pi: usize| pools[pi].pool.devices.len();
        let largest_pool = (0..pools.len()).map(size).max().unwrap_or(0);
        // Each request gives at most its pool's devices.
        let most_given = (containers.iter().flat_map(|(r, _)| r))
            .map(|&(pi, n)| size(pi).min(usize::try_from(n).unwrap_or(usize::MAX)))
            .fold(0usize, usize::saturating_add);
        Some(LeanPlan {
            tm: tm.clone(),
            gpu_holders: Holders::new(&self.addresses, true, &pools),
            nic_holders: Holders::new(&self.addresses, false, &pools),
            pair_table: (asks(true) && asks(false))
                .then(|| PairTable::new(self, &held_nics))
                .flatten(),
            rngs,
            largest_pool,
            most_given,
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
        // Each entry's pools, in one look-up that also tells whether it is the node's.
        let mut used: Vec<Bits> = (plan.pools.iter())
            .map(|p| Bits::new(p.pool.devices.len()))
            .collect();
        let a = &self.node.addresses;
        let mut known = true;
        for (list, gpus) in [(&usage.gpus, true), (&usage.nics, false)] {
            let holders = plan.holders(gpus);
            for b in list {
                match holders.of(a, *b, gpus) {
                    Some(held) => held.iter().for_each(|&(pi, d)| used[pi].set(d)),
                    None => known = false,
                }
            }
        }
        if !known || check_usage_cpus(usage, &self.node.cpus).is_err() {
            // The full simulation names the first bad entry.
            self.node.simulate(self.pod, usage, 0)?;
        }
        let first_requests = match plan.tm.scope {
            _ if plan.tm.policy == Policy::None => None,
            Scope::Pod => Some(&plan.pod_requests),
            Scope::Container => plan.containers.first().map(|(r, _)| r),
        };
        let first = first_requests.map(|r| plan.merge(r, |pi| (&used[pi], None)));
        Ok(LeanState {
            lean: self,
            usage,
            used,
            first,
        })
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
