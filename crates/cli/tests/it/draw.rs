//! `topoalign draw`: SVG and DOT to stdout or atomically to a file.

use std::path::Path;

use crate::common::{run, run_args, run_expecting, stdout_of, topoalign};
use assert_cmd::Command;

/// `topoalign draw --profile gb300-4 --out PATH`.
fn draw_gb300_to(path: &Path) -> Command {
    let mut cmd = topoalign();
    cmd.args(["draw", "--profile", "gb300-4", "--out"])
        .arg(path);
    cmd
}

#[test]
fn svg_to_stdout_names_every_gpu_and_nic() {
    let svg = stdout_of(&["draw", "--profile", "mi300x-8", "-o", "svg"]);
    assert!(svg.starts_with("<svg xmlns=\"http://www.w3.org/2000/svg\""));
    assert!(svg.trim_end().ends_with("</svg>"));
    for bus in ["11", "2f", "46", "5d", "8b", "aa", "c2", "da", "0c", "d5"] {
        assert!(svg.contains(&format!("0000:{bus}:00.0")), "{bus}");
    }
    // VFs are folded into their PF but still named (tooltip).
    assert!(svg.contains("0000:0c:00.4"));
    assert!(svg.contains("XGMI all-to-all among GPU0-7"));
}

#[test]
fn dot_output_has_numa_and_host_bridge_clusters() {
    let dot = stdout_of(&["draw", "--profile", "pcie-2socket", "-o", "dot"]);
    assert!(dot.starts_with("graph \"pcie-2socket\" {"));
    assert!(dot.contains("subgraph \"cluster_numa0\""));
    assert!(dot.contains("subgraph \"cluster_numa1\""));
    assert!(dot.contains("subgraph \"cluster_hb_pci0000:00\""));
    assert!(dot.contains("label=\"PHB\""));
    assert!(dot.contains("label=\"NODE\""));
}

#[test]
fn out_file_is_written_whole_and_no_temp_file_is_left() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("gb300.svg");
    std::fs::write(&path, "old content").unwrap();
    let out = run_expecting(&mut draw_gb300_to(&path), 0);
    assert!(out.stdout.is_empty());
    let written = std::fs::read_to_string(&path).unwrap();
    assert_eq!(written, stdout_of(&["draw", "--profile", "gb300-4"]));
    let names: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names, vec!["gb300.svg".to_string()]);
}

#[test]
fn out_into_missing_directory_fails_cleanly() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("no/such/dir/x.svg");
    let out = run(&mut draw_gb300_to(&path));
    assert_eq!(out.code, 2);
    let err = &out.stderr;
    assert!(err.contains("no/such/dir"), "{err}");
    assert!(!path.exists());
}

#[test]
fn unknown_profile_and_bad_format_exit_2() {
    let out = run_args(&["draw", "--profile", "nope"]);
    assert_eq!(out.code, 2);
    assert!(out.stderr.contains("pcie-2socket"));
    let out = run_args(&["draw", "--profile", "gb300-4", "-o", "png"]);
    assert_eq!(out.code, 2);
}
