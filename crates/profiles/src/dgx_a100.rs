//! `dgx-a100-mig`: an 8x A100-SXM4-40GB machine in the DGX A100 layout, with a MIG
//! geometry on GPUs 0–3 ([`MIG`]).
//!
//! Layout facts from public A100 machines of this shape (an 8x A100-40GB bare-metal
//! shape's NCCL topology file and the DGX A100 documentation): two AMD EPYC sockets in
//! NPS4 mode, so 8 NUMA nodes (0–3 on socket 0, 4–7 on socket 1, distances 10 / 12 / 32);
//! four PCIe switches, each holding two GPUs and two HDR InfiniBand NICs, under NUMA
//! nodes 3, 1, 7 and 5; GPUs at buses `0f 15 | 50 53 | 8c 91 | d6 da`, NICs at
//! `0c 16 | 47 4b | 89 93 | c3 d1`; every GPU pair NV12 through the NVSwitches. NUMA node
//! `n` has CPUs `16n..16n+15` and `128+16n..128+16n+15`. Modeled: one switch level (the
//! NCCL file flattens the switch nesting, so both NICs of a switch are PIX to both of its
//! GPUs), the root bus of each switch three below its lowest device, mlx5 indices in bus
//! order, and no storage or management NICs.

use topoalign_topology::pci::{class, vendor};
use topoalign_topology::{
    CpuSet, FabricKind, Gpu, GpuVendor, LinkLayer, ModelError, Topology, TopologyBuilder,
};

use super::parts::switch_under_own_root;
use super::parts::{GEN4_X16, all_to_all, bdf0, mellanox_fn, modeled_uuid, rdma_nic};
use crate::MigGeometry;

/// (NUMA node, GPU buses, NIC buses) per PCIe switch, in bus order.
const SWITCHES: [(u32, [u8; 2], [u8; 2]); 4] = [
    (3, [0x0f, 0x15], [0x0c, 0x16]),
    (1, [0x50, 0x53], [0x47, 0x4b]),
    (7, [0x8c, 0x91], [0x89, 0x93]),
    (5, [0xd6, 0xda], [0xc3, 0xd1]),
];

/// The MIG geometry: GPU 0 as seven `1g.5gb`, GPU 1 as `4g.20gb` + `3g.20gb`, GPU 2 as
/// `3g.20gb` + `2g.10gb` + `1g.5gb`, GPU 3 as three `2g.10gb` and a `1g.10gb` (the
/// double-memory 1g); GPUs 4–7 whole.
pub(crate) const MIG: MigGeometry = MigGeometry {
    model: "a100-40gb",
    gpus: &[
        (
            0,
            &[
                ("1g.5gb", 0),
                ("1g.5gb", 1),
                ("1g.5gb", 2),
                ("1g.5gb", 3),
                ("1g.5gb", 4),
                ("1g.5gb", 5),
                ("1g.5gb", 6),
            ],
        ),
        (1, &[("4g.20gb", 0), ("3g.20gb", 4)]),
        (2, &[("3g.20gb", 0), ("2g.10gb", 4), ("1g.5gb", 6)]),
        (
            3,
            &[
                ("2g.10gb", 0),
                ("2g.10gb", 2),
                ("2g.10gb", 4),
                ("1g.10gb", 6),
            ],
        ),
    ],
};

pub(crate) fn build() -> Result<Topology, ModelError> {
    let mut b = TopologyBuilder::new("dgx-a100-mig");
    let mem = 131_072_000;
    for n in 0..8u32 {
        let cpus = CpuSet::range(16 * n, 16 * n + 15)
            .union(&CpuSet::range(128 + 16 * n, 128 + 16 * n + 15));
        let distances = (0..8u32)
            .map(|m| match (m == n, m / 4 == n / 4) {
                (true, _) => 10,
                (false, true) => 12,
                (false, false) => 32,
            })
            .collect();
        b.numa_node(n, cpus, Some(mem), distances, Some(n / 4));
    }
    let mut gpu_index = 0u32;
    let mut nic_index = 0u32;
    for (numa, gpus, nics) in SWITCHES {
        let numa = Some(numa);
        let secondaries = [nics[0], gpus[0], gpus[1], nics[1]];
        let ports = switch_under_own_root(&mut b, nics[0] - 3, numa, &secondaries, GEN4_X16);
        for (k, &gbus) in gpus.iter().enumerate() {
            let pci = b.endpoint(
                ports.downstream[k + 1],
                bdf0(gbus, 0, 0),
                vendor::NVIDIA,
                0x20b0,
                class::DISPLAY_3D,
                numa,
                GEN4_X16,
            );
            let mut g = Gpu::on(pci, GpuVendor::Nvidia);
            g.model = Some("NVIDIA A100-SXM4-40GB".to_string());
            g.memory_mib = Some(40_960);
            g.uuid = Some(modeled_uuid(0x0dc4_a100, gpu_index));
            g.nvidia_minor = Some(gpu_index);
            b.gpu(g);
            gpu_index += 1;
        }
        for (port, nbus) in [(0, nics[0]), (3, nics[1])] {
            let pci = mellanox_fn(
                &mut b,
                ports.downstream[port],
                bdf0(nbus, 0, 0),
                0x101b,
                LinkLayer::InfiniBand,
                numa,
                GEN4_X16,
            );
            let netdev = format!("ibp{nbus}s0");
            b.nic(rdma_nic(
                pci,
                Some(&netdev),
                nic_index,
                LinkLayer::InfiniBand,
                200,
            ));
            nic_index += 1;
        }
    }
    all_to_all(&mut b, 8, FabricKind::Nvlink, 12, None);
    b.build()
}
