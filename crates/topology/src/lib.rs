//! The topology model of a GPU server and pair classification in the field's vocabulary.
//!
//! A [`Topology`] holds NUMA nodes (cpus, memory, SLIT distances, socket), the PCI tree
//! (host bridges, root ports, switch ports, endpoints), GPUs of any vendor, NICs (PF/VF,
//! netdev, RDMA device, link layer) and GPU-to-GPU fabric links (NVLink, xGMI). It does no
//! I/O: discovery fills it, everything else reads it.
//!
//! [`Classifier`] answers what `nvidia-smi topo -m` would print for any two devices
//! (`X`, `NV#`, `PIX`, `PXB`, `PHB`, `NODE`, `SYS`, plus `XGMI` for AMD) and NCCL's path
//! type and GPUDirect RDMA decision for a GPU→NIC pair; see `class` for the rules.

mod builder;
mod class;
mod classify;
mod device;
mod error;
mod ids;
mod matrix;
mod neighbours;
mod numa;
/// Public as a namespace: PCI vocabulary: `pci::class` and `pci::vendor` constants and
/// the PCI device model, a namespace its callers name (`class::GPU`, `vendor::NVIDIA`).
pub mod pci;
mod usage;

use std::collections::{HashMap, HashSet};

use serde::{Deserialize, Serialize};

pub use builder::TopologyBuilder;
pub use class::{GpuNicPath, NcclPath, PairClass, PcieClass};
pub use classify::{Classifier, PcieRoute};
pub use device::{
    FabricKind, FabricKnowledge, FabricStatus, Gpu, GpuLink, GpuVendor, LinkLayer, Nic, RdmaPort,
    Sriov,
};
pub use error::{ModelError, ParseError};
pub use ids::Bdf;
pub use ids::parse_root_name;
pub use matrix::{MatrixDevice, PairMatrix};
pub use matrix::{MatrixDeviceKind, MatrixOptions};
pub use neighbours::{IbPort, IbSwitch, LldpNeighbour, Neighbours, NicNeighbours, SubnetPrefix};
pub use numa::MAX_CPU_ID;
pub use numa::{CpuSet, NumaNode};
pub use pci::{HostBridge, PciDevice, PciKind, PciParent, PcieLink};
pub use usage::NodeUsage;

/// A whole node's topology. Tables are kept in canonical order (see
/// [`Topology::canonicalize`]): NUMA nodes by id, host bridges by (domain, bus), PCI
/// functions, GPUs and NICs by address, links by their GPU pair.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Topology {
    /// Host name or profile name.
    pub name: String,
    /// NUMA nodes.
    pub numa: Vec<NumaNode>,
    /// Host bridges / root complexes.
    pub host_bridges: Vec<HostBridge>,
    /// Every PCI function of interest: the bridges above GPUs and NICs, and the devices.
    pub pci: Vec<PciDevice>,
    /// GPUs.
    pub gpus: Vec<Gpu>,
    /// NIC functions (PFs and VFs).
    pub nics: Vec<Nic>,
    /// Direct GPU-to-GPU links.
    pub gpu_links: Vec<GpuLink>,
    /// Whether `gpu_links` is the whole fabric ([`FabricKnowledge::Known`], the default) or
    /// the source could not see it ([`FabricKnowledge::Unknown`]: NVIDIA sysfs has no
    /// NVLink, `rocm-smi --showtoponuma` has no link table). Unknown is not "none".
    #[serde(default, skip_serializing_if = "FabricKnowledge::is_known")]
    pub fabric: FabricKnowledge,
}

impl Topology {
    /// A classifier over this topology (precomputes ancestor chains once).
    pub fn classifier(&self) -> Classifier<'_> {
        Classifier::new(self)
    }

    /// What is known about the GPU fabric: no links, links, or not discovered.
    pub fn fabric_status(&self) -> FabricStatus {
        match (self.fabric, self.gpu_links.is_empty()) {
            (FabricKnowledge::Unknown, _) => FabricStatus::Unknown,
            (FabricKnowledge::Known, true) => FabricStatus::None,
            (FabricKnowledge::Known, false) => FabricStatus::Links,
        }
    }

    /// The nearest PCIe switch above PCI function `pci`: the index (into `pci`) of that
    /// switch's upstream port; `None` when the path reaches the host bridge first.
    pub fn nearest_switch(&self, pci: usize) -> Option<usize> {
        let mut cur = self.pci.get(pci)?.parent;
        // A well-formed tree has no cycles; the bound keeps a malformed one finite.
        for _ in 0..=self.pci.len() {
            match cur {
                PciParent::Host(_) => return None,
                PciParent::Bridge(p) => {
                    let d = self.pci.get(p)?;
                    if d.kind == PciKind::SwitchUpstream {
                        return Some(p);
                    }
                    cur = d.parent;
                }
            }
        }
        None
    }

    /// The PCI address of GPU `i`.
    pub fn gpu_bdf(&self, i: usize) -> Bdf {
        self.pci[self.gpus[i].pci].bdf
    }

    /// The PCI address of NIC `i`.
    pub fn nic_bdf(&self, i: usize) -> Bdf {
        self.pci[self.nics[i].pci].bdf
    }

    /// The index of the PCI function with this address.
    pub fn pci_index(&self, bdf: Bdf) -> Option<usize> {
        self.pci.binary_search_by(|d| d.bdf.cmp(&bdf)).ok()
    }

    /// The index of the GPU with this address.
    pub fn gpu_index(&self, bdf: Bdf) -> Option<usize> {
        self.gpus.iter().position(|g| self.pci[g.pci].bdf == bdf)
    }

    /// The index of the NIC with this address.
    pub fn nic_index(&self, bdf: Bdf) -> Option<usize> {
        self.nics.iter().position(|n| self.pci[n.pci].bdf == bdf)
    }

    /// The host bridge a PCI function hangs under (`None` on a broken tree).
    pub fn host_bridge_of(&self, pci: usize) -> Option<&HostBridge> {
        let mut cur = self.pci.get(pci)?.parent;
        for _ in 0..=self.pci.len() {
            match cur {
                PciParent::Host(h) => return self.host_bridges.get(h),
                PciParent::Bridge(p) => cur = self.pci.get(p)?.parent,
            }
        }
        None
    }

    /// `resource.kubernetes.io/pcieRoot` of a PCI function: its host bridge name.
    pub fn pcie_root(&self, pci: usize) -> Option<String> {
        self.host_bridge_of(pci).map(HostBridge::name)
    }

    /// The NUMA node record with this id.
    pub fn numa_node(&self, id: u32) -> Option<&NumaNode> {
        self.numa.iter().find(|n| n.id == id)
    }

    /// SLIT distance between two NUMA node ids (10 for a node to itself when the table
    /// is missing; `None` when either node is unknown).
    pub fn numa_distance(&self, from: u32, to: u32) -> Option<u32> {
        let a = self.numa.iter().position(|n| n.id == from)?;
        let b = self.numa.iter().position(|n| n.id == to)?;
        match self.numa[a].distances.get(b) {
            Some(d) => Some(*d),
            None if a == b => Some(10),
            None => None,
        }
    }

    /// Sorts every table into canonical order and rewrites the indices that point into
    /// them. Two topologies describing the same machine compare equal afterwards.
    pub fn canonicalize(&mut self) {
        self.numa.sort_by_key(|n| n.id);

        let mut hb_order: Vec<usize> = (0..self.host_bridges.len()).collect();
        hb_order.sort_by_key(|&i| (self.host_bridges[i].domain, self.host_bridges[i].bus));
        let hb_new = inverse(&hb_order);
        self.host_bridges = hb_order
            .iter()
            .map(|&i| self.host_bridges[i].clone())
            .collect();

        let mut pci_order: Vec<usize> = (0..self.pci.len()).collect();
        pci_order.sort_by_key(|&i| self.pci[i].bdf);
        let pci_new = inverse(&pci_order);
        let remap_parent = |p: PciParent| match p {
            PciParent::Host(h) => PciParent::Host(*hb_new.get(h).unwrap_or(&h)),
            PciParent::Bridge(b) => PciParent::Bridge(*pci_new.get(b).unwrap_or(&b)),
        };
        self.pci = pci_order
            .iter()
            .map(|&i| {
                let mut d = self.pci[i].clone();
                d.parent = remap_parent(d.parent);
                d
            })
            .collect();
        for g in &mut self.gpus {
            g.pci = *pci_new.get(g.pci).unwrap_or(&g.pci);
        }
        for n in &mut self.nics {
            n.pci = *pci_new.get(n.pci).unwrap_or(&n.pci);
        }

        let mut gpu_order: Vec<usize> = (0..self.gpus.len()).collect();
        gpu_order.sort_by_key(|&i| self.pci.get(self.gpus[i].pci).map(|d| d.bdf));
        let gpu_new = inverse(&gpu_order);
        self.gpus = gpu_order.iter().map(|&i| self.gpus[i].clone()).collect();
        for l in &mut self.gpu_links {
            let (a, b) = (
                *gpu_new.get(l.a).unwrap_or(&l.a),
                *gpu_new.get(l.b).unwrap_or(&l.b),
            );
            l.a = a.min(b);
            l.b = a.max(b);
        }
        self.gpu_links.sort_by_key(|l| (l.a, l.b, l.kind as u8));

        self.nics
            .sort_by_key(|n| self.pci.get(n.pci).map(|d| d.bdf));
        for n in &mut self.nics {
            if let Sriov::Pf { vfs, .. } = &mut n.sriov {
                vfs.sort();
            }
        }
    }

    /// Checks the invariants every consumer relies on: indices in range, no cycles, no
    /// duplicate addresses, GPUs and NICs on functions of the right class.
    pub fn validate(&self) -> Result<(), ModelError> {
        let n = self.pci.len();
        let mut seen = HashSet::new();
        for (i, d) in self.pci.iter().enumerate() {
            if !seen.insert(d.bdf) {
                return Err(ModelError::DuplicateAddress(d.bdf.to_string()));
            }
            match d.parent {
                PciParent::Host(h) if h >= self.host_bridges.len() => {
                    return Err(ModelError::DanglingIndex {
                        what: "PCI device",
                        index: i,
                        target: "host bridge",
                        target_index: h,
                    });
                }
                PciParent::Bridge(b) if b >= n => {
                    return Err(ModelError::DanglingIndex {
                        what: "PCI device",
                        index: i,
                        target: "PCI device",
                        target_index: b,
                    });
                }
                _ => {}
            }
        }
        for (i, d) in self.pci.iter().enumerate() {
            let mut cur = d.parent;
            let mut steps = 0;
            while let PciParent::Bridge(b) = cur {
                steps += 1;
                if b == i || steps > n {
                    return Err(ModelError::Cycle(d.bdf.to_string()));
                }
                cur = self.pci[b].parent;
            }
        }
        for (i, g) in self.gpus.iter().enumerate() {
            let d = self.pci.get(g.pci).ok_or(ModelError::DanglingIndex {
                what: "GPU",
                index: i,
                target: "PCI device",
                target_index: g.pci,
            })?;
            if !(pci::class::is_display(d.class) || pci::class::is_accelerator(d.class)) {
                return Err(ModelError::WrongClass {
                    what: "GPU",
                    bdf: d.bdf.to_string(),
                    class: d.class,
                    expected: "display controller 0x03xxxx or accelerator 0x12xxxx",
                });
            }
        }
        for (i, nic) in self.nics.iter().enumerate() {
            let d = self.pci.get(nic.pci).ok_or(ModelError::DanglingIndex {
                what: "NIC",
                index: i,
                target: "PCI device",
                target_index: nic.pci,
            })?;
            if !pci::class::is_network(d.class) {
                return Err(ModelError::WrongClass {
                    what: "NIC",
                    bdf: d.bdf.to_string(),
                    class: d.class,
                    expected: "network controller 0x02xxxx",
                });
            }
        }
        for (i, l) in self.gpu_links.iter().enumerate() {
            for end in [l.a, l.b] {
                if end >= self.gpus.len() {
                    return Err(ModelError::DanglingIndex {
                        what: "GPU link",
                        index: i,
                        target: "GPU",
                        target_index: end,
                    });
                }
            }
            if l.a == l.b {
                return Err(ModelError::SelfLink(i));
            }
        }
        Ok(())
    }

    /// Groups GPUs into NVLink/xGMI islands (connected components of the fabric graph),
    /// each sorted, islands ordered by their first GPU.
    pub fn fabric_islands(&self) -> Vec<Vec<usize>> {
        let g = self.gpus.len();
        let mut parent: Vec<usize> = (0..g).collect();
        fn find(p: &mut [usize], mut x: usize) -> usize {
            while p[x] != x {
                p[x] = p[p[x]];
                x = p[x];
            }
            x
        }
        for l in &self.gpu_links {
            if l.a < g && l.b < g {
                let (ra, rb) = (find(&mut parent, l.a), find(&mut parent, l.b));
                if ra != rb {
                    parent[ra.max(rb)] = ra.min(rb);
                }
            }
        }
        let mut groups: HashMap<usize, Vec<usize>> = HashMap::new();
        for i in 0..g {
            let r = find(&mut parent, i);
            groups.entry(r).or_default().push(i);
        }
        let mut out: Vec<Vec<usize>> = groups.into_values().collect();
        out.sort();
        out
    }
}

/// `inverse(order)[old] = new` for a permutation `order[new] = old`.
fn inverse(order: &[usize]) -> Vec<usize> {
    let mut inv = vec![0; order.len()];
    for (new, &old) in order.iter().enumerate() {
        inv[old] = new;
    }
    inv
}
