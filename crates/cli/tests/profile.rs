#![allow(clippy::unwrap_used, clippy::expect_used)]
//! `topoalign profile list|show|write`, and write → `discover --sysfs-root` round trips.

use assert_cmd::Command;
use topoalign_topology::{FabricKind, GpuVendor, Topology};

fn topoalign() -> Command {
    Command::cargo_bin("topoalign").unwrap()
}

fn stdout_of(args: &[&str]) -> String {
    let out = topoalign().args(args).output().unwrap();
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// What sysfs can carry: no NVLink, no NVIDIA memory size (both come from NVML).
fn sysfs_visible(mut t: Topology) -> Topology {
    t.gpu_links.retain(|l| l.kind != FabricKind::Nvlink);
    for g in &mut t.gpus {
        if g.vendor == GpuVendor::Nvidia {
            g.memory_mib = None;
        }
    }
    t.canonicalize();
    t
}

#[test]
fn list_names_every_profile() {
    let table = stdout_of(&["profile", "list"]);
    for name in ["mi300x-8", "gb300-4", "dgx-h100", "pcie-2socket"] {
        assert!(table.contains(name), "{table}");
    }
    let json: serde_json::Value =
        serde_json::from_str(&stdout_of(&["profile", "list", "-o", "json"])).unwrap();
    let rows = json.as_array().unwrap();
    assert_eq!(rows.len(), 4);
    assert_eq!(rows[0]["name"], "mi300x-8");
    assert_eq!(rows[0]["gpus"], 8);
}

#[test]
fn show_prints_the_topology() {
    let t: Topology =
        serde_json::from_str(&stdout_of(&["profile", "show", "gb300-4", "-o", "json"])).unwrap();
    assert_eq!(t.gpus.len(), 4);
    assert_eq!(t.name, "gb300-4");
    let yaml = stdout_of(&["profile", "show", "gb300-4", "-o", "yaml"]);
    assert!(yaml.contains("gb300-4"));
    let table = stdout_of(&["profile", "show", "mi300x-8"]);
    assert!(table.contains("mi300x-8"), "{table}");
}

#[test]
fn write_then_discover_matches_show_for_every_profile() {
    for name in ["mi300x-8", "gb300-4", "dgx-h100", "pcie-2socket"] {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join(name);
        let root_s = root.to_str().unwrap();
        let msg = stdout_of(&["profile", "write", name, root_s]);
        assert!(msg.contains(root_s), "{msg}");
        let shown: Topology =
            serde_json::from_str(&stdout_of(&["profile", "show", name, "-o", "json"])).unwrap();
        let found: Topology = serde_json::from_str(&stdout_of(&[
            "discover",
            "--sysfs-root",
            root_s,
            "-o",
            "json",
        ]))
        .unwrap();
        assert_eq!(sysfs_visible(found), sysfs_visible(shown), "{name}");
    }
}

#[test]
fn bad_requests_exit_2_with_a_reason() {
    let out = topoalign()
        .args(["profile", "show", "nope"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("unknown profile `nope`") && err.contains("mi300x-8"),
        "{err}"
    );

    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("x"), "keep").unwrap();
    let out = topoalign()
        .args(["profile", "write", "mi300x-8", dir.path().to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("not empty"), "{err}");
}
