//! `topoalign profile list|show|write`, and write → `discover --sysfs-root` round trips.

use crate::common::{json, run, run_args, stdout_of, subcommand, write_file};
use topoalign_discover::sysfs_view;
use topoalign_topology::Topology;

#[test]
fn list_names_every_profile() {
    let table = stdout_of(&["profile", "list"]);
    for name in topoalign_profiles::NAMES {
        assert!(table.contains(name), "{table}");
    }
    assert!(table.contains("dgx-a100-mig") && table.contains("MIG on GPUs 0-3"));
    let list = json(&stdout_of(&["profile", "list", "-o", "json"]));
    let rows = list.as_array().unwrap();
    assert_eq!(rows.len(), topoalign_profiles::NAMES.len());
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
    for name in [
        "mi300x-8",
        "gb300-4",
        "dgx-h100",
        "pcie-2socket",
        "dgx-a100-mig",
    ] {
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
        // Every fact comes back, NVLink and NVIDIA memory included (issue 10).
        let mut want = shown.clone();
        want.canonicalize();
        assert_eq!(found, want, "{name}");
        assert_eq!(sysfs_view(&found), sysfs_view(&shown), "{name}");
    }
}

#[test]
fn bad_requests_exit_2_with_a_reason() {
    let out = run(subcommand("profile").args(["show", "nope"]));
    assert_eq!(out.code, 2);
    let err = &out.stderr;
    assert!(
        err.contains("unknown profile `nope`") && err.contains("mi300x-8"),
        "{err}"
    );

    let dir = tempfile::tempdir().unwrap();
    write_file(dir.path(), "x", "keep");
    let out = run(subcommand("profile")
        .args(["write", "mi300x-8"])
        .arg(dir.path()));
    assert_eq!(out.code, 2);
    let err = &out.stderr;
    assert!(err.contains("not empty"), "{err}");
}

/// One function (`topoalign_profiles::lookup`) words an unknown profile, whichever command
/// names it (issue 10).
#[test]
fn an_unknown_profile_reads_the_same_in_every_command() {
    let message = "unknown profile `nope`; built-in profiles: mi300x-8, gb300-4, dgx-h100, pcie-2socket, dgx-h100-mig, dgx-a100-mig\n";
    for args in [
        &["demo", "--profile", "nope"][..],
        &["profile", "show", "nope"],
        &["discover", "--profile", "nope"],
        &["plan", "--profile", "nope", "--gpus", "1"],
    ] {
        let out = run_args(args);
        assert_eq!(out.code, 2, "{args:?}: {}", out.stderr);
        assert!(out.stderr.ends_with(message), "{args:?}: {}", out.stderr);
    }
}
