//! The constructs of real vendor NCCL/RCCL topology files, each reproduced by a small
//! fixture of our own under `tests/fixtures/nccl/` (NVSwitch placeholder, xGMI and MI250X
//! GCD pairs, NICs known by PCI class only, placeholder switches, `numaid="-1"`, sparse
//! NUMA ids, multi-port NICs, a socket NIC without PCI address, a bus-id-only file).

use topoalign_discover::{DiscoverError, Source, load};
use topoalign_topology::MatrixOptions;
use topoalign_topology::{
    FabricStatus, GpuVendor, LinkLayer, PairClass, PairMatrix, PciKind, PcieClass, Topology,
};

fn read(name: &str) -> (Topology, Vec<String>) {
    let d = load(&Source::NcclXml(crate::common::fixture(&format!(
        "nccl/{name}"
    ))))
    .unwrap();
    (d.topology, d.warnings)
}

fn nic_of(t: &Topology, bdf: &str) -> usize {
    t.nic_index(bdf.parse().unwrap())
        .unwrap_or_else(|| panic!("no NIC at {bdf}"))
}

fn numa_ids(t: &Topology) -> Vec<u32> {
    t.numa.iter().map(|n| n.id).collect()
}

#[test]
fn nvswitch_placeholder_both_spellings_link_every_gpu_pair() {
    let (t, warnings) = read("gb200_tray_nvswitch_placeholder.xml");
    assert!(warnings.is_empty(), "{warnings:?}");
    assert_eq!((t.gpus.len(), t.nics.len()), (4, 4));
    assert_eq!(numa_ids(&t), [0, 1]);
    let c = t.classifier();
    // Old spelling with old, old with new: NV18; GPU 3 (12 links) caps its pairs at NV12.
    assert_eq!(c.gpu_gpu(0, 1), PairClass::NvLink(18));
    assert_eq!(c.gpu_gpu(1, 2), PairClass::NvLink(18));
    for g in 0..3 {
        assert_eq!(c.gpu_gpu(g, 3), PairClass::NvLink(12));
    }
    assert_eq!(t.fabric_islands(), [vec![0, 1, 2, 3]]);
    assert!(t.gpus.iter().all(|g| g.c2c));
    // Each GPU and its NIC share a switch; the other GPU of the Grace is NODE, the other
    // Grace SYS.
    assert_eq!(
        c.gpu_nic(0, nic_of(&t, "0008:02:00.0")).class,
        PcieClass::Pix
    );
    assert_eq!(
        c.gpu_nic(0, nic_of(&t, "0009:02:00.0")).class,
        PcieClass::Node
    );
    assert_eq!(
        c.gpu_nic(0, nic_of(&t, "0018:02:00.0")).class,
        PcieClass::Sys
    );
    assert_eq!(t.nics[0].link_layer(), Some(LinkLayer::InfiniBand));
    assert_eq!(t.nics[0].ports[0].rate_gbps, Some(400));
}

#[test]
fn numa_minus_one_is_unknown_and_placeholder_without_tclass_is_an_nvswitch() {
    let (t, _) = read("vm_numa_unknown.xml");
    assert_eq!((t.gpus.len(), t.nics.len()), (2, 1));
    assert!(t.numa.is_empty(), "{:?}", t.numa);
    let c = t.classifier();
    assert_eq!(c.numa_of(t.gpus[0].pci), None);
    assert_eq!(c.gpu_gpu(0, 1), PairClass::NvLink(18));
    // Own host bridges, NUMA unknown: SYS, and flagged as uncertain.
    assert_eq!(c.gpu_nic(0, 0).class, PcieClass::Sys);
    assert!(!c.numa_certain(t.gpus[0].pci, t.nics[0].pci));
    let nic = &t.nics[0];
    assert!(nic.is_rdma() && nic.rdma_unnamed && nic.rdma.is_none());
    assert_eq!(nic.link_layer(), Some(LinkLayer::InfiniBand));
}

#[test]
fn mi300x_xgmi_all_to_all() {
    let (t, warnings) = read("mi300x_xgmi.xml");
    assert!(warnings.is_empty(), "{warnings:?}");
    assert_eq!((t.gpus.len(), t.nics.len()), (4, 3));
    assert!(t.gpus.iter().all(|g| g.vendor == GpuVendor::Amd));
    assert_eq!(t.fabric_status(), FabricStatus::Links);
    let c = t.classifier();
    for a in 0..4 {
        for b in a + 1..4 {
            assert_eq!(c.gpu_gpu(a, b), PairClass::Xgmi(1), "GPU{a} GPU{b}");
        }
    }
    // GPU 0 is three bridges below the bridge its NIC hangs from: PXB. GPU 2 and its NIC
    // share one switch: PIX.
    assert_eq!(
        c.gpu_nic(0, nic_of(&t, "0000:07:00.0")).class,
        PcieClass::Pxb
    );
    assert_eq!(
        c.gpu_nic(2, nic_of(&t, "0000:87:00.0")).class,
        PcieClass::Pix
    );
    assert_eq!(
        c.gpu_nic(0, nic_of(&t, "0000:10:00.0")).class,
        PcieClass::Node
    );
    assert_eq!(
        c.gpu_nic(0, nic_of(&t, "0000:87:00.0")).class,
        PcieClass::Sys
    );
}

#[test]
fn mi250x_gcd_pairs_and_partial_xgmi() {
    let (t, warnings) = read("mi250x_gcd_pairs.xml");
    assert!(warnings.is_empty(), "{warnings:?}");
    assert_eq!((t.gpus.len(), t.nics.len()), (4, 2));
    let c = t.classifier();
    // The two GCDs of a package: 4 links (the larger of 4 and 3 for GCDs 2-3).
    assert_eq!(c.gpu_gpu(0, 1), PairClass::Xgmi(4));
    assert_eq!(c.gpu_gpu(2, 3), PairClass::Xgmi(4));
    assert_eq!(c.gpu_gpu(0, 2), PairClass::Xgmi(1));
    assert_eq!(c.gpu_gpu(1, 3), PairClass::Xgmi(2));
    // No xGMI between them: PCIe, across the two sockets.
    assert_eq!(c.gpu_gpu(0, 3), PairClass::Pcie(PcieClass::Sys));
    assert_eq!(c.gpu_gpu(1, 2), PairClass::Pcie(PcieClass::Sys));
    assert_eq!(c.gpu_nic(0, 0).class, PcieClass::Pxb);
}

#[test]
fn class_only_infiniband_under_placeholder_switches() {
    let (t, _) = read("static_class_only_ib.xml");
    assert_eq!((t.gpus.len(), t.nics.len()), (2, 2));
    // Bare GPU leaves say nothing about NVLink: unknown, not "none".
    assert_eq!(t.fabric_status(), FabricStatus::Unknown);
    for n in &t.nics {
        assert!(n.is_rdma() && n.rdma.is_none() && n.netdev.is_none());
        assert_eq!(n.link_layer(), Some(LinkLayer::InfiniBand));
    }
    // The placeholder switch is read as the switch it stands for.
    let sw = t.pci_index("ffff:ff:01.0".parse().unwrap()).unwrap();
    assert_eq!(t.pci[sw].kind, PciKind::SwitchUpstream);
    let c = t.classifier();
    assert_eq!(c.gpu_nic(0, 0).class, PcieClass::Pix);
    assert_eq!(c.gpu_nic(0, 1).class, PcieClass::Sys);
    // RDMA NICs are matrix columns.
    let m = PairMatrix::build(&t, MatrixOptions::default());
    assert_eq!(m.devices.len(), 4);
}

#[test]
fn efa_is_rdma_and_ena_is_not() {
    let (t, _) = read("static_efa.xml");
    assert_eq!((t.gpus.len(), t.nics.len()), (4, 3));
    let efa0 = nic_of(&t, "0000:10:1b.0");
    let efa1 = nic_of(&t, "0000:90:1b.0");
    let ena = nic_of(&t, "0000:90:05.0");
    assert!(t.nics[efa0].is_rdma() && t.nics[efa1].is_rdma());
    assert!(!t.nics[ena].is_rdma());
    // EFA is neither InfiniBand nor RoCE.
    assert_eq!(t.nics[efa0].link_layer(), None);
    let c = t.classifier();
    assert_eq!(c.gpu_nic(0, efa0).class, PcieClass::Pix);
    assert_eq!(c.gpu_nic(1, efa0).class, PcieClass::Pix);
    assert_eq!(c.gpu_nic(0, efa1).class, PcieClass::Sys);
    assert_eq!(c.gpu_gpu(0, 1), PairClass::Pcie(PcieClass::Pix));
    let m = PairMatrix::build(&t, MatrixOptions::default());
    assert_eq!(m.devices.len(), 6, "4 GPUs and the 2 EFAs; not the ENA");
}

/// HPE Slingshot NICs (`cxi0`, Ethernet class) that RCCL marks GPUDirect-capable are RDMA
/// NICs, shown by the default matrix; the management `eth0` (gdr="0") is not.
#[test]
fn slingshot_cxi_nics_marked_gdr_are_rdma_and_shown() {
    let (t, _) = read("rccl_slingshot_cxi.xml");
    assert_eq!((t.gpus.len(), t.nics.len()), (4, 3));
    let cxi0 = nic_of(&t, "0000:c9:00.0");
    let eth0 = nic_of(&t, "0000:21:00.0");
    assert_eq!(t.nics[cxi0].rdma.as_deref(), Some("cxi0"));
    assert!(t.nics[cxi0].is_rdma() && !t.nics[eth0].is_rdma());
    assert_eq!(t.nics[cxi0].link_layer(), Some(LinkLayer::Ethernet));
    let c = t.classifier();
    let gcd0 = t.gpu_index("0000:c1:00.0".parse().unwrap()).unwrap();
    assert_eq!(c.gpu_nic(gcd0, cxi0).class, PcieClass::Pix);
    assert!(c.gpu_nic(gcd0, cxi0).gdr);
    let m = PairMatrix::build(&t, MatrixOptions::default());
    let labels: Vec<&str> = m.devices.iter().map(|d| d.label.as_str()).collect();
    assert_eq!(
        m.devices.len(),
        6,
        "4 GCDs and the 2 cxi NICs, not eth0: {labels:?}"
    );
}

#[test]
fn sparse_numa_ids_and_class_only_ethernet() {
    let (t, _) = read("sparse_numa_ethernet.xml");
    assert_eq!((t.gpus.len(), t.nics.len()), (3, 6));
    assert_eq!(numa_ids(&t), [1, 3, 7]);
    let c = t.classifier();
    let numa: Vec<Option<u32>> = t.gpus.iter().map(|g| c.numa_of(g.pci)).collect();
    assert_eq!(numa, [Some(3), Some(1), Some(7)]);
    assert_eq!(t.numa_node(7).unwrap().cpus.to_string(), "8-11");
    for n in &t.nics {
        assert!(n.is_rdma());
        assert_eq!(n.link_layer(), Some(LinkLayer::Ethernet));
    }
    assert_eq!(
        c.gpu_nic(0, nic_of(&t, "0000:0c:00.0")).class,
        PcieClass::Pix
    );
    assert_eq!(
        c.gpu_nic(0, nic_of(&t, "0000:47:00.0")).class,
        PcieClass::Sys
    );
}

#[test]
fn multiport_nic_socket_nic_and_self_nvlink() {
    let (t, warnings) = read("multiport_socket_nic.xml");
    assert_eq!((t.gpus.len(), t.nics.len()), (2, 3));
    let p0 = nic_of(&t, "0000:0c:00.0");
    let p1 = nic_of(&t, "0000:0c:00.1");
    assert_eq!(t.nics[p0].rdma.as_deref(), Some("mlx5_0"));
    assert_eq!(t.nics[p1].rdma.as_deref(), Some("mlx5_1"));
    assert_eq!(t.nics[p1].ports[0].number, 2);
    assert_eq!(t.nics[p1].link_layer(), Some(LinkLayer::Ethernet));
    assert_eq!(t.nics[p1].ports[0].rate_gbps, Some(180));
    let c = t.classifier();
    assert_eq!(c.nic_nic(p0, p1), PairClass::Pcie(PcieClass::Pix));
    // GPU and NIC below the same top switch, each through its own bridge: PXB.
    assert_eq!(c.gpu_nic(0, p0).class, PcieClass::Pxb);
    let r = c.pcie_route(t.gpus[0].pci, t.nics[p0].pci).unwrap();
    let name = |i: usize| t.pci[i].bdf.to_string();
    assert_eq!(r.common.map(name).as_deref(), Some("0000:08:00.0"));
    assert_eq!(name(r.a_side[0]), "0000:0d:00.0");
    assert_eq!(name(r.b_side[0]), "0000:0a:00.0");
    // The socket NIC: a synthetic address, a netdev, no RDMA.
    let eth = t
        .nics
        .iter()
        .position(|n| n.netdev.as_deref() == Some("eth0"))
        .unwrap();
    assert!(!t.nics[eth].is_rdma());
    assert!(t.nic_bdf(eth).domain >= 0xfff0);
    assert_eq!(c.numa_of(t.nics[eth].pci), Some(1));
    assert!(warnings.iter().any(|w| w.contains("no PCI location")));
    // A GPU naming itself as NVLink target is no link; the fabric is known to be none.
    assert_eq!(t.fabric_status(), FabricStatus::None);
    assert_eq!(c.gpu_gpu(0, 1), PairClass::Pcie(PcieClass::Sys));
}

#[test]
fn busid_only_file_is_refused_with_what_it_is_and_what_to_pass() {
    let err = load(&Source::NcclXml(crate::common::fixture(
        "nccl/busid_only.xml",
    )))
    .unwrap_err();
    assert!(
        matches!(err, DiscoverError::Malformed { line: 5, .. }),
        "{err}"
    );
    let msg = err.to_string();
    for want in [
        "busid_only.xml",
        "<pci busid=\"0000:00:16.0\"> has no class attribute",
        "partial topology file",
        "merge with its own detection",
        "--sysfs-root /",
        "NCCL_TOPO_DUMP_FILE",
    ] {
        assert!(msg.contains(want), "missing {want:?} in: {msg}");
    }
}
