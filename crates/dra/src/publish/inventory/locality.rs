//! Where a device sits, shared by every kind: the NUMA node, its socket, the host bridge
//! (`pcieRoot`) and the nearest PCIe switch of a PCI function, and the alignment groups
//! the GDR relation draws over GPUs and NICs. A GPU, a NIC, and through them a pair, a
//! MIG instance and a MIG pair, all publish their place from these.

use std::collections::BTreeMap;

use topoalign_topology::{Bdf, GpuNicPath, Topology};

use crate::publish::entries::{GpuEntry, PhysicalNic};

/// The place of one PCI function in the node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Locality {
    /// NUMA node as the kernel reports it (`None` for -1).
    pub(super) numa_node: Option<u32>,
    /// Socket of that NUMA node, when known.
    pub(super) socket: Option<u32>,
    /// `pciDDDD:BB` of its host bridge.
    pub(super) pcie_root: Option<String>,
    /// Upstream port of the nearest PCIe switch above it.
    pub(super) pcie_switch: Option<Bdf>,
}

impl Locality {
    /// The place of `topo.pci[pci]`.
    pub(super) fn of(topo: &Topology, pci: usize) -> Locality {
        let numa_node = topo.pci[pci].numa_node;
        Locality {
            numa_node,
            socket: numa_node
                .and_then(|n| topo.numa_node(n))
                .and_then(|n| n.socket),
            pcie_root: topo.pcie_root(pci),
            pcie_switch: topo
                .nearest_switch(pci)
                .and_then(|p| topo.pci.get(p))
                .map(|d| d.bdf),
        }
    }
}

/// Alignment groups: connected components of the GDR relation between GPUs and RDMA
/// NICs (`paths[gpu][nic]`), numbered by their smallest member address (GPUs and NICs
/// together); a device with no GDR partner is in none.
pub(super) fn alignment_groups(
    paths: &[Vec<GpuNicPath>],
    gpus: &mut [GpuEntry],
    nics: &mut [PhysicalNic],
) {
    let total = gpus.len() + nics.len();
    let mut parent: Vec<usize> = (0..total).collect();
    fn find(p: &mut [usize], mut x: usize) -> usize {
        while p[x] != x {
            p[x] = p[p[x]];
            x = p[x];
        }
        x
    }
    let mut has_partner = vec![false; total];
    for (gi, row) in paths.iter().enumerate() {
        for (ni, p) in row.iter().enumerate() {
            if p.gdr && nics[ni].rdma_device.is_some() {
                let (a, b) = (find(&mut parent, gi), find(&mut parent, gpus.len() + ni));
                if a != b {
                    parent[a.max(b)] = a.min(b);
                }
                has_partner[gi] = true;
                has_partner[gpus.len() + ni] = true;
            }
        }
    }
    // Number components by their smallest member address (GPUs and NICs together).
    let mut order: Vec<(Bdf, usize)> = gpus
        .iter()
        .map(|g| g.bdf)
        .chain(nics.iter().map(|n| n.bdf))
        .enumerate()
        .map(|(i, b)| (b, i))
        .collect();
    order.sort();
    let mut group_no: BTreeMap<usize, u32> = BTreeMap::new();
    for (_, i) in &order {
        if has_partner[*i] {
            let r = find(&mut parent, *i);
            let next = group_no.len() as u32;
            group_no.entry(r).or_insert(next);
        }
    }
    for i in 0..total {
        if !has_partner[i] {
            continue;
        }
        let g = group_no.get(&find(&mut parent, i)).copied();
        if i < gpus.len() {
            gpus[i].alignment_group = g;
        } else {
            nics[i - gpus.len()].alignment_group = g;
        }
    }
}
