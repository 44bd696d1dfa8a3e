//! `pcie-2socket`: a switchless two-socket PCIe server, constructed to exercise PHB and
//! NODE. Socket 0: host bridge `pci0000:00` holds GPU `01:00.0` and NIC `03:00.0` on two
//! root ports (PHB between them), host bridge `pci0000:40` holds GPU `41:00.0` (NODE to
//! the NIC). Socket 1 mirrors it at `80`/`c0`. No NVLink.

use topoalign_topology::pci::{class, vendor};
use topoalign_topology::{
    CpuSet, Gpu, GpuVendor, LinkLayer, ModelError, PciKind, Sriov, Topology, TopologyBuilder,
};

use super::parts::{GEN4_X16, bdf0, mellanox_fn, modeled_uuid, rdma_nic};

pub(crate) fn build() -> Result<Topology, ModelError> {
    let mut b = TopologyBuilder::new("pcie-2socket");
    let mem = 263_000_000;
    b.numa_node(
        0,
        CpuSet::range(0, 15).union(&CpuSet::range(32, 47)),
        Some(mem),
        vec![10, 32],
        Some(0),
    );
    b.numa_node(
        1,
        CpuSet::range(16, 31).union(&CpuSet::range(48, 63)),
        Some(mem),
        vec![32, 10],
        Some(1),
    );
    let mut gpu_idx = 0u32;
    for (socket, base) in [(0u32, 0x00u8), (1, 0x80)] {
        let numa = Some(socket);
        let hb = b.host_bridge(0, base);
        let rp_gpu = b.bridge(
            hb,
            bdf0(base, 1, 0),
            PciKind::RootPort,
            numa,
            (base + 1, base + 1),
            GEN4_X16,
        );
        let rp_nic = b.bridge(
            hb,
            bdf0(base, 3, 0),
            PciKind::RootPort,
            numa,
            (base + 3, base + 3),
            GEN4_X16,
        );
        let hb2 = b.host_bridge(0, base + 0x40);
        let rp_gpu2 = b.bridge(
            hb2,
            bdf0(base + 0x40, 1, 0),
            PciKind::RootPort,
            numa,
            (base + 0x41, base + 0x41),
            GEN4_X16,
        );
        for (port, bus) in [(rp_gpu, base + 1), (rp_gpu2, base + 0x41)] {
            let pci = b.endpoint(
                port,
                bdf0(bus, 0, 0),
                vendor::NVIDIA,
                0x26b9,
                class::DISPLAY_3D,
                numa,
                GEN4_X16,
            );
            let mut g = Gpu::on(pci, GpuVendor::Nvidia);
            g.model = Some("NVIDIA L40S".to_string());
            g.memory_mib = Some(46_068);
            g.uuid = Some(modeled_uuid(0x2505, gpu_idx));
            g.nvidia_minor = Some(gpu_idx);
            b.gpu(g);
            gpu_idx += 1;
        }
        let nic_pci = mellanox_fn(
            &mut b,
            rp_nic,
            bdf0(base + 3, 0, 0),
            0x101d,
            LinkLayer::Ethernet,
            numa,
            GEN4_X16,
        );
        let netdev = format!("ens{}f0np0", base + 3);
        let mut nic = rdma_nic(nic_pci, Some(&netdev), socket, LinkLayer::Ethernet, 100);
        nic.sriov = Sriov::Pf {
            total_vfs: 8,
            vfs: Vec::new(),
        };
        b.nic(nic);
    }
    b.build()
}
