//! End-to-end tests of the `nvidia-smi topo -m` parser and its rebuilt topologies.

use std::path::{Path, PathBuf};

use topoalign_discover::{DiscoverError, Discovery, Source, load};
use topoalign_discover::{apply_nvlink_file, parse_nvidia_smi};
use topoalign_profiles as profiles;
use topoalign_topology::{FabricKind, PairClass, PairMatrix, PcieClass, Topology};
use topoalign_topology::{MatrixDeviceKind, MatrixOptions};

use crate::common::fixture;

/// Prints a matrix the way `nvidia-smi topo -m` does (test helper; the official renderer
/// lives in topoalign-render). `tabs` picks the tool's tab layout or a space-aligned one.
fn render_smi(m: &PairMatrix, tabs: bool) -> String {
    let n = m.devices.len();
    let mut header: Vec<String> = m.devices.iter().map(|d| d.label.clone()).collect();
    header.extend(["CPU Affinity", "NUMA Affinity", "GPU NUMA ID"].map(String::from));
    let mut rows: Vec<Vec<String>> = Vec::new();
    for (r, d) in m.devices.iter().enumerate() {
        let mut row = vec![d.label.clone()];
        row.extend((0..n).map(|c| m.cell(r, c).to_string()));
        if matches!(d.device, MatrixDeviceKind::Gpu(_)) {
            let na = || "N/A".to_string();
            row.push(
                d.cpu_affinity
                    .as_ref()
                    .filter(|c| !c.is_empty())
                    .map_or_else(na, |c| c.to_string()),
            );
            row.push(d.numa_affinity.map_or_else(na, |v| v.to_string()));
            row.push(d.gpu_numa_id.map_or_else(na, |v| v.to_string()));
        }
        rows.push(row);
    }
    let mut out = String::new();
    if tabs {
        out.push('\t');
        out.push_str(&header.join("\t"));
        out.push('\n');
        for row in &rows {
            let cells: Vec<String> = row
                .iter()
                .map(|c| {
                    if c == "X" {
                        " X ".to_string()
                    } else {
                        c.clone()
                    }
                })
                .collect();
            out.push_str(&cells.join("\t"));
            out.push('\n');
        }
    } else {
        let w = 18;
        out.push_str(&" ".repeat(w));
        for h in &header {
            out.push_str(&format!("{h:<w$}"));
        }
        out.push('\n');
        for row in &rows {
            for c in row {
                out.push_str(&format!("{c:<w$}"));
            }
            out.push('\n');
        }
    }
    out.push_str(
        "\nLegend:\n\n  X    = Self\n  PIX  = Connection traversing at most a single PCIe bridge\n",
    );
    let nics: Vec<_> = m.devices.iter().filter(|d| d.name.is_some()).collect();
    if !nics.is_empty() {
        out.push_str("\nNIC Legend:\n\n");
        for d in nics {
            out.push_str(&format!("  {}: {}\n", d.label, d.name.as_deref().unwrap()));
        }
    }
    out
}

fn matrix(t: &Topology) -> PairMatrix {
    PairMatrix::build(t, MatrixOptions::default())
}

fn load_smi(name: &str) -> Discovery {
    load(&Source::NvidiaSmi(fixture(name))).unwrap()
}

#[test]
fn every_profile_round_trips_through_nvidia_smi_text() {
    for name in profiles::NAMES {
        let original = profiles::get(name).unwrap();
        let m = matrix(&original);
        for tabs in [true, false] {
            let text = render_smi(&m, tabs);
            let parsed = parse_nvidia_smi(&text, Path::new("roundtrip"))
                .unwrap_or_else(|e| panic!("{name}: {e}\n{text}"));
            let rebuilt = parsed.to_topology(name, Path::new("roundtrip")).unwrap();
            let back = matrix(&rebuilt.topology);
            assert_eq!(back.devices.len(), m.devices.len(), "{name}");
            for r in 0..m.devices.len() {
                for c in 0..m.devices.len() {
                    assert_eq!(
                        back.cell(r, c),
                        m.cell(r, c),
                        "{name} tabs={tabs}: {} / {}",
                        m.devices[r].label,
                        m.devices[c].label
                    );
                }
                assert_eq!(back.devices[r].name, m.devices[r].name, "{name}");
                assert_eq!(
                    back.devices[r].numa_affinity, m.devices[r].numa_affinity,
                    "{name}"
                );
                assert_eq!(
                    back.devices[r].cpu_affinity, m.devices[r].cpu_affinity,
                    "{name}"
                );
                assert_eq!(
                    back.devices[r].gpu_numa_id, m.devices[r].gpu_numa_id,
                    "{name}"
                );
            }
            // Pairs that agree on the cell agree on NCCL's GDR decision too, except where
            // the original knows a C2C link nvidia-smi does not print.
            assert_eq!(rebuilt.topology.gpus.len(), original.gpus.len());
        }
    }
}

#[test]
fn gb300_seed_table_golden() {
    let d = load_smi("nvsmi_gb300.txt");
    let t = &d.topology;
    assert_eq!(t.gpus.len(), 4);
    assert_eq!(t.nics.len(), 4);
    let names: Vec<_> = t.nics.iter().map(|n| n.rdma.clone().unwrap()).collect();
    assert_eq!(names, ["mlx5_0", "mlx5_1", "mlx5_2", "mlx5_3"]);
    let c = t.classifier();
    assert_eq!(c.gpu_gpu(0, 3), PairClass::NvLink(18));
    assert_eq!(c.gpu_nic(0, 1).class, PcieClass::Node);
    assert_eq!(c.gpu_nic(0, 2).class, PcieClass::Sys);
    assert_eq!(c.gpu_nic(3, 3).class, PcieClass::Node);
    // GPU NUMA ID marks Grace C2C GPUs: NODE is P2C and keeps GDR (seed 001, ~56 GB/s).
    assert!(c.gpu_nic(0, 0).gdr);
    assert!(!c.gpu_nic(0, 2).gdr);
    assert_eq!(t.gpus[1].memory_numa_node, Some(10));
    assert_eq!(t.numa.len(), 2);
    assert_eq!(t.numa[1].cpus.to_string(), "64-127");
    assert_eq!(t.gpu_links.len(), 6);
    assert!(d.warnings.is_empty(), "{:?}", d.warnings);
    // Synthetic addresses follow the documented scheme.
    assert_eq!(t.gpu_bdf(2).to_string(), "fff1:02:00.0");
    assert_eq!(t.nic_bdf(1).to_string(), "fff2:01:00.0");
    assert!(t.pcie_root(t.gpus[0].pci).unwrap().starts_with("pcifff0:"));
}

#[test]
fn dgx_h100_old_driver_headers() {
    let path = fixture("nvsmi_dgx_h100_old.txt");
    let text = std::fs::read_to_string(&path).unwrap();
    let parsed = parse_nvidia_smi(&text, &path).unwrap();
    assert!(parsed.old_legend);
    assert_eq!(parsed.nics[1].label, "mlx5_3");
    assert_eq!(parsed.nics[1].name.as_deref(), Some("mlx5_3"));
    assert_eq!(parsed.numa_affinity, vec![None; 8]);
    assert_eq!(
        parsed.cpu_affinity[5].as_ref().unwrap().to_string(),
        "56-111,168-223"
    );
    let d = parsed.to_topology("dgx", &path).unwrap();
    let t = &d.topology;
    crate::common::assert_one_nic_per_gpu_two_sockets(t);
    assert_eq!(t.nics[7].rdma.as_deref(), Some("mlx5_11"));
    assert_eq!(t.fabric_islands().len(), 1);
    // No NUMA column: ids were synthesised, and said so.
    assert_eq!(t.numa.len(), 2);
    assert_eq!(t.numa[0].cpus.to_string(), "0-55,112-167");
    assert!(d.warnings.iter().any(|w| w.contains("synthetic NUMA")));
}

#[test]
fn pcie_box_with_tabs_and_ansi_header() {
    let d = load_smi("nvsmi_pcie8_ansi.txt");
    let t = &d.topology;
    let c = t.classifier();
    assert_eq!(c.gpu_gpu(0, 1), PairClass::Pcie(PcieClass::Pix));
    assert_eq!(c.gpu_gpu(0, 2), PairClass::Pcie(PcieClass::Pxb));
    assert_eq!(c.gpu_gpu(0, 3), PairClass::Pcie(PcieClass::Phb));
    assert_eq!(c.gpu_gpu(4, 6), PairClass::Pcie(PcieClass::Node));
    assert_eq!(c.gpu_gpu(0, 7), PairClass::Pcie(PcieClass::Sys));
    assert_eq!(c.gpu_nic(2, 0).class, PcieClass::Pxb);
    assert!(c.gpu_nic(2, 0).gdr && !c.gpu_nic(3, 0).gdr);
    assert!(t.gpu_links.is_empty());
    assert!(
        t.gpus
            .iter()
            .all(|g| g.memory_numa_node.is_none() && !g.c2c)
    );
}

/// Eight GeForce GPUs whose every pair nvidia-smi calls SYS, also those of one NUMA
/// affinity: the cells are kept (each pair classifies SYS), and the disagreement with the
/// NUMA column is said, GPU by GPU.
#[test]
fn every_pair_sys_inside_one_numa_node_keeps_the_cells() {
    let d = load_smi("nvsmi_geforce8_sys.txt");
    let t = &d.topology;
    let c = t.classifier();
    for a in 0..8 {
        for b in a + 1..8 {
            assert_eq!(
                c.gpu_gpu(a, b),
                PairClass::Pcie(PcieClass::Sys),
                "GPU{a}/GPU{b}"
            );
        }
    }
    assert_eq!(c.gpu_nic(0, 0).class, PcieClass::Phb);
    assert_eq!(c.gpu_nic(1, 0).class, PcieClass::Sys);
    let disagree: Vec<&String> = (d.warnings.iter())
        .filter(|w| w.contains("both have NUMA affinity"))
        .collect();
    assert_eq!(disagree.len(), 6, "{:?}", d.warnings);
    assert!(
        disagree[0].starts_with(
            "GPU0 and GPU1 both have NUMA affinity 0, but nvidia-smi's cells say SYS between them"
        ),
        "{}",
        disagree[0]
    );
    // GPU0 keeps NUMA node 0 and GPU4 node 1 with their CPUs; the others get their own.
    let numa = |i: usize| t.pci[t.gpus[i].pci].numa_node;
    assert_eq!((numa(0), numa(4)), (Some(0), Some(1)));
    assert_eq!(t.numa.len(), 8);
}

#[test]
fn truncated_row_names_line_and_counts() {
    let text = std::fs::read_to_string(fixture("nvsmi_gb300.txt")).unwrap();
    let mut lines: Vec<&str> = text.lines().collect();
    let short = lines[4].rsplitn(6, '\t').last().unwrap().to_string();
    lines[4] = &short;
    let err = parse_nvidia_smi(&lines.join("\n"), Path::new("t.txt")).unwrap_err();
    let msg = err.to_string();
    assert!(msg.starts_with("t.txt:5: row GPU3 has "), "{msg}");
    assert!(msg.contains("header has 8 columns"), "{msg}");
    // Cut after three rows.
    let cut: String = text.lines().take(4).collect::<Vec<_>>().join("\n");
    let msg = parse_nvidia_smi(&cut, Path::new("t.txt"))
        .unwrap_err()
        .to_string();
    assert!(
        msg.contains("t.txt:5:") && msg.contains("expected the row of GPU3"),
        "{msg}"
    );
}

#[test]
fn bad_cells_and_asymmetry_are_reported() {
    let good = "\tGPU0\tGPU1\tCPU Affinity\tNUMA Affinity\nGPU0\t X \tPHB\t0-7\t0\nGPU1\tPHB\t X \t0-7\t0\n";
    assert!(parse_nvidia_smi(good, Path::new("g")).is_ok());
    let bad = good.replace("GPU1\tPHB", "GPU1\tFOO");
    let msg = parse_nvidia_smi(&bad, Path::new("g"))
        .unwrap_err()
        .to_string();
    assert!(msg.contains("g:3:") && msg.contains("`FOO`"), "{msg}");
    let asym = good.replace("GPU1\tPHB", "GPU1\tSYS");
    let msg = parse_nvidia_smi(&asym, Path::new("g"))
        .unwrap_err()
        .to_string();
    assert!(msg.contains("symmetric"), "{msg}");
    let numa = good.replace("0-7\t0\nGPU1", "0-7\tzero\nGPU1");
    let msg = parse_nvidia_smi(&numa, Path::new("g"))
        .unwrap_err()
        .to_string();
    assert!(
        msg.contains("NUMA Affinity") && msg.contains("g:2:"),
        "{msg}"
    );
    let msg = parse_nvidia_smi("hello\n", Path::new("g"))
        .unwrap_err()
        .to_string();
    assert!(msg.contains("no `nvidia-smi topo -m` header"), "{msg}");
    // Very old drivers' SOC reads as SYS.
    let soc = good.replace("PHB", "SOC");
    let p = parse_nvidia_smi(&soc, Path::new("g")).unwrap();
    assert_eq!(p.cell(0, 1), PairClass::Pcie(PcieClass::Sys));
}

#[test]
fn inconsistent_cells_name_the_chain() {
    let text = "\tGPU0\tGPU1\tNIC0\tCPU Affinity\tNUMA Affinity\n\
GPU0\t X \tSYS\tPIX\t0-7\tN/A\n\
GPU1\tSYS\t X \tPIX\t0-7\tN/A\n\
NIC0\tPIX\tPIX\t X \n\nNIC Legend:\n\n  NIC0: mlx5_0\n";
    let p = parse_nvidia_smi(text, Path::new("bad")).unwrap();
    let err = p.to_topology("bad", Path::new("bad")).unwrap_err();
    let msg = err.to_string();
    assert!(
        matches!(err, DiscoverError::Malformed { line: 2, .. }),
        "{msg}"
    );
    assert!(
        msg.contains("GPU0/NIC0 is PIX, NIC0/GPU1 is PIX") && msg.contains("GPU0/GPU1 is SYS"),
        "{msg}"
    );
    // Two GPUs the cells put together but whose NUMA affinities differ: the tool's cells
    // win (one NUMA node, NODE), and the disagreement is said.
    let text = "\tGPU0\tGPU1\tCPU Affinity\tNUMA Affinity\nGPU0\t X \tNODE\t0-7\t0\nGPU1\tNODE\t X \t8-15\t1\n";
    let p = parse_nvidia_smi(text, Path::new("n")).unwrap();
    let d = p.to_topology("n", Path::new("n")).unwrap();
    assert_eq!(
        d.topology.classifier().gpu_gpu(0, 1),
        PairClass::Pcie(PcieClass::Node)
    );
    assert!(
        d.warnings
            .iter()
            .any(|w| w.contains("GPU0 (0), GPU1 (1) on one NUMA node")),
        "{:?}",
        d.warnings
    );
}

#[test]
fn nvlink_file_merges_into_a_sysfs_like_topology() {
    // A DGX H100 without its NVLinks stands for what sysfs shows.
    let mut topo = profiles::get("dgx-h100").unwrap();
    topo.gpu_links.clear();
    let mut d = Discovery::clean(topo);
    apply_nvlink_file(&mut d, &fixture("nvsmi_dgx_h100_old.txt")).unwrap();
    assert_eq!(d.topology.gpu_links.len(), 28);
    assert!(
        d.topology
            .gpu_links
            .iter()
            .all(|l| l.kind == FabricKind::Nvlink && l.count == 18)
    );
    assert_eq!(d.topology.classifier().gpu_gpu(2, 7), PairClass::NvLink(18));
    // A GPU count mismatch is an error naming the file.
    let mut small = Discovery::clean(profiles::get("gb300-4").unwrap());
    let err = apply_nvlink_file(&mut small, &fixture("nvsmi_dgx_h100_old.txt")).unwrap_err();
    assert!(err.to_string().contains("lists 8 GPU(s)"), "{err}");
    let err = apply_nvlink_file(&mut small, Path::new("/nonexistent/x.txt")).unwrap_err();
    assert!(matches!(err, DiscoverError::Io { .. }));
}

#[test]
fn missing_file_is_an_io_error_naming_the_path() {
    let err = load(&Source::NvidiaSmi(PathBuf::from("/nonexistent/topo.txt"))).unwrap_err();
    assert!(err.to_string().contains("/nonexistent/topo.txt"), "{err}");
}
