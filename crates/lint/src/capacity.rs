//! How many GPUs and NICs one NUMA node of the topology holds.

use std::collections::BTreeMap;

use topoalign_topology::Topology;

/// Per-NUMA device counts of a topology.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct NumaCapacity {
    /// Most GPUs on one NUMA node.
    pub gpus: u64,
    /// Most NIC physical functions (and non-SR-IOV NICs) on one NUMA node.
    pub nic_pfs: u64,
    /// Most SR-IOV virtual functions on one NUMA node.
    pub nic_vfs: u64,
    /// Number of NUMA nodes.
    pub numa_nodes: usize,
    /// GPUs on the whole node.
    pub node_gpus: u64,
    /// NIC physical functions (and non-SR-IOV NICs) on the whole node.
    pub node_nic_pfs: u64,
    /// SR-IOV virtual functions on the whole node.
    pub node_nic_vfs: u64,
}

fn max_per_node(numas: impl Iterator<Item = Option<u32>>) -> u64 {
    let mut per: BTreeMap<u32, u64> = BTreeMap::new();
    for n in numas.flatten() {
        *per.entry(n).or_default() += 1;
    }
    per.values().copied().max().unwrap_or(0)
}

impl NumaCapacity {
    /// Counts the devices of `topo` per NUMA node.
    pub(crate) fn of(topo: &Topology) -> NumaCapacity {
        let c = topo.classifier();
        NumaCapacity {
            gpus: max_per_node(topo.gpus.iter().map(|g| c.numa_of(g.pci))),
            nic_pfs: max_per_node(
                topo.nics
                    .iter()
                    .filter(|n| !n.is_vf())
                    .map(|n| c.numa_of(n.pci)),
            ),
            nic_vfs: max_per_node(
                topo.nics
                    .iter()
                    .filter(|n| n.is_vf())
                    .map(|n| c.numa_of(n.pci)),
            ),
            numa_nodes: topo.numa.len(),
            node_gpus: topo.gpus.len() as u64,
            node_nic_pfs: topo.nics.iter().filter(|n| !n.is_vf()).count() as u64,
            node_nic_vfs: topo.nics.iter().filter(|n| n.is_vf()).count() as u64,
        }
    }

    /// The most devices of a NIC resource one NUMA node, and the whole node, can give: VFs
    /// for SR-IOV resources when the topology lists VFs, else physical functions.
    pub(crate) fn nics_for(&self, vf_resource: bool) -> (u64, u64) {
        if vf_resource && self.nic_vfs > 0 {
            (self.nic_vfs, self.node_nic_vfs)
        } else {
            (self.nic_pfs, self.node_nic_pfs)
        }
    }
}
