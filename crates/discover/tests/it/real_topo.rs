//! Reads every real vendor NCCL/RCCL topology file of `../shared/real-topo` (relative to
//! the workspace root) when that folder is present; skips, saying why, when it is not.
//! The files are not in this repository (their licences differ): see that folder's
//! README. Every file must be read without rejection and keep the model's invariants;
//! the eleven files the README lists are also checked against what their tree implies
//! (GPU/NIC counts, NUMA ids, fabric, the class from each NIC to its nearest GPU).

use std::path::{Path, PathBuf};

use topoalign_discover::{Source, load};
use topoalign_topology::{FabricKind, FabricStatus, PairClass, PcieClass, Topology};

/// What a file's GPU fabric is.
#[derive(Debug, Clone, Copy)]
enum Fabric {
    /// Bare GPU leaves: the file says nothing about NVLink/xGMI.
    Unknown,
    /// Known, no links.
    None,
    /// Every GPU pair NVLink-linked with this count (NVSwitch).
    NvAll(u32),
    /// Every GPU pair xGMI-linked with this count.
    XgmiAll(u32),
    /// MI250X: some pairs xGMI (GCD pairs with 4 links), others PCIe only.
    XgmiPartial,
}

/// What one of the README's files must read as.
struct Expect {
    file: &'static str,
    gpus: usize,
    /// NIC functions (one per `<net>`; a NIC listed by class only is one).
    nics: usize,
    /// Distinct PCI cards (functions of one device counted once).
    cards: usize,
    numa: &'static [u32],
    fabric: Fabric,
    /// How many NICs count as RDMA NICs (matrix columns, `plan --require-rdma`).
    rdma: usize,
    /// The class from every NIC to its nearest GPU.
    nearest: PcieClass,
}

const EXPECT: &[Expect] = &[
    Expect {
        file: "aws-p4d-a100.xml",
        gpus: 8,
        nics: 4,
        cards: 4,
        numa: &[0, 1],
        fabric: Fabric::Unknown,
        rdma: 4,
        nearest: PcieClass::Pix,
    },
    Expect {
        file: "azure-ncv4-a100pcie.xml",
        gpus: 4,
        nics: 1,
        cards: 1,
        numa: &[0, 1, 2, 3],
        fabric: Fabric::None,
        rdma: 0,
        nearest: PcieClass::Node,
    },
    Expect {
        file: "azure-ndv2-v100.xml",
        gpus: 8,
        nics: 1,
        cards: 1,
        numa: &[0, 1],
        fabric: Fabric::Unknown,
        rdma: 1,
        nearest: PcieClass::Node,
    },
    Expect {
        file: "azure-ndv4-a100.xml",
        gpus: 8,
        nics: 8,
        cards: 8,
        numa: &[0, 1, 2, 3],
        fabric: Fabric::Unknown,
        rdma: 8,
        nearest: PcieClass::Pix,
    },
    Expect {
        file: "azure-ndv5-h100.xml",
        gpus: 8,
        nics: 8,
        cards: 8,
        numa: &[0, 1],
        fabric: Fabric::Unknown,
        rdma: 8,
        nearest: PcieClass::Pix,
    },
    Expect {
        file: "ibm-gx3d-h100-vsi.xml",
        gpus: 8,
        nics: 8,
        cards: 8,
        numa: &[0, 1],
        fabric: Fabric::NvAll(18),
        rdma: 8,
        nearest: PcieClass::Pix,
    },
    Expect {
        file: "oci-bm-gpu-b4-8-a100.xml",
        gpus: 8,
        nics: 8,
        cards: 8,
        numa: &[1, 3, 5, 7],
        fabric: Fabric::Unknown,
        rdma: 8,
        nearest: PcieClass::Pix,
    },
    Expect {
        file: "oci-bm-gpu-h100-8.xml",
        gpus: 8,
        nics: 16,
        cards: 8,
        numa: &[0, 1],
        fabric: Fabric::NvAll(18),
        rdma: 16,
        nearest: PcieClass::Pxb,
    },
    Expect {
        file: "rccl-mi250x-16gcd.xml",
        gpus: 16,
        nics: 8,
        cards: 8,
        numa: &[0, 1, 2, 3],
        fabric: Fabric::XgmiPartial,
        rdma: 8,
        nearest: PcieClass::Pxb,
    },
    Expect {
        file: "rccl-mi300x-8.xml",
        gpus: 8,
        nics: 8,
        cards: 8,
        numa: &[0, 1],
        fabric: Fabric::XgmiAll(1),
        rdma: 8,
        nearest: PcieClass::Pxb,
    },
    Expect {
        file: "rccl-mi300x-8-vm.xml",
        gpus: 8,
        nics: 8,
        cards: 8,
        numa: &[0, 1],
        fabric: Fabric::XgmiAll(1),
        rdma: 8,
        nearest: PcieClass::Node,
    },
];

/// `../shared/real-topo` from the workspace root (this crate is `crates/discover`).
fn real_topo_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/real-topo")
}

fn xml_files(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "xml"))
        .collect();
    files.sort();
    files
}

/// Checks that hold for any file, listed or not: what the text says is in the model.
fn check_any(path: &Path, t: &Topology) {
    let name = path.display();
    let text = std::fs::read_to_string(path).unwrap();
    t.validate().unwrap();
    assert!(!t.gpus.is_empty(), "{name}: no GPU read");
    let has = |k: FabricKind| t.gpu_links.iter().any(|l| l.kind == k);
    if text.contains("<xgmi") {
        assert!(
            has(FabricKind::Xgmi),
            "{name}: <xgmi> in the file, no xGMI link read"
        );
    }
    let nvswitch = text.contains("fffffff:") || text.contains("tclass=\"0x068000\"");
    if text.contains("<nvlink") && nvswitch && t.gpus.len() > 1 {
        assert!(
            has(FabricKind::Nvlink),
            "{name}: NVSwitch links in the file, none read"
        );
    }
    if text.contains("class=\"0x0207") {
        assert!(
            t.nics.iter().any(|n| n.is_rdma()),
            "{name}: InfiniBand NICs in the file, no RDMA NIC read"
        );
    }
}

fn check_listed(e: &Expect, t: &Topology) {
    let f = e.file;
    assert_eq!(t.gpus.len(), e.gpus, "{f}: GPUs");
    assert_eq!(t.nics.len(), e.nics, "{f}: NIC functions");
    let mut cards: Vec<_> = (0..t.nics.len())
        .map(|i| {
            let b = t.nic_bdf(i);
            (b.domain, b.bus, b.device)
        })
        .collect();
    cards.dedup();
    assert_eq!(cards.len(), e.cards, "{f}: NIC cards");
    let numa: Vec<u32> = t.numa.iter().map(|n| n.id).collect();
    assert_eq!(numa, e.numa, "{f}: NUMA ids");
    assert_eq!(
        t.nics.iter().filter(|n| n.is_rdma()).count(),
        e.rdma,
        "{f}: RDMA NICs"
    );
    let c = t.classifier();
    let g = t.gpus.len();
    let pairs = || (0..g).flat_map(|a| (a + 1..g).map(move |b| (a, b)));
    match e.fabric {
        Fabric::Unknown => assert_eq!(t.fabric_status(), FabricStatus::Unknown, "{f}"),
        Fabric::None => assert_eq!(t.fabric_status(), FabricStatus::None, "{f}"),
        Fabric::NvAll(n) => {
            for (a, b) in pairs() {
                assert_eq!(c.gpu_gpu(a, b), PairClass::NvLink(n), "{f}: GPU{a} GPU{b}");
            }
        }
        Fabric::XgmiAll(n) => {
            for (a, b) in pairs() {
                assert_eq!(c.gpu_gpu(a, b), PairClass::Xgmi(n), "{f}: GPU{a} GPU{b}");
            }
        }
        Fabric::XgmiPartial => {
            let xgmi = pairs()
                .filter(|&(a, b)| matches!(c.gpu_gpu(a, b), PairClass::Xgmi(_)))
                .count();
            assert!(xgmi > 0 && xgmi < g * (g - 1) / 2, "{f}: {xgmi} xGMI pairs");
        }
    }
    for n in 0..t.nics.len() {
        let best = (0..g).map(|gi| c.gpu_nic(gi, n).class).min().unwrap();
        assert_eq!(
            best,
            e.nearest,
            "{f}: NIC {} to its nearest GPU",
            t.nic_bdf(n)
        );
    }
}

#[test]
fn every_real_topology_file_is_read_right() {
    let dir = real_topo_dir();
    if !dir.is_dir() {
        println!(
            "skipped: {} is absent (the shared real topology files are not in this repository)",
            dir.display()
        );
        return;
    }
    let files = xml_files(&dir);
    assert!(!files.is_empty(), "{}: no .xml file", dir.display());
    let mut listed = 0;
    for path in &files {
        let d = match load(&Source::NcclXml(path.clone())) {
            Ok(d) => d,
            Err(e) => panic!("{} is rejected: {e}", path.display()),
        };
        let t = &d.topology;
        check_any(path, t);
        let name = path.file_name().unwrap().to_string_lossy();
        if let Some(e) = EXPECT.iter().find(|e| e.file == name) {
            check_listed(e, t);
            listed += 1;
        }
        println!(
            "{name}: {} GPUs, {} NICs, fabric {:?}, {} warnings",
            t.gpus.len(),
            t.nics.len(),
            t.fabric_status(),
            d.warnings.len()
        );
    }
    let present = EXPECT.iter().filter(|e| dir.join(e.file).is_file()).count();
    assert_eq!(listed, present);
}

/// Spot checks of single pairs, read by hand from the files' trees.
#[test]
fn real_topology_spot_checks() {
    let dir = real_topo_dir();
    if !dir.is_dir() {
        println!("skipped: {} is absent", dir.display());
        return;
    }
    let read = |f: &str| -> Option<Topology> {
        let p = dir.join(f);
        p.is_file()
            .then(|| load(&Source::NcclXml(p)).unwrap().topology)
    };
    let nic = |t: &Topology, b: &str| t.nic_index(b.parse().unwrap()).unwrap();
    let gpu = |t: &Topology, b: &str| t.gpu_index(b.parse().unwrap()).unwrap();
    if let Some(t) = read("oci-bm-gpu-h100-8.xml") {
        // GPU 0f below 08→0d, mlx5_0/1 below 08→0a: PXB; NIC of the other socket: SYS.
        let c = t.classifier();
        let g = gpu(&t, "0000:0f:00.0");
        assert_eq!(c.gpu_nic(g, nic(&t, "0000:0c:00.0")).class, PcieClass::Pxb);
        assert_eq!(c.gpu_nic(g, nic(&t, "0000:0c:00.1")).class, PcieClass::Pxb);
        assert_eq!(c.gpu_nic(g, nic(&t, "0000:2a:00.0")).class, PcieClass::Node);
        assert_eq!(c.gpu_nic(g, nic(&t, "0000:86:00.0")).class, PcieClass::Sys);
    }
    if let Some(t) = read("aws-p4d-a100.xml") {
        // GPUs 10:1c and 10:1d share placeholder switch 1 with EFA 10:1b.
        let c = t.classifier();
        let efa = nic(&t, "0000:10:1b.0");
        assert_eq!(
            c.gpu_nic(gpu(&t, "0000:10:1d.0"), efa).class,
            PcieClass::Pix
        );
        assert_eq!(
            c.gpu_nic(gpu(&t, "0000:20:1c.0"), efa).class,
            PcieClass::Node
        );
        assert_eq!(
            c.gpu_nic(gpu(&t, "0000:90:1c.0"), efa).class,
            PcieClass::Sys
        );
    }
    if let Some(t) = read("rccl-mi250x-16gcd.xml") {
        // The two GCDs of one MI250X (4e, 51): 4 xGMI links; 4e-56: 1 link; 4e-59: none.
        let c = t.classifier();
        let (a, b) = (gpu(&t, "0000:4e:00.0"), gpu(&t, "0000:51:00.0"));
        assert_eq!(c.gpu_gpu(a, b), PairClass::Xgmi(4));
        assert_eq!(c.gpu_gpu(a, gpu(&t, "0000:56:00.0")), PairClass::Xgmi(1));
        assert_eq!(c.gpu_gpu(a, gpu(&t, "0000:0e:00.0")), PairClass::Xgmi(2));
        assert!(matches!(
            c.gpu_gpu(a, gpu(&t, "0000:59:00.0")),
            PairClass::Pcie(_)
        ));
    }
    if let Some(t) = read("azure-ncv4-a100pcie.xml") {
        // eth0 has no PCI address and sits on NUMA 0 with GPU 0001: NODE; others SYS.
        let c = t.classifier();
        assert_eq!(c.gpu_nic(gpu(&t, "0001:00:00.0"), 0).class, PcieClass::Node);
        assert_eq!(c.gpu_nic(gpu(&t, "0004:00:00.0"), 0).class, PcieClass::Sys);
    }
    if let Some(t) = read("oci-bm-gpu-b4-8-a100.xml") {
        // NUMA 7 holds GPU 8c under switch 7e with NICs 89 and 93.
        let c = t.classifier();
        let g = gpu(&t, "0000:8c:00.0");
        assert_eq!(c.numa_of(t.gpus[g].pci), Some(7));
        assert_eq!(c.gpu_nic(g, nic(&t, "0000:93:00.0")).class, PcieClass::Pix);
        assert_eq!(c.gpu_nic(g, nic(&t, "0000:c3:00.0")).class, PcieClass::Sys);
    }
}
