//! `topoalign discover`: summary, JSON and YAML of a topology.

use crate::common::{json, run_args, stdout_of};

#[test]
fn table_summary_names_every_device() {
    let out = stdout_of(&["discover", "--profile", "dgx-h100"]);
    for bdf in [
        "0000:1b:00.0",
        "0000:df:00.0",
        "0000:18:00.0",
        "0000:29:00.0",
    ] {
        assert!(out.contains(bdf), "{bdf} missing from\n{out}");
    }
    assert!(out.contains("NV18 all-to-all among GPU0-7"));
    assert!(out.contains("pci0000:27"));
    for line in out.lines() {
        assert!(line.chars().count() <= 100, "too wide: {line}");
    }
}

#[test]
fn json_is_the_topology_model() {
    let out = stdout_of(&["discover", "--profile", "gb300-4", "-o", "json"]);
    let v = json(&out);
    assert_eq!(v["name"], "gb300-4");
    assert_eq!(v["gpus"].as_array().unwrap().len(), 4);
    assert_eq!(v["nics"].as_array().unwrap().len(), 4);
    assert_eq!(v["numa"].as_array().unwrap().len(), 2);
    assert_eq!(v["nics"][0]["rdma"], "mlx5_0");
    assert!(
        v["nics"][0].get("netdev").is_none(),
        "IB-only NIC has no netdev"
    );
}

#[test]
fn yaml_is_the_same_model() {
    let out = stdout_of(&["discover", "--profile", "pcie-2socket", "-o", "yaml"]);
    assert!(out.contains("name: pcie-2socket"), "{out}");
    assert!(out.contains("hostBridges:"));
    assert!(out.contains("0000:01:00.0"));
}

#[test]
fn unknown_profile_exits_2_listing_known_profiles() {
    let out = run_args(&["discover", "--profile", "dgx-a100"]);
    assert_eq!(out.code, 2);
    let err = &out.stderr;
    assert!(err.starts_with("error: "), "{err}");
    assert!(err.contains("dgx-a100") && err.contains("mi300x-8") && err.contains("gb300-4"));
}

#[test]
fn missing_file_and_conflicting_sources_are_usage_errors() {
    let out = run_args(&["discover", "--from-nccl-xml", "/nonexistent/topo.xml"]);
    assert_eq!(out.code, 2);
    assert!(out.stderr.contains("/nonexistent/topo.xml"));
    let out = run_args(&["discover", "--profile", "gb300-4", "--sysfs-root", "/"]);
    assert_eq!(out.code, 2, "two sources at once are refused");
}

#[test]
fn bad_output_format_is_refused() {
    let out = run_args(&["discover", "--profile", "gb300-4", "-o", "xml"]);
    assert_eq!(out.code, 2);
}

#[test]
fn a_directory_that_is_not_a_sysfs_tree_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let out = run_args(&["discover", "--sysfs-root", dir.path().to_str().unwrap()]);
    assert_ne!(out.code, 0);
    assert!(out.stderr.contains("is not a sysfs tree"), "{}", out.stderr);
    assert!(out.stdout.is_empty());
}

#[test]
fn nvidia_fabric_without_nvlink_source_is_unknown_not_none() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("dgx");
    let root_s = root.to_str().unwrap();
    stdout_of(&["profile", "write", "dgx-h100", root_s]);
    // A host tree has no saved nvidia-smi output.
    std::fs::remove_dir_all(root.join("var/lib/topoalign")).unwrap();
    let out = stdout_of(&["discover", "--sysfs-root", root_s]);
    assert!(out.contains("GPU fabric: unknown"), "{out}");
    assert!(
        out.contains("--nvlink-from") && out.contains("nvidia-smi"),
        "{out}"
    );
    assert!(!out.contains("none (GPUs talk over PCIe)"), "{out}");
    let v = json(&stdout_of(&[
        "discover",
        "--sysfs-root",
        root_s,
        "-o",
        "json",
    ]));
    assert_eq!(v["fabric"], "unknown");
    // With the NVLink source it is known again.
    let nv = crate::common::test_data("discover", "fixtures/nvsmi_dgx_h100_old.txt");
    let out = stdout_of(&[
        "discover",
        "--sysfs-root",
        root_s,
        "--nvlink-from",
        nv.to_str().unwrap(),
    ]);
    assert!(out.contains("NV18 all-to-all among GPU0-7"), "{out}");
    // A file naming GPUs the tree lacks is an error.
    let gb = crate::common::test_data("discover", "fixtures/nvsmi_gb300.txt");
    let out = run_args(&[
        "discover",
        "--sysfs-root",
        root_s,
        "--nvlink-from",
        gb.to_str().unwrap(),
    ]);
    assert_ne!(out.code, 0);
    assert!(out.stderr.contains("lacks GPU4"), "{}", out.stderr);
}

#[test]
fn amd_smi_paste_states_no_numa_and_says_how_to_add_it() {
    let f = crate::common::test_data("discover", "fixtures/amd/amdsmi_topology_mi355x_8gpu.txt");
    let out = run_args(&[
        "discover",
        "--from-amd-smi",
        f.to_str().unwrap(),
        "-o",
        "json",
    ]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let v = json(&out.stdout);
    assert_eq!(v["gpus"].as_array().unwrap().len(), 8);
    assert!(
        v["numa"].as_array().unwrap().is_empty(),
        "no NUMA node invented"
    );
    assert!(out.stderr.contains("--showtoponuma"), "{}", out.stderr);
}
