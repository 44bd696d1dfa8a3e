//! The node's allocatable state as the resource managers hold it: device pools per
//! resource, CPUs (static CPU manager) and memory per NUMA node (static memory manager).

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;
use topoalign_topology::{Bdf, CpuSet, Sriov, Topology};

use crate::error::InputError;
use crate::resources::{DeviceKind, PluginAllocator};

/// What is already allocated on the node (the shared model type; `memory` is read by the
/// static memory manager's state).
pub use topoalign_topology::NodeUsage as Usage;

/// One device as its plugin advertises it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Device {
    /// Its ID: the PCI address.
    pub id: Bdf,
    /// `Topology.Nodes`: the NUMA node from `numa_node`, `None` for -1 (no topology).
    pub numa: Option<u32>,
    /// Index into `topo.gpus` when it is a GPU.
    #[serde(skip)]
    pub gpu: Option<usize>,
    /// Index into `topo.nics` when it is a NIC.
    #[serde(skip)]
    pub nic: Option<usize>,
}

/// The devices behind one extended resource and which of them are allocated.
#[derive(Debug, Clone)]
pub(crate) struct Pool {
    /// The resource name.
    pub name: String,
    /// What it maps to.
    pub kind: DeviceKind,
    /// The plugin's `GetPreferredAllocation` behaviour.
    pub allocator: PluginAllocator,
    /// `allDevices[resource]`, sorted by address (all healthy).
    pub devices: Vec<Device>,
    /// `allocatedDevices[resource]`.
    pub allocated: BTreeSet<Bdf>,
}

impl Pool {
    /// Builds the pool of `kind` devices from the topology.
    pub(crate) fn build(
        topo: &Topology,
        name: &str,
        kind: DeviceKind,
        allocator: PluginAllocator,
    ) -> Pool {
        let mut devices = Vec::new();
        match kind {
            DeviceKind::Gpus(vendor) => {
                for (i, g) in topo.gpus.iter().enumerate() {
                    if vendor.is_none_or(|v| v == g.vendor) {
                        devices.push(Device {
                            id: topo.gpu_bdf(i),
                            numa: topo.pci[g.pci].numa_node,
                            gpu: Some(i),
                            nic: None,
                        });
                    }
                }
            }
            DeviceKind::Vfs { per_pf } => {
                for (i, n) in topo.nics.iter().enumerate() {
                    if let Sriov::Vf { index, .. } = n.sriov
                        && per_pf.is_none_or(|k| index < k)
                    {
                        devices.push(Device {
                            id: topo.nic_bdf(i),
                            numa: topo.pci[n.pci].numa_node,
                            gpu: None,
                            nic: Some(i),
                        });
                    }
                }
            }
            DeviceKind::Pfs => {
                for (i, n) in topo.nics.iter().enumerate() {
                    if !matches!(n.sriov, Sriov::Vf { .. }) && n.is_rdma() {
                        devices.push(Device {
                            id: topo.nic_bdf(i),
                            numa: topo.pci[n.pci].numa_node,
                            gpu: None,
                            nic: Some(i),
                        });
                    }
                }
            }
        }
        devices.sort_by_key(|d| d.id);
        Pool {
            name: name.to_string(),
            kind,
            allocator,
            devices,
            allocated: BTreeSet::new(),
        }
    }

    /// The device with this ID.
    pub(crate) fn device(&self, id: Bdf) -> Option<&Device> {
        self.devices
            .binary_search_by_key(&id, |d| d.id)
            .ok()
            .map(|i| &self.devices[i])
    }

    /// `deviceHasTopologyAlignment`: any device reports a NUMA node.
    pub(crate) fn has_topology(&self) -> bool {
        self.devices.iter().any(|d| d.numa.is_some())
    }

    /// `getAvailableDevices`: healthy minus allocated, by address.
    pub(crate) fn available(&self) -> BTreeSet<Bdf> {
        self.devices
            .iter()
            .map(|d| d.id)
            .filter(|id| !self.allocated.contains(id))
            .collect()
    }

    /// Whether this pool holds GPUs (for the usage file's `gpus` list).
    pub(crate) fn holds_gpus(&self) -> bool {
        matches!(self.kind, DeviceKind::Gpus(_))
    }
}

/// The static CPU manager's view: every CPU's NUMA node, the reserved and the assigned.
#[derive(Debug, Clone, Default)]
pub(crate) struct CpuState {
    /// CPU id → NUMA node.
    pub numa_of: BTreeMap<u32, u32>,
    /// Reserved for system daemons (never given to containers).
    pub reserved: CpuSet,
    /// Assigned exclusively (other pods, then this pod's containers).
    pub assigned: CpuSet,
}

impl CpuState {
    /// Builds it from the topology.
    pub(crate) fn from_topology(topo: &Topology) -> Self {
        let mut numa_of = BTreeMap::new();
        for n in &topo.numa {
            for &c in n.cpus.ids() {
                numa_of.insert(c, n.id);
            }
        }
        CpuState {
            numa_of,
            ..CpuState::default()
        }
    }

    /// Every CPU.
    pub(crate) fn all(&self) -> CpuSet {
        CpuSet::from_ids(self.numa_of.keys().copied())
    }

    /// `GetAvailableCPUs`: the shared pool minus the reserved CPUs.
    pub(crate) fn available(&self) -> CpuSet {
        self.all()
            .difference(&self.reserved)
            .difference(&self.assigned)
    }
}

/// The static memory manager's per-NUMA state (`state.NUMANodeState`, regular memory).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct MemoryNode {
    /// `Allocatable` bytes (total minus `reservedMemory`).
    pub allocatable: u64,
    /// `Free` bytes.
    pub free: u64,
    /// `Cells`: the group of nodes this node was allocated with.
    pub cells: Vec<u32>,
    /// `NumberOfAssignments`.
    pub assignments: u32,
}

/// Marks the usage file's GPUs and NICs allocated in the pools that hold them; an address
/// that is not a GPU (NIC) of the node is an error.
pub(crate) fn apply_device_usage(
    usage: &Usage,
    pools: &mut [Pool],
    topo: &Topology,
) -> Result<(), InputError> {
    for (field, list, gpus) in [("gpus", &usage.gpus, true), ("nics", &usage.nics, false)] {
        for (i, bdf) in list.iter().enumerate() {
            let known = if gpus {
                topo.gpu_index(*bdf).is_some()
            } else {
                topo.nic_index(*bdf).is_some()
            };
            if !known {
                return Err(InputError::field(
                    format!("usage.{field}[{i}]"),
                    format!(
                        "{bdf} is not a {} of this node",
                        if gpus { "GPU" } else { "NIC" }
                    ),
                ));
            }
            for p in pools.iter_mut().filter(|p| p.holds_gpus() == gpus) {
                if p.device(*bdf).is_some() {
                    p.allocated.insert(*bdf);
                }
            }
        }
    }
    Ok(())
}

/// Checks that the usage file's CPUs are CPUs of the node.
pub(crate) fn check_usage_cpus(usage: &Usage, cpus: &CpuState) -> Result<(), InputError> {
    for &c in usage.cpus.ids() {
        if !cpus.numa_of.contains_key(&c) {
            return Err(InputError::field(
                "usage.cpus",
                format!("CPU {c} is not on this node"),
            ));
        }
    }
    Ok(())
}
