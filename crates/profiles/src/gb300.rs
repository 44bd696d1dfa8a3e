//! `gb300-4`: Azure ND GB300 v6 (seed 001).
//!
//! From the seed: GPUs `0008:06:00.0`, `0009:06:00.0` (NUMA 0), `0018:06:00.0`,
//! `0019:06:00.0` (NUMA 1), each in its own PCI domain and root (`pci0008:00` …), NV18
//! between all GPUs; IB-only ConnectX functions `0101:00:00.0`…`0104:00:00.0` (mlx5_0..3,
//! no netdev, 800 Gb/s), two per NUMA node. Modeled: the root port and switch ports
//! between each GPU's root and bus 06, two Grace sockets of 64 vCPUs, and NVLink-C2C
//! between every GPU and its CPU (GB300 is a Grace-Blackwell part).

use topoalign_topology::pci::{class, vendor};
use topoalign_topology::{
    Bdf, CpuSet, FabricKind, Gpu, GpuVendor, LinkLayer, ModelError, PciKind, Topology,
    TopologyBuilder,
};

use super::parts::{GEN5_X16, all_to_all, mellanox_fn, modeled_uuid, rdma_nic};

pub(crate) fn build() -> Result<Topology, ModelError> {
    let mut b = TopologyBuilder::new("gb300-4");
    let mem = 460_000_000;
    b.numa_node(0, CpuSet::range(0, 63), Some(mem), vec![10, 20], Some(0));
    b.numa_node(1, CpuSet::range(64, 127), Some(mem), vec![20, 10], Some(1));

    for (i, domain) in [0x0008u16, 0x0009, 0x0018, 0x0019].into_iter().enumerate() {
        let numa = Some(u32::from(i >= 2));
        let hb = b.host_bridge(domain, 0);
        let rp = b.bridge(
            hb,
            Bdf::new(domain, 0, 0, 0),
            PciKind::RootPort,
            numa,
            (1, 6),
            GEN5_X16,
        );
        let usp = b.bridge(
            rp,
            Bdf::new(domain, 1, 0, 0),
            PciKind::SwitchUpstream,
            numa,
            (2, 6),
            GEN5_X16,
        );
        let dsp = b.bridge(
            usp,
            Bdf::new(domain, 2, 0, 0),
            PciKind::SwitchDownstream,
            numa,
            (6, 6),
            GEN5_X16,
        );
        let pci = b.endpoint(
            dsp,
            Bdf::new(domain, 6, 0, 0),
            vendor::NVIDIA,
            0x31c2,
            class::DISPLAY_3D,
            numa,
            GEN5_X16,
        );
        let idx = i as u32;
        let mut g = Gpu::on(pci, GpuVendor::Nvidia);
        g.model = Some("NVIDIA GB300".to_string());
        g.memory_mib = Some(284_208);
        g.uuid = Some(modeled_uuid(0x0b300, idx));
        g.nvidia_minor = Some(idx);
        g.c2c = true;
        b.gpu(g);
    }
    all_to_all(&mut b, 4, FabricKind::Nvlink, 18, None);

    for i in 0..4u16 {
        let domain = 0x0101 + i;
        let numa = Some(u32::from(i >= 2));
        let hb = b.host_bridge(domain, 0);
        // Hyper-V presents each VF directly on the root bus of a synthetic domain; the
        // link state is not exposed.
        let pci = mellanox_fn(
            &mut b,
            hb,
            Bdf::new(domain, 0, 0, 0),
            0x1023,
            LinkLayer::InfiniBand,
            numa,
            None,
        );
        b.nic(rdma_nic(
            pci,
            None,
            u32::from(i),
            LinkLayer::InfiniBand,
            800,
        ));
    }
    b.build()
}
