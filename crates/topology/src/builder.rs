//! A small builder for topologies: used by the built-in profiles, by tests and by the
//! random topologies of property tests.

use crate::Topology;
use crate::device::{FabricKind, Gpu, GpuLink, GpuVendor, Nic, Sriov};
use crate::error::ModelError;
use crate::ids::Bdf;
use crate::numa::{CpuSet, NumaNode};
use crate::pci::{HostBridge, PciDevice, PciKind, PciParent, PcieLink};

/// Builds a [`Topology`] step by step; [`TopologyBuilder::build`] canonicalizes and
/// validates it.
#[derive(Debug, Clone, Default)]
pub struct TopologyBuilder {
    topo: Topology,
}

impl TopologyBuilder {
    /// Starts an empty topology with a name.
    pub fn new(name: &str) -> Self {
        TopologyBuilder {
            topo: Topology {
                name: name.to_string(),
                ..Topology::default()
            },
        }
    }

    /// Marks the GPU fabric as not discovered ([`crate::FabricKnowledge::Unknown`]).
    pub fn fabric_unknown(&mut self) -> &mut Self {
        self.topo.fabric = crate::FabricKnowledge::Unknown;
        self
    }

    /// Adds a NUMA node.
    pub fn numa_node(
        &mut self,
        id: u32,
        cpus: CpuSet,
        memory_kib: Option<u64>,
        distances: Vec<u32>,
        socket: Option<u32>,
    ) -> &mut Self {
        self.topo.numa.push(NumaNode {
            id,
            cpus,
            memory_kib,
            distances,
            socket,
        });
        self
    }

    /// Adds a host bridge `pciDDDD:BB` and returns its parent handle.
    pub fn host_bridge(&mut self, domain: u16, bus: u8) -> PciParent {
        self.topo.host_bridges.push(HostBridge { domain, bus });
        PciParent::Host(self.topo.host_bridges.len() - 1)
    }

    /// Adds any PCI function and returns its index.
    pub fn pci(&mut self, dev: PciDevice) -> usize {
        self.topo.pci.push(dev);
        self.topo.pci.len() - 1
    }

    /// Adds a bridge (root port or switch port) with typical identity values and returns
    /// a parent handle for what hangs below it. `secondary..=subordinate` is its bus range.
    pub fn bridge(
        &mut self,
        parent: PciParent,
        bdf: Bdf,
        kind: PciKind,
        numa: Option<u32>,
        bus_range: (u8, u8),
        link: Option<PcieLink>,
    ) -> PciParent {
        let i = self.pci(PciDevice::bridge(
            bdf,
            parent,
            kind,
            numa,
            Some(bus_range),
            link,
        ));
        PciParent::Bridge(i)
    }

    /// Adds an endpoint and returns its PCI index.
    #[allow(clippy::too_many_arguments)]
    pub fn endpoint(
        &mut self,
        parent: PciParent,
        bdf: Bdf,
        vendor: u16,
        device: u16,
        class: u32,
        numa: Option<u32>,
        link: Option<PcieLink>,
    ) -> usize {
        self.pci(PciDevice {
            bdf,
            parent,
            kind: PciKind::Endpoint,
            vendor,
            device,
            class,
            numa_node: numa,
            link,
            bus_range: None,
        })
    }

    /// Registers a GPU on an existing PCI function and returns its provisional index
    /// (indices are final only after [`TopologyBuilder::build`] sorts by address).
    pub fn gpu(&mut self, gpu: Gpu) -> usize {
        self.topo.gpus.push(gpu);
        self.topo.gpus.len() - 1
    }

    /// Registers a NIC on an existing PCI function and returns its provisional index.
    pub fn nic(&mut self, nic: Nic) -> usize {
        self.topo.nics.push(nic);
        self.topo.nics.len() - 1
    }

    /// Links two GPUs (provisional indices).
    pub fn link(&mut self, a: usize, b: usize, kind: FabricKind, count: u32) -> &mut Self {
        self.topo.gpu_links.push(GpuLink {
            a: a.min(b),
            b: a.max(b),
            kind,
            count,
            weight: None,
            hops: None,
        });
        self
    }

    /// Adds a fully populated link record.
    pub fn link_record(&mut self, link: GpuLink) -> &mut Self {
        self.topo.gpu_links.push(link);
        self
    }

    /// Read access to what has been built so far.
    pub fn topology(&self) -> &Topology {
        &self.topo
    }

    /// Canonicalizes and validates.
    pub fn build(mut self) -> Result<Topology, ModelError> {
        self.topo.canonicalize();
        self.topo.validate()?;
        Ok(self.topo)
    }
}

impl Gpu {
    /// A GPU record with only the PCI index and vendor set.
    pub fn on(pci: usize, vendor: GpuVendor) -> Gpu {
        Gpu {
            pci,
            vendor,
            model: None,
            memory_mib: None,
            uuid: None,
            nvidia_minor: None,
            render_minor: None,
            card_minor: None,
            kfd_node: None,
            memory_numa_node: None,
            c2c: false,
        }
    }
}

impl Nic {
    /// A NIC record with only the PCI index set (no netdev, no RDMA, no SR-IOV).
    pub fn on(pci: usize) -> Nic {
        Nic {
            pci,
            netdev: None,
            rdma: None,
            uverbs: None,
            ports: Vec::new(),
            sriov: Sriov::None,
            speed_mbps: None,
            rdma_unnamed: false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::class::{PairClass, PcieClass};
    use crate::pci::class as pclass;
    use crate::pci::vendor;

    fn bdf(s: &str) -> Bdf {
        s.parse().unwrap()
    }

    /// Two sockets; socket 0 has a switch with GPU+NIC, a second GPU on another root
    /// port of the same host bridge, a two-level switch, and a GPU on another host
    /// bridge; socket 1 has one GPU.
    fn sample() -> Topology {
        let mut b = TopologyBuilder::new("sample");
        b.numa_node(0, CpuSet::range(0, 7), None, vec![10, 21], Some(0));
        b.numa_node(1, CpuSet::range(8, 15), None, vec![21, 10], Some(1));
        let h0 = b.host_bridge(0, 0x00);
        let rp = b.bridge(
            h0,
            bdf("0000:00:01.0"),
            PciKind::RootPort,
            Some(0),
            (1, 4),
            None,
        );
        let usp = b.bridge(
            rp,
            bdf("0000:01:00.0"),
            PciKind::SwitchUpstream,
            Some(0),
            (2, 4),
            None,
        );
        let d1 = b.bridge(
            usp,
            bdf("0000:02:00.0"),
            PciKind::SwitchDownstream,
            Some(0),
            (3, 3),
            None,
        );
        let d2 = b.bridge(
            usp,
            bdf("0000:02:01.0"),
            PciKind::SwitchDownstream,
            Some(0),
            (4, 4),
            None,
        );
        let g0 = b.endpoint(
            d1,
            bdf("0000:03:00.0"),
            vendor::NVIDIA,
            0x2330,
            pclass::DISPLAY_3D,
            Some(0),
            None,
        );
        let n0 = b.endpoint(
            d2,
            bdf("0000:04:00.0"),
            vendor::MELLANOX,
            0x1021,
            pclass::INFINIBAND,
            Some(0),
            None,
        );
        // Second function of the same NIC card.
        let n0b = b.endpoint(
            d2,
            bdf("0000:04:00.1"),
            vendor::MELLANOX,
            0x1021,
            pclass::INFINIBAND,
            None,
            None,
        );
        let rp2 = b.bridge(
            h0,
            bdf("0000:00:02.0"),
            PciKind::RootPort,
            Some(0),
            (5, 5),
            None,
        );
        let g1 = b.endpoint(
            rp2,
            bdf("0000:05:00.0"),
            vendor::NVIDIA,
            0x2330,
            pclass::DISPLAY_3D,
            Some(0),
            None,
        );
        // Two-level switch: rp3 -> top USP -> DSPs -> lower USPs -> DSP -> device.
        let rp3 = b.bridge(
            h0,
            bdf("0000:00:03.0"),
            PciKind::RootPort,
            Some(0),
            (0x10, 0x1f),
            None,
        );
        let top = b.bridge(
            rp3,
            bdf("0000:10:00.0"),
            PciKind::SwitchUpstream,
            Some(0),
            (0x11, 0x1f),
            None,
        );
        let ta = b.bridge(
            top,
            bdf("0000:11:00.0"),
            PciKind::SwitchDownstream,
            Some(0),
            (0x12, 0x14),
            None,
        );
        let tb = b.bridge(
            top,
            bdf("0000:11:01.0"),
            PciKind::SwitchDownstream,
            Some(0),
            (0x15, 0x17),
            None,
        );
        let la = b.bridge(
            ta,
            bdf("0000:12:00.0"),
            PciKind::SwitchUpstream,
            Some(0),
            (0x13, 0x14),
            None,
        );
        let lb = b.bridge(
            tb,
            bdf("0000:15:00.0"),
            PciKind::SwitchUpstream,
            Some(0),
            (0x16, 0x17),
            None,
        );
        let lad = b.bridge(
            la,
            bdf("0000:13:00.0"),
            PciKind::SwitchDownstream,
            Some(0),
            (0x14, 0x14),
            None,
        );
        let lbd = b.bridge(
            lb,
            bdf("0000:16:00.0"),
            PciKind::SwitchDownstream,
            Some(0),
            (0x17, 0x17),
            None,
        );
        let g2 = b.endpoint(
            lad,
            bdf("0000:14:00.0"),
            vendor::NVIDIA,
            0x2330,
            pclass::DISPLAY_3D,
            Some(0),
            None,
        );
        let n1 = b.endpoint(
            lbd,
            bdf("0000:17:00.0"),
            vendor::MELLANOX,
            0x1021,
            pclass::INFINIBAND,
            Some(0),
            None,
        );
        let h1 = b.host_bridge(0, 0x40);
        let rp4 = b.bridge(
            h1,
            bdf("0000:40:01.0"),
            PciKind::RootPort,
            Some(0),
            (0x41, 0x41),
            None,
        );
        let g3 = b.endpoint(
            rp4,
            bdf("0000:41:00.0"),
            vendor::NVIDIA,
            0x2330,
            pclass::DISPLAY_3D,
            Some(0),
            None,
        );
        let h2 = b.host_bridge(0, 0x80);
        let rp5 = b.bridge(
            h2,
            bdf("0000:80:01.0"),
            PciKind::RootPort,
            Some(1),
            (0x81, 0x81),
            None,
        );
        let g4 = b.endpoint(
            rp5,
            bdf("0000:81:00.0"),
            vendor::NVIDIA,
            0x2330,
            pclass::DISPLAY_3D,
            Some(1),
            None,
        );
        for p in [g0, g1, g2, g3, g4] {
            b.gpu(Gpu::on(p, GpuVendor::Nvidia));
        }
        for p in [n0, n0b, n1] {
            b.nic(Nic::on(p));
        }
        b.link(0, 1, FabricKind::Nvlink, 4);
        b.build().unwrap()
    }

    #[test]
    fn classifies_every_level() {
        let t = sample();
        let c = t.classifier();
        // GPUs in BDF order: 03, 05, 14, 41, 81. NICs: 04.0, 04.1, 17.
        assert_eq!(c.gpu_gpu(0, 0), PairClass::Same);
        assert_eq!(c.gpu_gpu(0, 1), PairClass::NvLink(4));
        assert_eq!(c.gpu_nic(0, 0).class, PcieClass::Pix, "same switch");
        assert_eq!(
            c.nic_nic(0, 1),
            PairClass::Pcie(PcieClass::Pix),
            "same card"
        );
        assert_eq!(c.gpu_nic(1, 0).class, PcieClass::Phb, "other root port");
        assert_eq!(c.gpu_nic(2, 2).class, PcieClass::Pxb, "two-level switch");
        assert_eq!(c.gpu_nic(3, 0).class, PcieClass::Node, "other host bridge");
        assert_eq!(c.gpu_nic(4, 0).class, PcieClass::Sys, "other socket");
        // NIC 04.1 has numa -1 and inherits node 0 from its host bridge.
        assert_eq!(c.gpu_nic(3, 1).class, PcieClass::Node);
        assert_eq!(c.gpu_nic(4, 1).class, PcieClass::Sys);
        assert!(c.gpu_nic(0, 0).gdr && c.gpu_nic(2, 2).gdr && !c.gpu_nic(1, 0).gdr);
    }

    #[test]
    fn best_nic_prefers_gdr_then_class_then_address() {
        let t = sample();
        let c = t.classifier();
        // GPU 0 (switch with NIC 0): NIC 0 is PIX; NIC 2 (other root port) is PHB.
        assert_eq!(c.best_nic(0, [2, 0]).map(|(n, _)| n), Some(0));
        // GPU 3 (own host bridge): NICs 0 and 1 are both NODE; the lower address wins.
        let (n, p) = c.best_nic(3, [1, 0]).unwrap();
        assert_eq!((n, p.class), (0, PcieClass::Node));
        assert!(c.best_nic(0, []).is_none());
    }

    #[test]
    fn canonical_order_and_roundtrip_json() {
        let t = sample();
        assert!(t.pci.windows(2).all(|w| w[0].bdf < w[1].bdf));
        let json = serde_json::to_string(&t).unwrap();
        let back: Topology = serde_json::from_str(&json).unwrap();
        assert_eq!(back, t);
        assert_eq!(t.pcie_root(t.gpus[3].pci).unwrap(), "pci0000:40");
        assert_eq!(t.fabric_islands().len(), 4);
    }

    #[test]
    fn pcie_route_names_the_bridges_of_a_path() {
        let t = sample();
        let c = t.classifier();
        let name = |i: usize| t.pci[i].bdf.to_string();
        // PXB through a two-level switch: meets at the top switch, one lower switch on
        // each side.
        let r = c.pcie_route(t.gpus[2].pci, t.nics[2].pci).unwrap();
        assert_eq!(r.common.map(name).as_deref(), Some("0000:10:00.0"));
        assert_eq!(
            r.a_side.iter().map(|&i| name(i)).collect::<Vec<_>>(),
            ["0000:12:00.0"]
        );
        assert_eq!(
            r.b_side.iter().map(|&i| name(i)).collect::<Vec<_>>(),
            ["0000:15:00.0"]
        );
        // PIX: one switch, nothing on either side (its downstream ports are the switch).
        let r = c.pcie_route(t.gpus[0].pci, t.nics[0].pci).unwrap();
        assert_eq!(r.common.map(name).as_deref(), Some("0000:01:00.0"));
        assert!(r.a_side.is_empty() && r.b_side.is_empty());
        // PHB: two root ports of one host bridge meet nowhere below it.
        let r = c.pcie_route(t.gpus[1].pci, t.nics[0].pci).unwrap();
        assert_eq!(r.common, None);
        assert_eq!(
            r.a_side.iter().map(|&i| name(i)).collect::<Vec<_>>(),
            ["0000:00:02.0"]
        );
        assert_eq!(
            r.b_side.iter().map(|&i| name(i)).collect::<Vec<_>>(),
            ["0000:01:00.0", "0000:00:01.0"]
        );
        // Different host bridges: no route.
        assert_eq!(c.pcie_route(t.gpus[3].pci, t.nics[0].pci), None);
    }

    #[test]
    fn unnamed_rdma_nic_counts_as_rdma() {
        let mut t = sample();
        let all = crate::matrix::MatrixOptions::default();
        // No NIC of the sample names an RDMA device: no NIC column.
        assert!(t.nics.iter().all(|n| !n.is_rdma()));
        assert_eq!(crate::PairMatrix::build(&t, all).devices.len(), 5);
        t.nics[2].rdma_unnamed = true;
        assert!(t.nics[2].is_rdma());
        let m = crate::PairMatrix::build(&t, all);
        assert_eq!(m.devices.len(), 6);
        assert_eq!(m.devices[5].bdf, "0000:17:00.0");
        // The flag survives JSON and is left out when false.
        let json = serde_json::to_string(&t).unwrap();
        assert_eq!(json.matches("rdmaUnnamed").count(), 1);
        let back: Topology = serde_json::from_str(&json).unwrap();
        assert_eq!(back, t);
    }

    #[test]
    fn validate_catches_broken_models() {
        let mut t = sample();
        t.gpus[0].pci = 999;
        assert!(matches!(
            t.validate(),
            Err(ModelError::DanglingIndex { .. })
        ));
        let mut t = sample();
        t.pci[0].parent = PciParent::Bridge(0);
        assert!(matches!(t.validate(), Err(ModelError::Cycle(_))));
        let mut t = sample();
        let nic_pci = t.nics[0].pci;
        t.gpus[0].pci = nic_pci;
        assert!(matches!(t.validate(), Err(ModelError::WrongClass { .. })));
        // The classifier tolerates a cycle without hanging.
        let mut t = sample();
        t.pci[1].parent = PciParent::Bridge(2);
        t.pci[2].parent = PciParent::Bridge(1);
        let _ = t.classifier().gpu_nic(0, 0);
    }
}
