//! End-to-end tests of the amd-smi / rocm-smi and NCCL XML parsers.

use std::path::Path;

use topoalign_discover::{AmdFormat, detect_amd_format};
use topoalign_discover::{DiscoverError, Source, load};
use topoalign_discover::{parse_amd_smi, parse_nccl_xml};
use topoalign_topology::{FabricKind, PairClass, PcieClass};

use crate::common::fixture;

fn text(name: &str) -> String {
    std::fs::read_to_string(fixture(name)).unwrap()
}

#[test]
fn amd_smi_mi300x_all_to_all_xgmi() {
    assert_eq!(
        detect_amd_format(&text("amdsmi_mi300x.txt")),
        vec![AmdFormat::AmdSmi]
    );
    let d = load(&Source::AmdSmi(fixture("amdsmi_mi300x.txt"))).unwrap();
    let t = &d.topology;
    assert_eq!(t.gpus.len(), 8);
    assert_eq!(t.gpu_bdf(4).to_string(), "0000:8b:00.0");
    assert_eq!(t.gpu_links.len(), 28);
    assert!(t.gpu_links.iter().all(|l| l.kind == FabricKind::Xgmi
        && l.count == 1
        && l.weight == Some(15)
        && l.hops == Some(1)));
    assert_eq!(t.classifier().gpu_gpu(0, 7), PairClass::Xgmi(1));
    // amd-smi prints no NUMA node: unknown, never guessed (issue 14).
    assert!(t.numa.is_empty());
    assert!(
        t.gpus
            .iter()
            .all(|g| t.classifier().numa_of(g.pci).is_none())
    );
    assert!(
        d.warnings
            .iter()
            .any(|w| w.contains("NUMA nodes are unknown") && w.contains("--showtoponuma"))
    );
}

#[test]
fn rocm_smi_pcie_box_numa_nodes() {
    assert_eq!(
        detect_amd_format(&text("rocmsmi_4gpu_pcie.txt")),
        vec![AmdFormat::RocmSmi]
    );
    let d = load(&Source::AmdSmi(fixture("rocmsmi_4gpu_pcie.txt"))).unwrap();
    let t = &d.topology;
    assert_eq!(t.gpus.len(), 4);
    assert!(t.gpu_links.is_empty());
    assert_eq!(t.numa.len(), 2);
    let c = t.classifier();
    assert_eq!(c.numa_of(t.gpus[1].pci), Some(0));
    assert_eq!(c.numa_of(t.gpus[2].pci), Some(1));
    assert_eq!(c.gpu_gpu(0, 1), PairClass::Pcie(PcieClass::Node));
    assert_eq!(c.gpu_gpu(1, 2), PairClass::Pcie(PcieClass::Sys));
    assert!(d.warnings.is_empty(), "{:?}", d.warnings);
}

#[test]
fn amd_errors_name_the_line() {
    let t = text("amdsmi_mi300x.txt");
    let bad = t.replacen("15           15", "15", 1);
    let msg = parse_amd_smi(&bad, Path::new("a.txt"), "a")
        .unwrap_err()
        .to_string();
    assert!(
        msg.contains("a.txt:") && msg.contains("cells but the header") && msg.contains("wrapped"),
        "{msg}"
    );
    let bad = t.replacen("0            15", "0            x5", 1);
    let msg = parse_amd_smi(&bad, Path::new("a.txt"), "a")
        .unwrap_err()
        .to_string();
    assert!(msg.contains("`x5` is not a number"), "{msg}");
    let msg = parse_amd_smi("nothing here", Path::new("a.txt"), "a")
        .unwrap_err()
        .to_string();
    assert!(
        msg.contains("no amd-smi or rocm-smi topology found"),
        "{msg}"
    );
}

#[test]
fn nccl_azure_ndv5_gpu_and_its_nic_are_pix() {
    let d = load(&Source::NcclXml(fixture("nccl_ndv5.xml"))).unwrap();
    let t = &d.topology;
    assert_eq!(t.gpus.len(), 8);
    assert_eq!(t.nics.len(), 8);
    assert_eq!(t.gpu_bdf(0).to_string(), "0001:00:00.0");
    assert_eq!(t.nic_bdf(7).to_string(), "0108:00:00.0");
    let c = t.classifier();
    crate::common::assert_one_nic_per_gpu_two_sockets(t);
    assert!(c.gpu_nic(3, 3).gdr);
    assert_eq!(t.numa.len(), 2);
    assert_eq!(t.numa[0].cpus.to_string(), "0-47");
    assert_eq!(t.numa[1].cpus.to_string(), "48-95");
    let link = t.pci[t.gpus[0].pci].link.unwrap();
    assert_eq!((link.speed_dgts, link.width), (320, 16));
}

#[test]
fn nccl_dump_nvswitch_links_nested_switches_and_nets() {
    let d = load(&Source::NcclXml(fixture("nccl_dgx_dump.xml"))).unwrap();
    let t = &d.topology;
    assert_eq!(t.gpus.len(), 2);
    // 6 NVSwitches x 2 links each: NV12 as nvidia-smi shows on a DGX A100.
    assert_eq!(t.classifier().gpu_gpu(0, 1), PairClass::NvLink(12));
    // Three NICs: two functions of one card, and eth0 with no PCI location.
    assert_eq!(t.nics.len(), 3);
    let names: Vec<_> = t
        .nics
        .iter()
        .map(|n| n.label().unwrap().to_string())
        .collect();
    assert!(names.contains(&"mlx5_0".to_string()) && names.contains(&"mlx5_1".to_string()));
    let eth = t
        .nics
        .iter()
        .find(|n| n.netdev.as_deref() == Some("eth0"))
        .unwrap();
    assert!(t.pci[eth.pci].bdf.domain >= 0xfff0);
    let mlx0 = t
        .nics
        .iter()
        .position(|n| n.rdma.as_deref() == Some("mlx5_0"))
        .unwrap();
    let mlx1 = t
        .nics
        .iter()
        .position(|n| n.rdma.as_deref() == Some("mlx5_1"))
        .unwrap();
    assert_eq!(t.nic_bdf(mlx1).to_string(), "0000:06:00.1");
    let c = t.classifier();
    // GPU under the lower switch, NIC under another switch of the same top switch.
    assert_eq!(c.gpu_nic(0, mlx0).class, PcieClass::Pxb);
    assert_eq!(c.nic_nic(mlx0, mlx1), PairClass::Pcie(PcieClass::Pix));
    assert!(d.warnings.iter().any(|w| w.contains("no PCI location")));
}

#[test]
fn nccl_errors_name_the_line() {
    let err = parse_nccl_xml(
        "<system><cpu numaid=\"0\">\n<pci busid=\"zz\"/></cpu></system>",
        Path::new("x.xml"),
        "x",
    )
    .unwrap_err();
    assert!(
        matches!(err, DiscoverError::Malformed { line: 2, .. }),
        "{err}"
    );
    let err = parse_nccl_xml("<system>\n<cpu>", Path::new("x.xml"), "x").unwrap_err();
    assert!(err.to_string().contains("not well-formed"), "{err}");
    let err = parse_nccl_xml("<topo/>", Path::new("x.xml"), "x").unwrap_err();
    assert!(err.to_string().contains("expected <system>"), "{err}");
    let dup = "<system><cpu numaid=\"0\">\n<pci busid=\"0000:01:00.0\" class=\"0x030200\"/>\n<pci busid=\"0000:01:00.0\" class=\"0x030200\"/></cpu></system>";
    let err = parse_nccl_xml(dup, Path::new("x.xml"), "x").unwrap_err();
    assert!(
        err.to_string()
            .contains("x.xml:3: busid 0000:01:00.0 already appears on line 2"),
        "{err}"
    );
}
