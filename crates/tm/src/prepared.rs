//! A node prepared once for many admissions: what [`crate::simulate()`] would otherwise
//! recompute on every call from the topology and the kubelet settings alone (the
//! Topology Manager with its NUMA facts and parsed options, every CPU's NUMA node, the
//! reserved CPUs, the static memory manager's nodes, the GPU↔NIC classifier).
//!
//! The extender asks the simulation about one node shape thousands of times, with only
//! the pod, the devices in use and the seed changing; `Prepared::simulate` (in
//! the `simulate` module, beside the admission it runs) answers exactly as
//! [`crate::simulate()`] does for the same case.

use std::collections::BTreeMap;

use topoalign_kube_types::kubelet_settings::{ConfigError, CpuPolicy, MemoryPolicy, Settings};
use topoalign_topology::{Bdf, Classifier, CpuSet, Topology};

use crate::addresses::NodeAddresses;
use crate::node::{CpuState, MemoryNode, Usage, check_usage_cpus};
use crate::numa_info::NumaInfo;
use crate::pod::Pod;
use crate::policy::TopologyManager;
use crate::resources::ResourceMap;

/// A node (topology, kubelet settings, resource map) prepared for repeated admissions.
#[derive(Debug, Clone)]
pub struct Prepared<'a> {
    /// The node.
    pub(crate) topology: &'a Topology,
    /// Resource names → devices.
    pub(crate) resources: &'a ResourceMap,
    /// The configured Topology Manager, or why the kubelet refuses the settings.
    pub(crate) tm: Result<TopologyManager, ConfigError>,
    /// Every CPU's NUMA node; nothing reserved or assigned.
    pub(crate) cpus: CpuState,
    /// The static CPU manager's reserved CPUs; `None` under policy `none`.
    pub(crate) reserved_cpus: Option<Result<CpuSet, ConfigError>>,
    /// The static memory manager's nodes, all free; `None` under policy `None`.
    pub(crate) memory: Option<Result<BTreeMap<u32, MemoryNode>, ConfigError>>,
    /// GPU↔NIC classes, for the outcome's pairs.
    pub(crate) classifier: Classifier<'a>,
    /// The node's GPU and NIC addresses, for the checks of a usage's entries.
    pub(crate) addresses: NodeAddresses,
}

impl<'a> Prepared<'a> {
    /// Computes once what every admission on this node shares. Never fails: settings the
    /// kubelet refuses are kept and reported by each [`Prepared::simulate`], in the order
    /// [`crate::simulate()`] reports them.
    pub fn new(topology: &'a Topology, settings: &Settings, resources: &'a ResourceMap) -> Self {
        let tm = TopologyManager::new(
            settings.topology_manager_policy,
            settings.topology_manager_scope,
            &settings.topology_manager_policy_options,
            NumaInfo::from_topology(topology),
        );
        let cpus = CpuState::from_topology(topology);
        let reserved_cpus = match settings.cpu_manager_policy {
            CpuPolicy::None => None,
            CpuPolicy::Static => Some(reserved_cpus(settings, &cpus)),
        };
        let memory = match settings.memory_manager_policy {
            MemoryPolicy::None => None,
            MemoryPolicy::Static => Some(memory_nodes(topology, settings)),
        };
        Prepared {
            topology,
            resources,
            tm,
            cpus,
            reserved_cpus,
            memory,
            classifier: topology.classifier(),
            addresses: NodeAddresses::new(topology),
        }
    }

    /// The node's GPU↔NIC classifier (made once, with the node).
    pub fn classifier(&self) -> &Classifier<'a> {
        &self.classifier
    }

    /// The part of `usage` an admission of `pod` reads: the used GPUs and NICs of the
    /// pod's device pools (sorted, without duplicates) and, under the static CPU manager,
    /// the used CPUs; usage that the admission would refuse (an address or CPU the node
    /// lacks) is kept whole. For every seed, [`Prepared::simulate`] of the result equals
    /// [`Prepared::simulate`] of `usage`, so admissions on node states that differ only in
    /// devices the pod cannot get can be shared.
    pub fn relevant_usage(&self, pod: &Pod, usage: &Usage) -> Usage {
        if !self.usage_is_the_nodes(usage) {
            return usage.clone();
        }
        let Ok((pools, _, _)) = self.pools(pod, 0) else {
            return usage.clone();
        };
        let held = |list: &[Bdf], gpus: bool| {
            held_by(list, |b| {
                (pools.iter()).any(|p| p.holds_gpus() == gpus && p.device(b).is_some())
            })
        };
        Usage {
            gpus: held(&usage.gpus, true),
            nics: held(&usage.nics, false),
            cpus: match &self.reserved_cpus {
                Some(Ok(_)) => usage.cpus.clone(),
                _ => CpuSet::new(),
            },
            memory: BTreeMap::new(),
        }
    }
}

/// The static CPU manager's reserved CPUs: `reservedSystemCPUs`, else the first CPUs
/// covering the reserved CPU count.
fn reserved_cpus(settings: &Settings, cpus: &CpuState) -> Result<CpuSet, ConfigError> {
    let reserved = match &settings.reserved_system_cpus {
        Some(set) => {
            if let Some(c) = set.ids().iter().find(|c| !cpus.numa_of.contains_key(c)) {
                return Err(ConfigError::Field {
                    field: "reservedSystemCPUs".into(),
                    reason: format!("CPU {c} is not on this node"),
                });
            }
            set.clone()
        }
        None => {
            let n = settings.reserved_cpu_count() as usize;
            CpuSet::from_ids(cpus.numa_of.keys().copied().take(n))
        }
    };
    if reserved.is_empty() {
        return Err(ConfigError::StaticCpuWithoutReserved);
    }
    Ok(reserved)
}

/// The static memory manager's nodes, all free: each NUMA node's memory minus its
/// `reservedMemory`.
fn memory_nodes(
    topo: &Topology,
    settings: &Settings,
) -> Result<BTreeMap<u32, MemoryNode>, ConfigError> {
    if settings.reserved_memory.is_empty() {
        return Err(ConfigError::StaticMemoryWithoutReserved);
    }
    let mut m = BTreeMap::new();
    for n in &topo.numa {
        let total = n.memory_kib.ok_or_else(|| ConfigError::Field {
            field: "memoryManagerPolicy".into(),
            reason: format!(
                "the topology does not know NUMA node {}'s memory size",
                n.id
            ),
        })? * 1024;
        let reserved = settings.reserved_memory.get(&n.id).copied().unwrap_or(0);
        let allocatable = total.saturating_sub(reserved);
        m.insert(
            n.id,
            MemoryNode {
                allocatable,
                free: allocatable,
                cells: vec![n.id],
                assignments: 0,
            },
        );
    }
    Ok(m)
}

impl Prepared<'_> {
    /// Whether every device and CPU of `usage` is the node's: only then can the pod's
    /// view of it be read (otherwise the usage is kept whole, and the simulation refuses
    /// it).
    pub(crate) fn usage_is_the_nodes(&self, usage: &Usage) -> bool {
        let a = &self.addresses;
        usage.gpus.iter().all(|b| a.find(*b, true).is_some())
            && usage.nics.iter().all(|b| a.find(*b, false).is_some())
            && check_usage_cpus(usage, &self.cpus).is_ok()
    }
}

/// The devices of `list` that a pool of the pod holds (`held`), sorted, each once: the
/// part of the usage the pod's plugins see.
pub(crate) fn held_by(list: &[Bdf], mut held: impl FnMut(Bdf) -> bool) -> Vec<Bdf> {
    let mut out: Vec<Bdf> = Vec::with_capacity(list.len());
    out.extend(list.iter().copied().filter(|b| held(*b)));
    out.sort_unstable();
    out.dedup();
    out
}
