//! Byte-level fuzzing of every reader of outside input this crate owns: the
//! `nvidia-smi topo -m` parser (and the NVLink merge), the amd-smi / rocm-smi parser (all
//! text and JSON layouts), the NCCL topology XML parser, the neighbour readers
//! (`lldpctl -f json`, `ibnetdiscover`), and the sysfs file readers.
//!
//! Each harness feeds bytes through [`decode_paste`] (so the UTF-16 and BOM paths are fuzzed
//! too): half of the inputs are arbitrary bytes, half are real captures with random byte
//! edits (insertions, deletions, replacements, truncation), which reach deep into the
//! parsers. An error is fine; a panic fails the test with the shrunk input.
//!
//! The suite runs `FUZZ_DEFAULT_CASES` inputs per parser. For a long run set
//! `PROPTEST_CASES`, e.g. `PROPTEST_CASES=1000000 cargo test --release -p
//! topoalign-discover --test fuzz_parsers -- --nocapture`; each harness prints how many
//! inputs it ran.

use std::path::Path;

use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};
use topoalign_discover::apply_nvlink_text;
use topoalign_discover::decode_paste;
use topoalign_discover::sysfs::{config, fsread, gpu, kfd, nic, nvml, pci};
use topoalign_discover::{Discovery, write_tree};
use topoalign_discover::{apply_nvlink_file, parse_amd_smi, parse_nccl_xml, parse_nvidia_smi};
use topoalign_topology::{Bdf, CpuSet};

/// Inputs per parser in the normal suite.
const FUZZ_DEFAULT_CASES: u32 = 3000;

const NVSMI: &[&str] = &[
    include_str!("../fixtures/nvsmi_gb300.txt"),
    include_str!("../fixtures/nvsmi_dgx_h100_old.txt"),
    include_str!("../fixtures/nvsmi_pcie8_ansi.txt"),
];
const AMD: &[&str] = &[
    include_str!("../fixtures/amdsmi_mi300x.txt"),
    include_str!("../fixtures/rocmsmi_4gpu_pcie.txt"),
    include_str!("../fixtures/amd/amdsmi_topology_json_610_2gpu.json"),
    include_str!("../fixtures/amd/amdsmi_topology_json_611_at_2gpu.json"),
    include_str!("../fixtures/amd/amdsmi_topology_mi300_8gpu.txt"),
    include_str!("../fixtures/amd/amdsmi_topology_rx7900xtx_2gpu_legend.txt"),
    include_str!("../fixtures/amd/rocm_smi_showtopo_mi100_4gpu.txt"),
    include_str!("../fixtures/amd/rocm_smi_showtopo_mi210_4gpu.txt"),
    include_str!("../fixtures/amd/rocm_smi_showtoponuma_8gpu.txt"),
    include_str!("../fixtures/amd/rocm_smi_showtopotype_mi100_2gpu.txt"),
];
const NCCL: &[&str] = &[
    include_str!("../fixtures/nccl_ndv5.xml"),
    include_str!("../fixtures/nccl_dgx_dump.xml"),
];
const LLDP: &[&str] = &[
    include_str!("../../../../deploy/gang/lldp-mi300x.json"),
    r#"{"lldp": [{"interface": [{"name": "eth0", "chassis": [{"id": [{"type": "mac", "value": "00:00:00:00:00:02"}], "name": [{"value": "ns-2"}]}], "port": [{"id": [{"type": "mac", "value": "00:00:00:00:00:02"}], "descr": [{"value": "eth1"}]}]}]}]}"#,
];
const IBNETDISCOVER: &[&str] = &[
    "#\n# Topology file: generated on Fri Nov 27 12:00:00 2026\n#\n\
vendid=0x2c9\ndevid=0xd2f0\nswitchguid=0x7cfe900300a5a2c0(7cfe900300a5a2c0)\n\
Switch\t64 \"S-7cfe900300a5a2c0\"\t\t# \"MF0;leaf-r0:MQM9700/U1\" enhanced port 0 lid 1 lmc 0\n\
[17]\t\"H-0c42a10300634a2e\"[1](c42a10300634a2e) \t\t# \"gpu-1 mlx5_0\" lid 4 4xNDR\n\n\
caguid=0xc42a10300634a2e\nCa\t1 \"H-0c42a10300634a2e\"\t\t# \"gpu-1 mlx5_0\"\n\
[1](c42a10300634a2e) \t\"S-7cfe900300a5a2c0\"[17]\t\t# lid 4 lmc 0 \"MF0;leaf-r0:MQM9700/U1\" lid 1 4xNDR\n",
];
/// Real sysfs file contents the readers see.
const SYSFS: &[&str] = &[
    "cpu_cores_count 0\nsimd_count 304\nlocation_id 3072\ndomain 0\ndrm_render_minor 128\n",
    "type 11\nnode_from 2\nnode_to 3\nweight 15\nmin_bandwidth 50000\n",
    "Model: \t\t NVIDIA H100 80GB HBM3\nIRQ:   \t\t 1\nGPU UUID: \t GPU-1\nBus Location: \t 0000:1b:00.0\nDevice Minor: \t 0\n",
    "400 Gb/sec (4X NDR)",
    "32.0 GT/s PCIe",
    "0x030200",
    "0-23,96-119",
    "pci.bus_id, memory.total [MiB]\n00000000:1B:00.0, 81559 MiB\n",
];

fn cases() -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(FUZZ_DEFAULT_CASES)
}

/// Arbitrary bytes, or a capture with up to 8 random edits.
fn input(captures: &'static [&'static str]) -> impl Strategy<Value = Vec<u8>> {
    let edit = (any::<prop::sample::Index>(), 0u8..4, any::<u8>());
    prop_oneof![
        proptest::collection::vec(any::<u8>(), 0..1536),
        (
            0..captures.len(),
            proptest::collection::vec(edit, 0..8),
            any::<prop::sample::Index>()
        )
            .prop_map(move |(which, edits, cut)| {
                let mut b = captures[which].as_bytes().to_vec();
                for (at, op, byte) in edits {
                    let i = at.index(b.len() + 1);
                    match op {
                        0 => b.insert(i, byte),
                        1 if i < b.len() => {
                            b.remove(i);
                        }
                        2 if i < b.len() => b[i] = byte,
                        _ => b.insert(i, b'\n'),
                    }
                }
                // One in four inputs is cut short as well.
                if cut.index(4) == 0 {
                    let at = cut.index(b.len() + 1);
                    b.truncate(at);
                }
                b
            }),
    ]
}

/// Runs `body` on `cases()` inputs; returns how many ran (a panic fails the test).
fn fuzz(name: &str, captures: &'static [&'static str], body: impl Fn(&[u8])) -> u32 {
    let mut runner = TestRunner::new(Config {
        cases: cases(),
        failure_persistence: None,
        ..Config::default()
    });
    let count = std::cell::Cell::new(0u32);
    runner
        .run(&input(captures), |bytes| {
            body(&bytes);
            count.set(count.get() + 1);
            Ok(())
        })
        .unwrap_or_else(|e| panic!("{name}: {e}"));
    println!("{name}: {} inputs, 0 panics", count.get());
    count.get()
}

#[test]
fn nvidia_smi_parser_never_panics() {
    let base = Discovery::clean(topoalign_profiles::get("dgx-h100").unwrap());
    let n = fuzz("nvidia-smi topo -m", NVSMI, |bytes| {
        let text = decode_paste(bytes);
        let p = Path::new("fuzz");
        if let Ok(t) = parse_nvidia_smi(&text, p) {
            let _ = t.to_topology("fuzz", p);
        }
        let mut d = base.clone();
        let _ = apply_nvlink_text(&mut d, &text, p);
    });
    assert!(n >= cases().min(FUZZ_DEFAULT_CASES));
}

#[test]
fn amd_parser_never_panics() {
    fuzz("amd-smi/rocm-smi", AMD, |bytes| {
        let _ = parse_amd_smi(&decode_paste(bytes), Path::new("fuzz"), "fuzz");
    });
}

#[test]
fn nccl_xml_parser_never_panics() {
    fuzz("NCCL XML", NCCL, |bytes| {
        let _ = parse_nccl_xml(&decode_paste(bytes), Path::new("fuzz"), "fuzz");
    });
}

#[test]
fn neighbour_readers_never_panic() {
    use topoalign_discover::neighbours::{parse_ibnetdiscover, parse_lldpctl_json};
    fuzz("lldpctl -f json", LLDP, |bytes| {
        let _ = parse_lldpctl_json(&decode_paste(bytes), Path::new("fuzz"));
    });
    fuzz("ibnetdiscover", IBNETDISCOVER, |bytes| {
        let _ = parse_ibnetdiscover(&decode_paste(bytes), Path::new("fuzz"));
    });
}

#[test]
fn sysfs_file_readers_never_panic() {
    let dgx = topoalign_profiles::get("dgx-h100").unwrap();
    fuzz("sysfs files", SYSFS, |bytes| {
        let text = decode_paste(bytes);
        let mut t = dgx.clone();
        let _ = nvml::apply_memory_csv(&mut t, &text, Path::new("fuzz"));
        let props = kfd::parse_properties(&text);
        let _ = kfd::bdf_of(&props);
        let _ = gpu::parse_nvidia_information(&text);
        let _ = nic::parse_rate(&text);
        let _ = pci::parse_link_speed(&text);
        let _ = fsread::parse_hex(&text);
        let _ = fsread::numbered(&text, "node");
        let _ = config::port_kind_from_config(bytes);
        let _ = text.trim().parse::<CpuSet>();
        let _ = text.trim().parse::<Bdf>();
    });
}

/// Puts a file's original bytes back when dropped, so the next input starts from the
/// real tree even when the walker panicked (proptest then shrinks on the same tree).
struct Restore<'a>(&'a Path, Vec<u8>);

impl Drop for Restore<'_> {
    fn drop(&mut self) {
        std::fs::write(self.0, &self.1).unwrap();
    }
}

/// Every regular file under `root`, sorted.
fn files_under(root: &Path) -> Vec<std::path::PathBuf> {
    let mut files = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let e = e.unwrap();
            let ft = e.file_type().unwrap();
            if ft.is_dir() {
                stack.push(e.path());
            } else if ft.is_file() {
                files.push(e.path());
            }
        }
    }
    files.sort();
    files
}

/// Any sysfs file of a real tree replaced by arbitrary bytes: the walker reports it (a
/// warning or an error), never panics; the same bytes as an `--nvlink-from` file too.
/// The trees are written once; each input corrupts one file, walks the tree and puts
/// the file back. The suite runs a dozen inputs (`FUZZ_TREE_CASES` to change; a
/// long run: `FUZZ_TREE_CASES=1000000`, in release mode).
#[test]
fn a_corrupted_sysfs_file_never_panics_the_walker() {
    let cases = std::env::var("FUZZ_TREE_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(12);
    // In memory where there is a tmpfs: each input rewrites files, and on a disk
    // filesystem a truncate-and-rewrite can wait for the data to reach the disk.
    let shm = Path::new("/dev/shm");
    let dir = if shm.is_dir() {
        tempfile::tempdir_in(shm).unwrap_or_else(|_| tempfile::tempdir().unwrap())
    } else {
        tempfile::tempdir().unwrap()
    };
    let trees: Vec<(std::path::PathBuf, Vec<std::path::PathBuf>)> = ["gb300-4", "pcie-2socket"]
        .iter()
        .map(|profile| {
            let root = dir.path().join(profile);
            write_tree(&topoalign_profiles::get(profile).unwrap(), &root).unwrap();
            let files = files_under(&root);
            (root, files)
        })
        .collect();
    let mut runner = TestRunner::new(Config {
        cases,
        failure_persistence: None,
        ..Config::default()
    });
    let strategy = (
        0..trees.len(),
        any::<prop::sample::Index>(),
        proptest::collection::vec(any::<u8>(), 0..256),
    );
    let count = std::cell::Cell::new(0u32);
    runner
        .run(&strategy, |(tree, which, bytes)| {
            let (root, files) = &trees[tree];
            let victim = &files[which.index(files.len())];
            let _restore = Restore(victim, std::fs::read(victim).unwrap());
            std::fs::write(victim, &bytes).unwrap();
            if let Ok(mut d) = topoalign_discover::sysfs::discover(root) {
                let nv = dir.path().join("nvlink.txt");
                std::fs::write(&nv, &bytes).unwrap();
                let _ = apply_nvlink_file(&mut d, &nv);
            }
            count.set(count.get() + 1);
            Ok(())
        })
        .unwrap_or_else(|e| panic!("sysfs walker: {e}"));
    println!("sysfs tree walker: {} inputs, 0 panics", count.get());
}
