//! Every failure class of issue 14 on real captures: the bare tool output with one
//! decoration added (a trailing warning, the Legend block, a Markdown fence, a shell
//! prompt, CRLF, a UTF-8 BOM, UTF-16 as PowerShell writes it) reads exactly like the bare
//! capture; a truncated or wrapped paste is an error naming the line and the likely
//! cause. The same tolerance holds for `--from-nvidia-smi` and `--from-nccl-xml`.

use std::path::Path;

use topoalign_discover::decode_paste;
use topoalign_discover::{Discovery, Source, load};
use topoalign_discover::{parse_amd_smi, parse_nccl_xml, parse_nvidia_smi};
use topoalign_topology::FabricStatus;

fn read(name: &str) -> String {
    std::fs::read_to_string(crate::common::fixture(name)).unwrap()
}

/// The lines of a capture without its first `head` and last `tail` lines: the bare tool
/// output of a fixture whose decoration lines are known.
fn bare(name: &str, head: usize, tail: usize) -> String {
    let text = read(name);
    let lines: Vec<&str> = text.lines().collect();
    let mut out = lines[head..lines.len() - tail].join("\n");
    out.push('\n');
    out
}

fn amd(text: &str) -> Discovery {
    parse_amd_smi(text, Path::new("paste.txt"), "paste").unwrap()
}

fn amd_err(text: &str) -> String {
    parse_amd_smi(text, Path::new("paste.txt"), "paste")
        .unwrap_err()
        .to_string()
}

/// amd-smi text (MI300 series, amdsmi CHANGELOG): fence + prompt removed.
fn amdsmi_bare() -> String {
    bare("amd/amdsmi_topology_mi300_8gpu.txt", 2, 1)
}

/// rocm-smi --showtopo (MI308X, ms-swift docs): fences removed.
fn rocm_bare() -> String {
    bare("amd/rocm_smi_showtopo_mi308x_8gpu.txt", 1, 1)
}

/// The Legend block amd-smi 26.x prints after the tables (ROCm/ROCm#6074 capture).
fn legend() -> String {
    let t = read("amd/amdsmi_topology_rx7900xtx_2gpu_legend.txt");
    let at = t.find("Legend:").unwrap();
    t[at..].trim_end_matches("```\n").to_string()
}

const GROUPS_WARNING: &str = "WARNING: User is missing the following required groups: render, video. Please add user to these groups.";

/// Decorations users paste around output, each applied alone.
fn decorations(bare: &str) -> Vec<(&'static str, String)> {
    vec![
        ("trailing warning", format!("{bare}{GROUPS_WARNING}\n")),
        ("leading warning", format!("{GROUPS_WARNING}\n{bare}")),
        ("legend", format!("{bare}\n{}", legend())),
        ("fence", format!("```text\n{bare}```\n")),
        (
            "prompt",
            format!("user@node:~$ amd-smi topology\n{bare}user@node:~$ \n"),
        ),
        ("crlf", bare.replace('\n', "\r\n")),
        ("bom", format!("\u{feff}{bare}")),
    ]
}

#[test]
fn decorated_amd_smi_reads_like_the_bare_capture() {
    let want = amd(&amdsmi_bare());
    assert_eq!(want.topology.gpus.len(), 8);
    for (what, text) in decorations(&amdsmi_bare()) {
        let got = amd(&text);
        assert_eq!(got.topology, want.topology, "{what}");
        assert_eq!(got.warnings, want.warnings, "{what}");
    }
}

#[test]
fn decorated_rocm_smi_reads_like_the_bare_capture() {
    let want = amd(&rocm_bare());
    assert_eq!(want.topology.numa.len(), 2);
    for (what, text) in decorations(&rocm_bare()) {
        assert_eq!(amd(&text).topology, want.topology, "{what}");
    }
}

#[test]
fn decorated_amd_smi_json_reads_like_the_bare_capture() {
    for name in [
        "amd/amdsmi_topology_json_610_2gpu.json",
        "amd/amdsmi_topology_json_611_at_2gpu.json",
    ] {
        let want = amd(&bare(name, 2, 1));
        assert_eq!(want.topology.gpus.len(), 2, "{name}");
        for (what, text) in decorations(&bare(name, 2, 1)) {
            assert_eq!(amd(&text).topology, want.topology, "{name}: {what}");
        }
    }
}

#[test]
fn utf16_from_powershell_reads_like_utf8() {
    let want = amd(&rocm_bare());
    let mut le = vec![0xff, 0xfe];
    le.extend(rocm_bare().encode_utf16().flat_map(u16::to_le_bytes));
    assert_eq!(amd(&decode_paste(&le)).topology, want.topology);
    let bare_le: Vec<u8> = amdsmi_bare()
        .replace('\n', "\r\n")
        .encode_utf16()
        .flat_map(u16::to_le_bytes)
        .collect();
    assert_eq!(
        amd(&decode_paste(&bare_le)).topology,
        amd(&amdsmi_bare()).topology
    );
    // Through a file, as `--from-amd-smi` reads it.
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("topo.txt");
    std::fs::write(&f, &le).unwrap();
    let d = load(&Source::AmdSmi(f)).unwrap();
    assert_eq!(d.topology.gpus, want.topology.gpus);
}

#[test]
fn several_rocm_smi_sections_combine_in_any_order() {
    let full = rocm_bare();
    let section = |title: &str| -> String {
        let start = full.find(title).unwrap();
        let banner_start = full[..start].rfind('\n').map_or(0, |i| i + 1);
        let rest = &full[start..];
        let end = rest[1..].find("\n=").map_or(rest.len(), |i| i + 2);
        full[banner_start..start + end].to_string()
    };
    let weight = section("Weight between two GPUs");
    let links = section("Link Type between two GPUs");
    let numa = section("Numa Nodes");
    let header = "============================ ROCm System Management Interface ============================\n";
    let footer = "================================== End of ROCm SMI Log ===================================\n";
    // `rocm-smi --showtoponuma`, then `--showtopotype`, then `--showtopoweight`.
    let pasted = format!(
        "$ rocm-smi --showtoponuma\n{header}{numa}{footer}$ rocm-smi --showtopotype\n{header}{links}{footer}$ rocm-smi --showtopoweight\n{header}{weight}{footer}"
    );
    let got = amd(&pasted).topology;
    let want = amd(&full).topology;
    assert_eq!(got.numa, want.numa);
    assert_eq!(got.gpus, want.gpus);
    // The hops table was not pasted: the links carry weights only.
    assert_eq!(got.gpu_links.len(), 28);
    assert!(
        got.gpu_links
            .iter()
            .all(|l| l.weight == Some(15) && l.hops.is_none())
    );
    // NUMA alone: links unknown, not none.
    let only_numa = amd(&format!("{header}{numa}{footer}"));
    assert_eq!(only_numa.topology.fabric_status(), FabricStatus::Unknown);
    assert!(
        only_numa
            .warnings
            .iter()
            .any(|w| w.contains("xGMI links are unknown"))
    );
    // amd-smi tables followed by rocm-smi NUMA lines: GPU N is the N-th address.
    let mixed = format!("{}{header}{numa}{footer}", amdsmi_bare());
    let t = amd(&mixed).topology;
    assert_eq!(t.numa.iter().map(|n| n.id).collect::<Vec<_>>(), vec![0, 1]);
    assert_eq!(t.classifier().numa_of(t.gpus[4].pci), Some(1));
    assert_eq!(t.gpu_bdf(4).to_string(), "0000:9f:00.0");
    // Two sections that disagree come from two machines.
    let other = weight.replace("15           0", "30           0");
    let err = amd_err(&format!("{full}{header}{other}{footer}"));
    assert!(err.contains("mixes two machines"), "{err}");
}

#[test]
fn a_banner_without_its_table_names_the_line_and_the_cause() {
    // Cut right after the first section banner (a truncated paste).
    let full = rocm_bare();
    let cut = &full[..full.find("Weight between two GPUs").unwrap() + 60];
    let cut = &cut[..cut.rfind('\n').unwrap_or(cut.len())];
    let err = amd_err(cut);
    assert!(err.starts_with("paste.txt:4:"), "{err}");
    assert!(
        err.contains("not followed by a table") && err.contains("truncated"),
        "{err}"
    );
    // amd-smi: a title then nothing.
    let full = amdsmi_bare();
    let cut = &full[..full.find("HOPS TABLE:").unwrap() + "HOPS TABLE:".len()];
    let err = amd_err(cut);
    assert!(
        err.contains("`HOPS TABLE` is not followed by a table"),
        "{err}"
    );
    // Rows cut short.
    let cut: String = full.lines().take(14).collect::<Vec<_>>().join("\n");
    let err = amd_err(&cut);
    assert!(err.contains("row(s) for 8 columns"), "{err}");
}

#[test]
fn lines_wrapped_at_80_columns_are_a_clear_error() {
    for full in [amdsmi_bare(), rocm_bare()] {
        let wrapped: String = full
            .lines()
            .flat_map(|l| {
                let chars: Vec<char> = l.chars().collect();
                if chars.is_empty() {
                    vec![String::new()]
                } else {
                    chars.chunks(80).map(|c| c.iter().collect()).collect()
                }
            })
            .collect::<Vec<String>>()
            .join("\n");
        let err = amd_err(&wrapped);
        assert!(err.contains("wrapped"), "{err}");
        assert!(err.starts_with("paste.txt:"), "{err}");
    }
}

#[test]
fn nvidia_smi_tolerates_the_same_decorations() {
    let bare = read("nvsmi_gb300.txt");
    let want = parse_nvidia_smi(&bare, Path::new("n.txt")).unwrap();
    for (what, text) in decorations(&bare) {
        let got =
            parse_nvidia_smi(&text, Path::new("n.txt")).unwrap_or_else(|e| panic!("{what}: {e}"));
        assert_eq!(got.cells, want.cells, "{what}");
        assert_eq!(got.numa_affinity, want.numa_affinity, "{what}");
        assert_eq!(got.nics, want.nics, "{what}");
    }
    let mut le = vec![0xff, 0xfe];
    le.extend(bare.encode_utf16().flat_map(u16::to_le_bytes));
    assert_eq!(
        parse_nvidia_smi(&decode_paste(&le), Path::new("n.txt"))
            .unwrap()
            .cells,
        want.cells
    );
    // Truncated: the table stops early.
    let cut: String = bare.lines().take(3).collect::<Vec<_>>().join("\n");
    let err = parse_nvidia_smi(&cut, Path::new("n.txt"))
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("n.txt:4:") && err.contains("truncated"),
        "{err}"
    );
}

#[test]
fn nccl_xml_tolerates_the_same_decorations() {
    let bare = read("nccl_ndv5.xml");
    let want = parse_nccl_xml(&bare, Path::new("x.xml"), "x").unwrap();
    for (what, text) in decorations(&bare) {
        let got = parse_nccl_xml(&text, Path::new("x.xml"), "x")
            .unwrap_or_else(|e| panic!("{what}: {e}"));
        assert_eq!(got.topology, want.topology, "{what}");
    }
    // A truncated file is an error naming a line.
    let cut = &bare[..bare.len() / 2];
    let err = parse_nccl_xml(cut, Path::new("x.xml"), "x")
        .unwrap_err()
        .to_string();
    assert!(
        err.starts_with("x.xml:") && err.contains("not well-formed"),
        "{err}"
    );
}
