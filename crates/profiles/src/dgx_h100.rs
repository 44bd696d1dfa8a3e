//! `dgx-h100`: NVIDIA DGX H100.
//!
//! From the public DGX H100 documentation: GPUs at buses `1b 43 52 61` (NUMA 0) and
//! `9d c3 d1 df` (NUMA 1), all pairs NV18 through the NVSwitches; the compute NIC of GPU
//! 0..7 is mlx5_0, 3, 4, 5, 6, 9, 10, 11 (ibp24s0, ibp64s0, ibp79s0, ibp94s0, ibp154s0,
//! ibp192s0, ibp206s0, ibp220s0), each sharing a PCIe switch with its GPU. Modeled: one
//! host bridge per GPU+NIC switch with root bus NIC−3, the storage NICs left out, and
//! one in-band management NIC (mlx5_1, Ethernet) on its own root complex of socket 0.

use topoalign_topology::pci::{class, vendor};
use topoalign_topology::{
    CpuSet, FabricKind, Gpu, GpuVendor, LinkLayer, ModelError, PciKind, Topology, TopologyBuilder,
};

use crate::MigGeometry;

use super::parts::{
    GEN5_X16, all_to_all, bdf0, mellanox_fn, modeled_uuid, rdma_nic, switch_under_own_root,
};

/// (GPU bus, NIC bus, mlx5 index) per GPU.
const PAIRS: [(u8, u8, u32); 8] = [
    (0x1b, 0x18, 0),
    (0x43, 0x40, 3),
    (0x52, 0x4f, 4),
    (0x61, 0x5e, 5),
    (0x9d, 0x9a, 6),
    (0xc3, 0xc0, 9),
    (0xd1, 0xce, 10),
    (0xdf, 0xdc, 11),
];

/// The MIG geometry of `dgx-h100-mig`: a mixed geometry on GPUs 0–3 (GPU 0 as seven
/// `1g.10gb`, GPU 1 as `4g.40gb` + `3g.40gb`, GPU 2 as `3g.40gb` + `2g.20gb` + `1g.10gb`,
/// GPU 3 as two `1g.20gb`, a `2g.20gb` and a `1g.10gb`); GPUs 4–7 whole.
pub(crate) const MIG: MigGeometry = MigGeometry {
    model: "h100-80gb",
    gpus: &[
        (
            0,
            &[
                ("1g.10gb", 0),
                ("1g.10gb", 1),
                ("1g.10gb", 2),
                ("1g.10gb", 3),
                ("1g.10gb", 4),
                ("1g.10gb", 5),
                ("1g.10gb", 6),
            ],
        ),
        (1, &[("4g.40gb", 0), ("3g.40gb", 4)]),
        (2, &[("3g.40gb", 0), ("2g.20gb", 4), ("1g.10gb", 6)]),
        (
            3,
            &[
                ("1g.20gb", 0),
                ("1g.20gb", 2),
                ("2g.20gb", 4),
                ("1g.10gb", 6),
            ],
        ),
    ],
};

/// The machine, named `name` (`dgx-h100`, or `dgx-h100-mig` with [`MIG`]).
pub(crate) fn build(name: &str) -> Result<Topology, ModelError> {
    let mut b = TopologyBuilder::new(name);
    let mem = 1_056_768_000;
    b.numa_node(
        0,
        CpuSet::range(0, 55).union(&CpuSet::range(112, 167)),
        Some(mem),
        vec![10, 21],
        Some(0),
    );
    b.numa_node(
        1,
        CpuSet::range(56, 111).union(&CpuSet::range(168, 223)),
        Some(mem),
        vec![21, 10],
        Some(1),
    );
    for (i, &(gbus, nbus, mlx)) in PAIRS.iter().enumerate() {
        let numa = Some(u32::from(i >= 4));
        let ports = switch_under_own_root(&mut b, nbus - 3, numa, &[nbus, gbus], GEN5_X16);
        let gpu_pci = b.endpoint(
            ports.downstream[1],
            bdf0(gbus, 0, 0),
            vendor::NVIDIA,
            0x2330,
            class::DISPLAY_3D,
            numa,
            GEN5_X16,
        );
        let idx = i as u32;
        let mut g = Gpu::on(gpu_pci, GpuVendor::Nvidia);
        g.model = Some("NVIDIA H100 80GB HBM3".to_string());
        g.memory_mib = Some(81_559);
        g.uuid = Some(modeled_uuid(h100_tag(), idx));
        g.nvidia_minor = Some(idx);
        b.gpu(g);

        let nic_pci = mellanox_fn(
            &mut b,
            ports.downstream[0],
            bdf0(nbus, 0, 0),
            0x1021,
            LinkLayer::InfiniBand,
            numa,
            GEN5_X16,
        );
        let netdev = format!("ibp{}s0", nbus);
        b.nic(rdma_nic(
            nic_pci,
            Some(&netdev),
            mlx,
            LinkLayer::InfiniBand,
            400,
        ));
    }
    all_to_all(&mut b, PAIRS.len(), FabricKind::Nvlink, 18, None);

    // In-band management NIC: its own root complex on socket 0.
    let hb = b.host_bridge(0, 0x27);
    let rp = b.bridge(
        hb,
        bdf0(0x27, 1, 0),
        PciKind::RootPort,
        Some(0),
        (0x29, 0x29),
        GEN5_X16,
    );
    let mgmt = mellanox_fn(
        &mut b,
        rp,
        bdf0(0x29, 0, 0),
        0x1021,
        LinkLayer::Ethernet,
        Some(0),
        GEN5_X16,
    );
    b.nic(rdma_nic(
        mgmt,
        Some("enp41s0f0np0"),
        1,
        LinkLayer::Ethernet,
        100,
    ));
    b.build()
}

/// Tag mixed into the modeled UUIDs of this profile.
const fn h100_tag() -> u32 {
    0x0dc4_0100
}
