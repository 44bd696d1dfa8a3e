//! `topoalign matrix`: the nvidia-smi layout, checked cell for cell against the GB300 field report.

use std::path::PathBuf;

use crate::common::{json, run_args, stdout_of};

/// The GB300 field report's `nvidia-smi topo -m` table, kept in the repo as a fixture.
fn seed_fixture() -> String {
    let path =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/gb300-4-topo-matrix.md");
    std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("fixture {} is required: {e}", path.display()))
}

/// The markdown table whose header row starts with an empty cell then `GPU0`: column
/// labels and (row label, cells) rows.
fn seed_matrix(text: &str) -> (Vec<String>, Vec<(String, Vec<String>)>) {
    let split = |l: &str| -> Vec<String> {
        l.trim()
            .trim_matches('|')
            .split('|')
            .map(|c| c.trim().to_string())
            .collect()
    };
    let mut lines = text.lines().skip_while(|l| {
        let c = split(l);
        !(l.trim_start().starts_with('|') && c.len() > 1 && c[0].is_empty() && c[1] == "GPU0")
    });
    let header = split(lines.next().expect("seed 001 has no `| | GPU0 ...` table"));
    let rows: Vec<(String, Vec<String>)> = lines
        .take_while(|l| l.trim_start().starts_with('|'))
        .map(split)
        .filter(|c| !c[0].starts_with('-'))
        .map(|mut c| {
            let label = c.remove(0);
            (label, c)
        })
        .collect();
    assert!(!rows.is_empty(), "seed 001 matrix has no rows");
    (header[1..].to_vec(), rows)
}

/// `GPU3`, `NIC12`: a device column (not `GPU NUMA ID`).
fn is_device_label(s: &str) -> bool {
    ["GPU", "NIC"].iter().any(|p| {
        s.strip_prefix(p)
            .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
    })
}

/// Device columns and rows of topoalign's tab-separated output.
fn rendered(text: &str) -> (Vec<String>, Vec<(String, Vec<String>)>) {
    let mut lines = text.lines();
    let header: Vec<String> = lines
        .next()
        .unwrap()
        .split('\t')
        .skip(1)
        .map(|s| s.trim().to_string())
        .filter(|s| is_device_label(s))
        .collect();
    let rows = lines
        .take_while(|l| !l.is_empty())
        .map(|l| {
            let mut f = l.split('\t').map(|s| s.trim().to_string());
            let label = f.next().unwrap();
            (label, f.take(header.len()).collect())
        })
        .collect();
    (header, rows)
}

#[test]
fn gb300_matrix_equals_seed_001_cell_for_cell() {
    let seed_text = seed_fixture();
    let (seed_cols, seed_rows) = seed_matrix(&seed_text);
    assert_eq!(seed_cols.len(), 8, "seed 001 lists 4 GPUs and 4 NICs");
    let out = stdout_of(&["matrix", "--profile", "gb300-4"]);
    let (cols, rows) = rendered(&out);
    assert_eq!(cols, seed_cols, "column labels");
    let gpu_rows = rows.iter().filter(|(l, _)| l.starts_with("GPU")).count();
    assert_eq!(gpu_rows, seed_rows.len(), "one GPU row per seed row");
    let mut compared = 0;
    for (label, seed_cells) in &seed_rows {
        let (_, cells) = rows
            .iter()
            .find(|(l, _)| l == label)
            .unwrap_or_else(|| panic!("no row {label} in\n{out}"));
        for (c, want) in seed_cells.iter().enumerate() {
            let col = cols.iter().position(|x| x == &seed_cols[c]).unwrap();
            assert_eq!(&cells[col], want, "{label} × {}", seed_cols[c]);
            compared += 1;
        }
    }
    assert_eq!(compared, 32);
    // The NIC legend matches the seed's "NIC mapping" line.
    let mapping = seed_text
        .lines()
        .find(|l| l.starts_with("NIC mapping:"))
        .expect("seed 001 has a NIC mapping line");
    for pair in mapping.trim_start_matches("NIC mapping:").split(',') {
        let pair = pair.split_whitespace().next().unwrap();
        let (nic, dev) = pair.split_once('=').unwrap();
        assert!(
            out.contains(&format!("\n  {nic}: {dev}\n")),
            "NIC legend lacks {nic}: {dev}"
        );
    }
}

#[test]
fn aligned_output_has_no_tabs_and_keeps_cells() {
    let out = stdout_of(&["matrix", "--profile", "gb300-4", "--aligned"]);
    assert!(!out.contains('\t'));
    let gpu0 = out.lines().find(|l| l.starts_with("GPU0")).unwrap();
    let cells: Vec<&str> = gpu0.split_whitespace().collect();
    assert_eq!(
        &cells[..10],
        &[
            "GPU0", "X", "NV18", "NV18", "NV18", "NODE", "NODE", "SYS", "SYS", "0-63"
        ]
    );
    assert!(out.contains("NIC Legend:"));
}

#[test]
fn vfs_and_non_rdma_nics_are_opt_in() {
    let plain = stdout_of(&["matrix", "--profile", "mi300x-8"]);
    let with_vfs = stdout_of(&["matrix", "--profile", "mi300x-8", "--vfs"]);
    let nic_cols = |s: &str| s.lines().next().unwrap().matches("NIC").count();
    assert_eq!(nic_cols(&plain), 8);
    assert_eq!(nic_cols(&with_vfs), 40);
    assert!(plain.contains("  XGMI = "));
    // pcie-2socket and dgx-h100 NICs all have RDMA: --all-nics changes nothing there.
    assert_eq!(
        nic_cols(&stdout_of(&[
            "matrix",
            "--profile",
            "dgx-h100",
            "--all-nics"
        ])),
        nic_cols(&stdout_of(&["matrix", "--profile", "dgx-h100"]))
    );
}

#[test]
fn json_output_is_the_pair_matrix() {
    let out = stdout_of(&["matrix", "--profile", "dgx-h100", "-o", "json"]);
    let v = json(&out);
    let devices = v["devices"].as_array().unwrap();
    assert_eq!(devices.len(), 8 + 9);
    let cells = v["cells"].as_array().unwrap();
    assert_eq!(cells.len(), devices.len() * devices.len());
    assert_eq!(cells[0], "X");
    assert_eq!(cells[1], "NV18");
    assert_eq!(devices[8]["name"], "mlx5_0");
    // GPU0 × mlx5_0 shares a switch.
    assert_eq!(cells[8], "PIX");
}

#[test]
fn unknown_profile_is_a_usage_error_naming_the_known_ones() {
    let out = run_args(&["matrix", "--profile", "nope"]);
    assert_eq!(out.code, 2);
    let err = &out.stderr;
    assert!(err.contains("nope"), "{err}");
    for known in ["mi300x-8", "gb300-4", "dgx-h100", "pcie-2socket"] {
        assert!(err.contains(known), "{err}");
    }
    assert!(out.stdout.is_empty());
}

#[test]
fn missing_input_file_is_a_usage_error_naming_it() {
    let out = run_args(&["matrix", "--from-nvidia-smi", "/nonexistent/topo.txt"]);
    assert_eq!(out.code, 2);
    let err = &out.stderr;
    assert!(err.contains("/nonexistent/topo.txt"), "{err}");
}

#[test]
fn unknown_numa_prints_na_and_marks_the_guessable_cells() {
    let f = crate::common::test_data(
        "discover",
        "fixtures/amd/amdsmi_topology_rx7900xtx_2gpu_legend.txt",
    );
    let f = f.to_str().unwrap();
    let text = stdout_of(&["matrix", "--from-amd-smi", f]);
    let gpu0: Vec<&str> = text.lines().nth(1).unwrap().split('\t').collect();
    assert_eq!(gpu0[2], "SYS*", "{text}");
    assert_eq!(gpu0[4], "N/A", "NUMA Affinity: {text}");
    assert!(text.contains("SYS* = "), "{text}");
    let v = json(&stdout_of(&["matrix", "--from-amd-smi", f, "-o", "json"]));
    assert!(v["devices"][0]["numaAffinity"].is_null());
    assert_eq!(v["numaUnknown"][1], true);
    // With stated nodes (rocm-smi, MI100: nodes 7 and 1) the classes are plain.
    let f = crate::common::test_data("discover", "fixtures/amd/rocm_smi_showtopo_mi100_4gpu.txt");
    let v = json(&stdout_of(&[
        "matrix",
        "--from-amd-smi",
        f.to_str().unwrap(),
        "-o",
        "json",
    ]));
    assert_eq!(v["devices"][0]["numaAffinity"], 7);
    assert_eq!(v["cells"][1], "SYS");
    assert_eq!(v["cells"][2], "NODE");
    assert!(v.get("numaUnknown").is_none());
    let y = stdout_of(&[
        "matrix",
        "--from-amd-smi",
        f.to_str().unwrap(),
        "-o",
        "yaml",
    ]);
    assert!(y.contains("numaAffinity: 7"), "{y}");
}
