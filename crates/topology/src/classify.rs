//! The classifier: precomputes ancestor chains once per topology so that classifying a
//! pair costs a short walk, then answers PCIe, GPU-GPU and GPU→NIC questions.

use crate::Topology;
use crate::class::{GpuNicPath, PairClass, PcieClass};
use crate::device::FabricKind;
use crate::pci::{PciKind, PciParent};

/// The PCIe path between two functions under one host bridge, by bridge unit (indices
/// into [`Topology::pci`]; a switch is named by its upstream port).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PcieRoute {
    /// Where the two branches meet: a switch's upstream port or a root port; `None` when
    /// they meet only at the host bridge (PHB).
    pub common: Option<usize>,
    /// The units between the first function and `common`, nearest to the function first.
    pub a_side: Vec<usize>,
    /// The units between the second function and `common`, nearest to the function first.
    pub b_side: Vec<usize>,
}

/// Precomputed view of a [`Topology`] for fast pair classification.
#[derive(Debug, Clone)]
pub struct Classifier<'t> {
    topo: &'t Topology,
    /// For every PCI device: its bridge ancestors, nearest first.
    chains: Vec<Vec<usize>>,
    /// For every PCI device: the host bridge it hangs under.
    host: Vec<usize>,
    /// For every PCI device: the "bridge unit" it belongs to when it is a bridge (a
    /// downstream port belongs to its switch's upstream port; others are their own unit).
    unit: Vec<usize>,
    /// For every PCI device: its NUMA node after the fallbacks in the module docs.
    numa: Vec<Option<u32>>,
    /// GPU×GPU fabric class, row-major.
    fabric: Vec<Option<PairClass>>,
}

impl<'t> Classifier<'t> {
    /// Builds the classifier. The topology must be valid ([`Topology::validate`]); on an
    /// invalid one (cycles, dangling parents) chains stop at the first bad link rather
    /// than loop or panic.
    pub fn new(topo: &'t Topology) -> Self {
        let n = topo.pci.len();
        let mut chains = Vec::with_capacity(n);
        let mut host = Vec::with_capacity(n);
        for i in 0..n {
            let mut chain = Vec::new();
            let mut cur = topo.pci[i].parent;
            let mut h = usize::MAX;
            // Bounded by n steps: a cycle cannot loop forever.
            for _ in 0..=n {
                match cur {
                    PciParent::Host(hb) => {
                        h = hb;
                        break;
                    }
                    PciParent::Bridge(p) => {
                        if p >= n || chain.contains(&p) {
                            break;
                        }
                        chain.push(p);
                        cur = topo.pci[p].parent;
                    }
                }
            }
            chains.push(chain);
            host.push(h);
        }
        let unit = (0..n)
            .map(|i| {
                let d = &topo.pci[i];
                match (d.kind, d.parent) {
                    (PciKind::SwitchDownstream, PciParent::Bridge(p))
                        if p < n && topo.pci[p].kind == PciKind::SwitchUpstream =>
                    {
                        p
                    }
                    _ => i,
                }
            })
            .collect();

        // NUMA fallbacks: own value, else a sibling under the same host bridge, else the
        // only node of a machine that lists exactly one. A topology that lists no NUMA
        // node at all (a tool that does not print NUMA) leaves the node unknown.
        let mut host_numa: Vec<Option<u32>> = vec![None; topo.host_bridges.len()];
        for (i, d) in topo.pci.iter().enumerate() {
            if let (Some(nn), Some(slot)) = (d.numa_node, host_numa.get_mut(host[i])) {
                slot.get_or_insert(nn);
            }
        }
        let single = match topo.numa.as_slice() {
            [only] => Some(only.id),
            _ => None,
        };
        let numa = (0..n)
            .map(|i| {
                topo.pci[i]
                    .numa_node
                    .or_else(|| host_numa.get(host[i]).copied().flatten())
                    .or(single)
            })
            .collect();

        let g = topo.gpus.len();
        let mut fabric = vec![None; g * g];
        for l in &topo.gpu_links {
            if l.a < g && l.b < g && l.a != l.b {
                let c = match l.kind {
                    FabricKind::Nvlink => PairClass::NvLink(l.count),
                    FabricKind::Xgmi => PairClass::Xgmi(l.count),
                };
                fabric[l.a * g + l.b] = Some(c);
                fabric[l.b * g + l.a] = Some(c);
            }
        }
        Classifier {
            topo,
            chains,
            host,
            unit,
            numa,
            fabric,
        }
    }

    /// The topology this classifier reads.
    pub fn topology(&self) -> &'t Topology {
        self.topo
    }

    /// The NUMA node a PCI device counts as (after fallbacks), if any.
    pub fn numa_of(&self, pci: usize) -> Option<u32> {
        self.numa.get(pci).copied().flatten()
    }

    /// The host bridge index of a PCI device.
    pub fn host_of(&self, pci: usize) -> usize {
        self.host[pci]
    }

    /// Classifies two PCI functions by their PCIe path alone (`X` for the same one).
    pub fn pci(&self, a: usize, b: usize) -> PairClass {
        if a == b {
            return PairClass::Same;
        }
        PairClass::Pcie(self.pcie_path(a, b))
    }

    /// False when the PCIe class of `a`–`b` rests on an unknown NUMA node: the path runs
    /// between host bridges and the node of either end is unknown, so NODE and SYS cannot
    /// be told apart and [`Classifier::pcie_path`] answers `SYS`, the pessimistic bound.
    pub fn numa_certain(&self, a: usize, b: usize) -> bool {
        if a == b || (self.host[a] == self.host[b] && self.host[a] != usize::MAX) {
            return true;
        }
        self.numa[a].is_some() && self.numa[b].is_some()
    }

    /// The PCIe class of the path between two distinct PCI functions.
    pub fn pcie_path(&self, a: usize, b: usize) -> PcieClass {
        if self.host[a] != self.host[b] || self.host[a] == usize::MAX {
            return match (self.numa[a], self.numa[b]) {
                (Some(x), Some(y)) if x == y => PcieClass::Node,
                _ => PcieClass::Sys,
            };
        }
        let (ca, cb) = (&self.chains[a], &self.chains[b]);
        // Lowest common ancestor: the first bridge on A's chain that is also on B's.
        let lca = ca
            .iter()
            .position(|x| cb.contains(x))
            .map(|ia| (ia, ca[ia]));
        let Some((ia, l)) = lca else {
            return PcieClass::Phb;
        };
        let ib = cb.iter().position(|x| *x == l).unwrap_or(cb.len());
        // A switch (upstream port plus downstream ports) is one bridge unit: the path is
        // PIX while every bridge on A→L→B (L included) belongs to a single unit.
        let mut first_unit = None;
        for &br in ca[..=ia].iter().chain(cb[..ib].iter()) {
            let u = self.unit[br];
            match first_unit {
                None => first_unit = Some(u),
                Some(f) if f != u => return PcieClass::Pxb,
                Some(_) => {}
            }
        }
        PcieClass::Pix
    }

    /// The bridges the PCIe path between two distinct functions under one host bridge runs
    /// through, as bridge units (a switch counts once, by its upstream port); `None` when
    /// they hang under different host bridges (or the tree is broken). It says *why*
    /// [`Classifier::pcie_path`] answers PIX or PXB: PXB has a unit on at least one side.
    pub fn pcie_route(&self, a: usize, b: usize) -> Option<PcieRoute> {
        if a == b || self.host[a] != self.host[b] || self.host[a] == usize::MAX {
            return None;
        }
        let (ca, cb) = (&self.chains[a], &self.chains[b]);
        let lca = ca.iter().position(|x| cb.contains(x));
        let common = lca.map(|ia| self.unit[ca[ia]]);
        let side = |chain: &[usize], end: usize| {
            let mut units: Vec<usize> = Vec::new();
            for &br in &chain[..end] {
                let u = self.unit[br];
                if Some(u) != common && units.last() != Some(&u) {
                    units.push(u);
                }
            }
            units
        };
        let (ia, ib) = match (lca, common) {
            (Some(ia), Some(_)) => (ia, cb.iter().position(|x| *x == ca[ia]).unwrap_or(cb.len())),
            _ => (ca.len(), cb.len()),
        };
        Some(PcieRoute {
            common,
            a_side: side(ca, ia),
            b_side: side(cb, ib),
        })
    }

    /// Classifies two GPUs (indices into `gpus`): NVLink/xGMI first, else PCIe.
    pub fn gpu_gpu(&self, a: usize, b: usize) -> PairClass {
        if a == b {
            return PairClass::Same;
        }
        let g = self.topo.gpus.len();
        if let Some(c) = self.fabric[a * g + b] {
            return c;
        }
        self.pci(self.topo.gpus[a].pci, self.topo.gpus[b].pci)
    }

    /// Classifies a GPU and a NIC (indices into `gpus` and `nics`), with NCCL's view.
    pub fn gpu_nic(&self, gpu: usize, nic: usize) -> GpuNicPath {
        let g = &self.topo.gpus[gpu];
        let class = self.pcie_path(g.pci, self.topo.nics[nic].pci);
        GpuNicPath::new(class, g.c2c)
    }

    /// Classifies two NICs.
    pub fn nic_nic(&self, a: usize, b: usize) -> PairClass {
        self.pci(self.topo.nics[a].pci, self.topo.nics[b].pci)
    }

    /// The NIC among `nics` that NCCL would use for `gpu` ([`GpuNicPath::preference`]),
    /// ties broken by the lower PCI address; `None` when `nics` is empty.
    pub fn best_nic(
        &self,
        gpu: usize,
        nics: impl IntoIterator<Item = usize>,
    ) -> Option<(usize, GpuNicPath)> {
        nics.into_iter()
            .map(|n| (n, self.gpu_nic(gpu, n)))
            .min_by_key(|(n, p)| (p.preference(), self.topo.nic_bdf(*n)))
    }

    /// The whole GPU×NIC table, row-major (`gpus.len()` rows of `nics.len()`).
    pub fn gpu_nic_table(&self) -> Vec<GpuNicPath> {
        let mut out = Vec::with_capacity(self.topo.gpus.len() * self.topo.nics.len());
        for g in 0..self.topo.gpus.len() {
            for n in 0..self.topo.nics.len() {
                out.push(self.gpu_nic(g, n));
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use crate::pci::{class, vendor};
    use crate::{Bdf, Gpu, GpuVendor, PairClass, PciKind, PcieClass, TopologyBuilder};

    /// Two GPUs on two host bridges, with the given NUMA nodes and listed nodes.
    fn two(numa: [Option<u32>; 2], listed: &[u32]) -> crate::Topology {
        let mut b = TopologyBuilder::new("t");
        for id in listed {
            b.numa_node(*id, Default::default(), None, Vec::new(), None);
        }
        for (i, n) in numa.iter().enumerate() {
            let hb = b.host_bridge(0, i as u8 * 0x40);
            let bus = i as u8 * 0x40;
            let rp = b.bridge(
                hb,
                Bdf::new(0, bus, 1, 0),
                PciKind::RootPort,
                *n,
                (bus + 1, bus + 1),
                None,
            );
            let p = b.endpoint(
                rp,
                Bdf::new(0, i as u8 * 0x40 + 1, 0, 0),
                vendor::AMD,
                0,
                class::DISPLAY_3D,
                *n,
                None,
            );
            b.gpu(Gpu::on(p, GpuVendor::Amd));
        }
        b.build().unwrap()
    }

    #[test]
    fn unknown_numa_is_never_guessed() {
        // No node listed at all (a tool that prints none): unknown, SYS, uncertain.
        let t = two([None, None], &[]);
        let c = t.classifier();
        assert_eq!(c.numa_of(t.gpus[0].pci), None);
        assert_eq!(c.gpu_gpu(0, 1), PairClass::Pcie(PcieClass::Sys));
        assert!(!c.numa_certain(t.gpus[0].pci, t.gpus[1].pci));
        // Exactly one node listed: the machine has one node, so it is that node.
        let t = two([None, None], &[3]);
        let c = t.classifier();
        assert_eq!(c.numa_of(t.gpus[1].pci), Some(3));
        assert_eq!(c.gpu_gpu(0, 1), PairClass::Pcie(PcieClass::Node));
        assert!(c.numa_certain(t.gpus[0].pci, t.gpus[1].pci));
        // Known and different: SYS, certain.
        let t = two([Some(0), Some(1)], &[0, 1]);
        let c = t.classifier();
        assert_eq!(c.gpu_gpu(0, 1), PairClass::Pcie(PcieClass::Sys));
        assert!(c.numa_certain(t.gpus[0].pci, t.gpus[1].pci));
    }

    #[test]
    fn fabric_status_tells_unknown_from_none() {
        let mut t = two([Some(0), Some(0)], &[0]);
        assert_eq!(t.fabric_status(), crate::FabricStatus::None);
        t.fabric = crate::FabricKnowledge::Unknown;
        assert_eq!(t.fabric_status(), crate::FabricStatus::Unknown);
        t.fabric = crate::FabricKnowledge::Known;
        t.gpu_links.push(crate::GpuLink {
            a: 0,
            b: 1,
            kind: crate::FabricKind::Xgmi,
            count: 1,
            weight: None,
            hops: None,
        });
        assert_eq!(t.fabric_status(), crate::FabricStatus::Links);
    }
}
