//! The admission of one pod, mirroring kubernetes `topologymanager/scope_container.go`,
//! `scope_pod.go` and `scope_none.go` (hints → merge → admit → allocate, per container or
//! per pod), with the device manager's init-container device reuse (`Allocate` in
//! `devicemanager/manager.go`) and the CPU manager's `updateCPUsToReuse`.

use std::collections::{BTreeMap, BTreeSet};

use thiserror::Error;
use topoalign_rng::Rng;
use topoalign_topology::{Bdf, CpuSet, GpuNicPath, Topology};

use crate::allocate::{allocate_cpus, allocate_memory, devices_to_allocate};
use crate::bitmask::NumaMask;
use crate::error::InputError;
use crate::hint::{ProviderHints, TopologyHint};
use crate::node::{CpuState, MemoryNode, Pool, Usage, apply_device_usage, check_usage_cpus};
use crate::outcome::{
    AllocatedDevice, ContainerAllocation, GpuPair, MergeRecord, Outcome, ProviderRecord,
    ResourceHints,
};
use crate::pod::{Container, MEMORY, Pod, QosClass};
use crate::policy::TopologyManager;
use crate::prepared::Prepared;
use crate::providers::{cpu, devices, memory};
use crate::resources::{PluginAllocator, ResourceMap};
use topoalign_kube_types::kubelet_settings::{ConfigError, Policy, Settings};
use topoalign_kube_types::{TOPOLOGY_AFFINITY_ERROR, UNEXPECTED_ADMISSION_ERROR};

/// Why a simulation could not run.
#[derive(Debug, Clone, Error, PartialEq, Eq)]
pub enum SimError {
    /// The kubelet settings are refused.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The pod, usage or resource map is malformed.
    #[error(transparent)]
    Input(#[from] InputError),
}

/// Everything one simulation needs.
#[derive(Debug, Clone)]
pub struct Case<'a> {
    /// The node.
    pub topology: &'a Topology,
    /// The kubelet settings.
    pub settings: &'a Settings,
    /// Resource names → devices.
    pub resources: &'a ResourceMap,
    /// The pod.
    pub pod: &'a Pod,
    /// What is already in use.
    pub usage: &'a Usage,
    /// Seed for Go's random iteration orders and unsorted plugins.
    pub seed: u64,
}

/// The node state during one admission.
struct NodeState {
    pools: Vec<Pool>,
    rngs: Vec<Rng>,
    cpus: Option<CpuState>,
    memory: Option<BTreeMap<u32, MemoryNode>>,
    /// Notes for the outcome's warnings (MIG resources taken without hints).
    notes: Vec<String>,
}

/// The prefix of the NVIDIA device plugin's MIG resources (mixed strategy).
pub(crate) const MIG_RESOURCE_PREFIX: &str = "nvidia.com/mig-";

fn record(name: &str, hints: &ProviderHints) -> ProviderRecord {
    ProviderRecord {
        provider: name.to_string(),
        resources: hints
            .iter()
            .map(|(r, h)| ResourceHints {
                resource: r.clone(),
                hints: h.clone(),
            })
            .collect(),
    }
}

/// Runs one admission: [`Prepared::simulate`] on the case's node prepared for this call
/// alone (prepare the node once with [`Prepared::new`] to admit many pods on it).
pub fn simulate(case: &Case<'_>) -> Result<Outcome, SimError> {
    Prepared::new(case.topology, case.settings, case.resources)
        .simulate(case.pod, case.usage, case.seed)
}

impl Prepared<'_> {
    /// The admission of `pod` with `usage` already allocated; `seed` stands for Go's
    /// random iteration orders and the unsorted plugins' choices. Equal to
    /// [`simulate()`] of the same case.
    pub fn simulate(&self, pod: &Pod, usage: &Usage, seed: u64) -> Result<Outcome, SimError> {
        let tm = self.tm.as_ref().map_err(|e| SimError::Config(e.clone()))?;
        let state = self.state(pod, usage, seed)?;
        Ok(admit(self, tm, state, pod))
    }

    /// The pod's device pools (nothing allocated), the random sources of their plugins
    /// for `seed`, and the notes on resources taken without hints.
    #[allow(clippy::type_complexity)]
    pub(crate) fn pools(
        &self,
        pod: &Pod,
        seed: u64,
    ) -> Result<(Vec<Pool>, Vec<Rng>, Vec<String>), SimError> {
        let topo = self.topology;
        let mut pools = Vec::new();
        let mut rngs = Vec::new();
        let mut notes = Vec::new();
        for (i, name) in pod.extended_resources().into_iter().enumerate() {
            let kind = self.resources.resolve(&name);
            if kind.is_none()
                && name.len() > MIG_RESOURCE_PREFIX.len()
                && name.starts_with(MIG_RESOURCE_PREFIX)
            {
                // The NVIDIA device plugin registers MIG devices without NUMA affinity: its
                // hint provider gives no hints for them, so they merge as "any NUMA node".
                notes.push(format!(
                    "{name}: a MIG device of the NVIDIA device plugin (mixed strategy); it has no topology hints, so the Topology Manager does not align it and its availability is not simulated (`topoalign lint` checks that a node can hold the pod's MIG set)"
                ));
                continue;
            }
            let kind = kind.ok_or_else(|| InputError::UnknownResource {
                field: "pod resources".to_string(),
                name: name.clone(),
            })?;
            let pool_seed = seed
                .wrapping_add(i as u64)
                .wrapping_mul(0x2545_f491_4f6c_dd1d);
            let allocator = self.resources.allocator(&name, kind, pool_seed);
            let rng_seed = match allocator {
                PluginAllocator::Unsorted(s) => s,
                PluginAllocator::LowestAddress => pool_seed,
            };
            pools.push(Pool::build(topo, &name, kind, allocator));
            rngs.push(Rng::new(rng_seed));
        }
        Ok((pools, rngs, notes))
    }

    /// The node's state for one admission: the pod's device pools with `usage` applied,
    /// the CPUs and the memory.
    fn state(&self, pod: &Pod, usage: &Usage, seed: u64) -> Result<NodeState, SimError> {
        let topo = self.topology;
        let (mut pools, rngs, notes) = self.pools(pod, seed)?;
        apply_device_usage(usage, &mut pools, topo)?;
        check_usage_cpus(usage, &self.cpus)?;
        let cpus = match &self.reserved_cpus {
            None => None,
            Some(Err(e)) => return Err(e.clone().into()),
            Some(Ok(reserved)) => Some(CpuState {
                reserved: reserved.clone(),
                assigned: self.cpus.assigned.union(&usage.cpus),
                ..self.cpus.clone()
            }),
        };
        let memory = match &self.memory {
            None => None,
            Some(Err(e)) => return Err(e.clone().into()),
            Some(Ok(nodes)) => Some(nodes.clone()),
        };
        Ok(NodeState {
            pools,
            rngs,
            cpus,
            memory,
            notes,
        })
    }
}

/// Admits `pod` on a prepared node in `state` under the configured Topology Manager `tm`.
fn admit(node: &Prepared<'_>, tm: &TopologyManager, mut state: NodeState, pod: &Pod) -> Outcome {
    let topo = node.topology;
    let qos = pod.qos();
    let mut out = Outcome {
        node: topo.name.clone(),
        policy: tm.policy,
        scope: (tm.policy != Policy::None).then_some(tm.scope),
        options: tm.options,
        qos,
        admitted: true,
        reason: None,
        message: None,
        merges: Vec::new(),
        allocations: Vec::new(),
        numa_nodes_used: Vec::new(),
        pairs: Vec::new(),
        warnings: tm.ignored_options(),
    };
    out.warnings.extend(std::mem::take(&mut state.notes));
    let memory_of = |c: &Container| -> u64 {
        if qos != QosClass::Guaranteed {
            return 0;
        }
        c.requests
            .get(MEMORY)
            .map_or(0, |q| u64::try_from(q.value()).unwrap_or(u64::MAX))
    };
    let pod_affinity = if tm.policy != Policy::None
        && tm.scope == topoalign_kube_types::kubelet_settings::Scope::Pod
    {
        let requests: BTreeMap<usize, u64> = state
            .pools
            .iter()
            .enumerate()
            .map(|(i, p)| (i, pod.pod_level(|c| c.limit_value(&p.name))))
            .filter(|(_, n)| *n > 0)
            .collect();
        let cpus = state
            .cpus
            .as_ref()
            .map_or(0, |_| cpu::pod_guaranteed_cpus(pod));
        let mem = pod.pod_level(memory_of);
        let (best, admit) = merge_for(
            tm,
            &state,
            "pod",
            &requests,
            &BTreeMap::new(),
            &CpuSet::new(),
            cpus,
            mem,
            &mut out,
        );
        if !admit {
            reject_unaligned(&mut out);
            finish(&mut out, &state, node);
            return out;
        }
        Some(best.affinity)
    } else {
        None
    };

    let mut reuse_devices: BTreeMap<usize, BTreeSet<Bdf>> = BTreeMap::new();
    let mut reuse_cpus = CpuSet::new();
    let init_count = pod.init_containers.len();
    for (ci, c) in pod.all_containers().enumerate() {
        let requests: BTreeMap<usize, u64> = state
            .pools
            .iter()
            .enumerate()
            .map(|(i, p)| (i, c.limit_value(&p.name)))
            .filter(|(_, n)| *n > 0)
            .collect();
        let want_cpus = if state.cpus.is_some() {
            cpu::guaranteed_cpus(pod, c)
        } else {
            0
        };
        let affinity: Option<NumaMask> = match (tm.policy, pod_affinity) {
            (Policy::None, _) => None,
            (_, Some(a)) => a,
            _ => {
                let (best, admit) = merge_for(
                    tm,
                    &state,
                    &c.name,
                    &requests,
                    &reuse_devices,
                    &reuse_cpus,
                    want_cpus,
                    memory_of(c),
                    &mut out,
                );
                if !admit {
                    reject_unaligned(&mut out);
                    break;
                }
                best.affinity
            }
        };
        let mut alloc = ContainerAllocation {
            container: c.name.clone(),
            affinity,
            devices: Vec::new(),
            cpus: CpuSet::new(),
            memory: Vec::new(),
        };
        let mut failed = None;
        for (&pi, &n) in &requests {
            let empty = BTreeSet::new();
            let reuse = reuse_devices.get(&pi).unwrap_or(&empty).clone();
            let pool = &mut state.pools[pi];
            match devices_to_allocate(pool, n as usize, &reuse, affinity, &mut state.rngs[pi]) {
                Ok(ids) => {
                    let devs = ids
                        .iter()
                        .map(|id| AllocatedDevice {
                            bdf: *id,
                            numa: pool.device(*id).and_then(|d| d.numa),
                            label: pool
                                .device(*id)
                                .and_then(|d| d.nic)
                                .and_then(|n| topo.nics[n].label().map(str::to_string)),
                        })
                        .collect();
                    let set: BTreeSet<Bdf> = ids.into_iter().collect();
                    let entry = reuse_devices.entry(pi).or_default();
                    if ci < init_count && !c.restartable {
                        entry.extend(set.iter().copied());
                    } else {
                        entry.retain(|d| !set.contains(d));
                    }
                    alloc.devices.push((pool.name.clone(), devs));
                }
                Err(e) => {
                    failed = Some(format!(
                        "Allocate failed due to {}, which is unexpected",
                        e.0
                    ));
                    break;
                }
            }
        }
        if failed.is_none()
            && want_cpus > 0
            && let Some(cs) = state.cpus.as_mut()
        {
            match allocate_cpus(cs, want_cpus, &reuse_cpus, affinity) {
                Ok(set) => {
                    if ci < init_count && !c.restartable {
                        reuse_cpus = reuse_cpus.union(&set);
                    } else {
                        reuse_cpus = reuse_cpus.difference(&set);
                    }
                    alloc.cpus = set;
                }
                Err(e) => failed = Some(e.0),
            }
        }
        if failed.is_none()
            && let Some(mem) = state.memory.as_mut()
        {
            match allocate_memory(mem, memory_of(c), affinity) {
                Ok(t) => alloc.memory = t,
                Err(e) => failed = Some(e.0),
            }
        }
        out.allocations.push(alloc);
        if let Some(msg) = failed {
            reject(&mut out, UNEXPECTED_ADMISSION_ERROR, &msg);
            break;
        }
    }
    finish(&mut out, &state, node);
    out
}

#[allow(clippy::too_many_arguments)]
fn merge_for(
    tm: &TopologyManager,
    state: &NodeState,
    target: &str,
    requests: &BTreeMap<usize, u64>,
    reuse_devices: &BTreeMap<usize, BTreeSet<Bdf>>,
    reuse_cpus: &CpuSet,
    cpus: u64,
    memory_bytes: u64,
    out: &mut Outcome,
) -> (TopologyHint, bool) {
    let dev = devices::device_hints(&state.pools, requests, reuse_devices, &tm.numa.nodes);
    let cpu_h = match &state.cpus {
        Some(cs) => cpu::cpu_hints(cs, reuse_cpus, cpus),
        None => ProviderHints::new(),
    };
    let mem_h = match &state.memory {
        Some(m) => memory::memory_hints(m, memory_bytes),
        None => ProviderHints::new(),
    };
    let providers = [dev, cpu_h, mem_h];
    let (best, admit) = tm.merge(&providers);
    out.merges.push(MergeRecord {
        target: target.to_string(),
        providers: ["devicemanager", "cpumanager", "memorymanager"]
            .iter()
            .zip(providers.iter())
            .map(|(n, h)| record(n, h))
            .collect(),
        best,
        admit,
    });
    (best, admit)
}

/// The Topology Manager's admission failure: no hint satisfies the policy.
fn reject_unaligned(out: &mut Outcome) {
    reject(
        out,
        TOPOLOGY_AFFINITY_ERROR,
        "Resources cannot be allocated with Topology Locality",
    );
}

fn reject(out: &mut Outcome, reason: &str, message: &str) {
    out.admitted = false;
    out.reason = Some(reason.to_string());
    out.message = Some(message.to_string());
}

fn finish(out: &mut Outcome, state: &NodeState, node: &Prepared<'_>) {
    let mut used = BTreeSet::new();
    let mut gpus = Vec::new();
    let mut nics = Vec::new();
    for a in &out.allocations {
        for (name, devs) in &a.devices {
            let pool = state.pools.iter().find(|p| &p.name == name);
            for d in devs {
                if let Some(n) = d.numa {
                    used.insert(n);
                }
                if let Some(dev) = pool.and_then(|p| p.device(d.bdf)) {
                    if let Some(g) = dev.gpu {
                        gpus.push(g);
                    }
                    if let Some(n) = dev.nic {
                        nics.push(n);
                    }
                }
            }
        }
        if let Some(cs) = &state.cpus {
            for c in a.cpus.ids() {
                if let Some(n) = cs.numa_of.get(c) {
                    used.insert(*n);
                }
            }
        }
        for (n, _) in &a.memory {
            used.insert(*n);
        }
    }
    out.numa_nodes_used = used.into_iter().collect();
    out.pairs = gpu_pairs(node, gpus, nics);
}

/// Each allocated GPU (topology index) with its best allocated NIC, by GPU.
pub(crate) fn gpu_pairs(
    node: &Prepared<'_>,
    mut gpus: Vec<usize>,
    mut nics: Vec<usize>,
) -> Vec<GpuPair> {
    let cls = &node.classifier;
    gpus.sort_unstable();
    gpus.dedup();
    nics.sort_unstable();
    nics.dedup();
    gpus.iter()
        .map(|&g| gpu_pair(node.topology, g, cls.best_nic(g, nics.iter().copied())))
        .collect()
}

/// GPU `g` (topology index) and its best NIC with their path, if it has one.
pub(crate) fn gpu_pair(topo: &Topology, g: usize, best: Option<(usize, GpuNicPath)>) -> GpuPair {
    let gpu_numa = topo.pci[topo.gpus[g].pci].numa_node;
    match best {
        Some((n, p)) => GpuPair {
            gpu: topo.gpu_bdf(g),
            gpu_numa,
            nic: Some(topo.nic_bdf(n)),
            nic_numa: topo.pci[topo.nics[n].pci].numa_node,
            class: Some(p.class),
            nccl: Some(p.nccl),
            gdr: p.gdr,
        },
        None => GpuPair {
            gpu: topo.gpu_bdf(g),
            gpu_numa,
            nic: None,
            nic_numa: None,
            class: None,
            nccl: None,
            gdr: false,
        },
    }
}
