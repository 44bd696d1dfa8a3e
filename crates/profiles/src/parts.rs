//! Building blocks shared by the profiles.

use topoalign_topology::pci::{class, vendor};
use topoalign_topology::{
    Bdf, FabricKind, GpuLink, LinkLayer, Nic, PciKind, PciParent, PcieLink, RdmaPort,
    TopologyBuilder,
};

/// PCIe Gen5 x16.
pub(crate) const GEN5_X16: Option<PcieLink> = Some(PcieLink {
    speed_dgts: 320,
    width: 16,
});

/// PCIe Gen4 x16.
pub(crate) const GEN4_X16: Option<PcieLink> = Some(PcieLink {
    speed_dgts: 160,
    width: 16,
});

/// Domain-0 address `0000:BB:DD.F`.
pub(crate) fn bdf0(bus: u8, device: u8, function: u8) -> Bdf {
    Bdf::new(0, bus, device, function)
}

/// The downstream ports of one PCIe switch that hangs, alone, under its own root port
/// and host bridge.
pub(crate) struct SwitchPorts {
    /// Parent handles of the downstream ports, in the order of `secondaries`.
    pub downstream: Vec<PciParent>,
}

/// Builds host bridge `pci0000:RR` → root port `RR:01.0` → switch upstream port
/// `(RR+1):00.0` → downstream ports `(RR+2):0k.0`, the k-th with secondary bus
/// `secondaries[k]`. Bus ranges are consistent (each port's range holds what is below it).
pub(crate) fn switch_under_own_root(
    b: &mut TopologyBuilder,
    root_bus: u8,
    numa: Option<u32>,
    secondaries: &[u8],
    link: Option<PcieLink>,
) -> SwitchPorts {
    let top = secondaries.iter().copied().max().unwrap_or(root_bus + 2);
    let hb = b.host_bridge(0, root_bus);
    let rp = b.bridge(
        hb,
        bdf0(root_bus, 1, 0),
        PciKind::RootPort,
        numa,
        (root_bus + 1, top),
        link,
    );
    let usp = b.bridge(
        rp,
        bdf0(root_bus + 1, 0, 0),
        PciKind::SwitchUpstream,
        numa,
        (root_bus + 2, top),
        link,
    );
    let downstream = secondaries
        .iter()
        .enumerate()
        .map(|(k, &sec)| {
            b.bridge(
                usp,
                // `k` is at most a handful: device numbers stay below 32.
                bdf0(root_bus + 2, (k as u8) & 0x1f, 0),
                PciKind::SwitchDownstream,
                numa,
                (sec, sec),
                link,
            )
        })
        .collect();
    SwitchPorts { downstream }
}

/// A ConnectX-style RDMA NIC record with one port.
pub(crate) fn rdma_nic(
    pci: usize,
    netdev: Option<&str>,
    rdma_index: u32,
    layer: LinkLayer,
    rate_gbps: u32,
) -> Nic {
    let mut n = Nic::on(pci);
    n.netdev = netdev.map(str::to_string);
    n.rdma = Some(format!("mlx5_{rdma_index}"));
    n.uverbs = Some(format!("uverbs{rdma_index}"));
    n.ports = vec![RdmaPort {
        number: 1,
        link_layer: layer,
        umad: Some(format!("umad{rdma_index}")),
        rate_gbps: Some(rate_gbps),
    }];
    if netdev.is_some() {
        n.speed_mbps = Some(u64::from(rate_gbps) * 1000);
    }
    n
}

/// Adds an endpoint that is a Mellanox NIC function.
pub(crate) fn mellanox_fn(
    b: &mut TopologyBuilder,
    parent: PciParent,
    at: Bdf,
    device: u16,
    layer: LinkLayer,
    numa: Option<u32>,
    link: Option<PcieLink>,
) -> usize {
    let cls = match layer {
        LinkLayer::InfiniBand => class::INFINIBAND,
        LinkLayer::Ethernet => class::ETHERNET,
    };
    b.endpoint(parent, at, vendor::MELLANOX, device, cls, numa, link)
}

/// Links every pair of the first `n` GPUs.
pub(crate) fn all_to_all(
    b: &mut TopologyBuilder,
    n: usize,
    kind: FabricKind,
    count: u32,
    weight: Option<u32>,
) {
    for a in 0..n {
        for c in a + 1..n {
            b.link_record(GpuLink {
                a,
                b: c,
                kind,
                count,
                weight,
                hops: weight.map(|_| 1),
            });
        }
    }
}

/// A deterministic NVIDIA-style UUID for a modeled GPU (`GPU-xxxxxxxx-…`).
pub(crate) fn modeled_uuid(profile_tag: u32, index: u32) -> String {
    format!(
        "GPU-{profile_tag:08x}-{:04x}-4{:03x}-8000-{:012x}",
        index,
        index,
        u64::from(profile_tag) * 0x1000 + u64::from(index)
    )
}
