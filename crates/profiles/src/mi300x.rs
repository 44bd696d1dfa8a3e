//! `mi300x-8`: OCI BM.GPU.MI300X.8 (seed 000).
//!
//! From the seed: GPUs `11 2f 46 5d` on NUMA 0 and `8b aa c2 da` on NUMA 1, NICs
//! `0c 2a 41 58` / `86 a5 bd d5` (netdevs rdma0–rdma7), each GPU sharing a PCIe switch
//! with one NIC (11↔0c, 2f↔2a, 46↔41, 5d↔58, 8b↔86, aa↔a5, c2↔bd, da↔d5), VFs at
//! `NN:00.1…`. From the ROCm system-acceptance docs: all-to-all xGMI (weight 15, 1 hop).
//! Modeled: one host bridge per GPU+NIC pair with root bus NIC−4, the switch ports
//! below it, two 56-core sockets with SMT, 4 VFs enabled per PF (16 possible).

use topoalign_topology::pci::{class, vendor};
use topoalign_topology::{
    Bdf, CpuSet, FabricKind, Gpu, GpuVendor, LinkLayer, ModelError, Sriov, Topology,
    TopologyBuilder,
};

use super::parts::{GEN5_X16, all_to_all, bdf0, mellanox_fn, rdma_nic, switch_under_own_root};

/// (GPU bus, NIC bus) per pair, NUMA 0 first.
const PAIRS: [(u8, u8); 8] = [
    (0x11, 0x0c),
    (0x2f, 0x2a),
    (0x46, 0x41),
    (0x5d, 0x58),
    (0x8b, 0x86),
    (0xaa, 0xa5),
    (0xc2, 0xbd),
    (0xda, 0xd5),
];

/// VFs enabled per PF.
const VFS_PER_PF: u8 = 4;

pub(crate) fn build() -> Result<Topology, ModelError> {
    let mut b = TopologyBuilder::new("mi300x-8");
    let node_mem_kib = 1_056_768_000;
    b.numa_node(
        0,
        CpuSet::range(0, 55).union(&CpuSet::range(112, 167)),
        Some(node_mem_kib),
        vec![10, 21],
        Some(0),
    );
    b.numa_node(
        1,
        CpuSet::range(56, 111).union(&CpuSet::range(168, 223)),
        Some(node_mem_kib),
        vec![21, 10],
        Some(1),
    );
    let mut next_vf_rdma = 8;
    for (i, &(gbus, nbus)) in PAIRS.iter().enumerate() {
        let numa = Some(u32::from(i >= 4));
        let ports = switch_under_own_root(&mut b, nbus - 4, numa, &[nbus, gbus], GEN5_X16);
        let (nic_port, gpu_port) = (ports.downstream[0], ports.downstream[1]);
        let gpu_pci = b.endpoint(
            gpu_port,
            bdf0(gbus, 0, 0),
            vendor::AMD,
            0x74a1,
            class::PROCESSING_ACCEL,
            numa,
            GEN5_X16,
        );
        let idx = i as u32;
        let mut g = Gpu::on(gpu_pci, GpuVendor::Amd);
        g.model = Some("AMD Instinct MI300X".to_string());
        g.memory_mib = Some(196_608);
        g.card_minor = Some(idx);
        g.render_minor = Some(128 + idx);
        g.kfd_node = Some(2 + idx);
        b.gpu(g);

        let pf_bdf = bdf0(nbus, 0, 0);
        let pf_pci = mellanox_fn(
            &mut b,
            nic_port,
            pf_bdf,
            0x1021,
            LinkLayer::Ethernet,
            numa,
            GEN5_X16,
        );
        let netdev = format!("rdma{i}");
        let mut pf = rdma_nic(pf_pci, Some(&netdev), idx, LinkLayer::Ethernet, 400);
        let vf_bdfs: Vec<Bdf> = (1..=VFS_PER_PF).map(|f| bdf0(nbus, 0, f)).collect();
        pf.sriov = Sriov::Pf {
            total_vfs: 16,
            vfs: vf_bdfs.clone(),
        };
        b.nic(pf);
        for (k, vf_bdf) in vf_bdfs.iter().enumerate() {
            let vf_pci = mellanox_fn(
                &mut b,
                nic_port,
                *vf_bdf,
                0x101e,
                LinkLayer::Ethernet,
                numa,
                None,
            );
            let vf_netdev = format!("rdma{i}v{k}");
            let mut vf = rdma_nic(
                vf_pci,
                Some(&vf_netdev),
                next_vf_rdma,
                LinkLayer::Ethernet,
                400,
            );
            next_vf_rdma += 1;
            vf.sriov = Sriov::Vf {
                pf: pf_bdf,
                index: k as u32,
            };
            b.nic(vf);
        }
    }
    all_to_all(&mut b, PAIRS.len(), FabricKind::Xgmi, 1, Some(15));
    b.build()
}
