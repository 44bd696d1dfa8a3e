//! `topoalign kubelet-config` end to end.

#[path = "../../../kubelet/tests/support/mod.rs"]
mod kubelet_files;

use std::fs;

use crate::common::{json, run_expecting, subcommand};
use assert_cmd::Command;
use kubelet_files::{fixture, staged};

/// `topoalign kubelet-config <action>`.
fn kubelet_config(action: &str) -> Command {
    let mut cmd = subcommand("kubelet-config");
    cmd.arg(action);
    cmd
}

const SEED_000: [&str; 8] = [
    "--topology-manager-policy",
    "restricted",
    "--topology-manager-scope",
    "container",
    "--topology-manager-option",
    "prefer-closest-numa-nodes=true",
    "--cpu-manager-policy",
    "static",
];

#[test]
fn show_marks_defaults() {
    let text = run_expecting(
        kubelet_config("show").arg(fixture("fixtures/oke-kubelet-config.json")),
        0,
    )
    .stdout;
    assert!(
        text.lines()
            .any(|l| l.contains("topologyManagerPolicy") && l.ends_with("none  (default)")),
        "{text}"
    );
    assert!(
        text.lines()
            .any(|l| l.contains("kubeReserved.cpu") && l.trim_end().ends_with("637m")),
        "{text}"
    );
    assert!(
        text.lines()
            .any(|l| l.contains("featureGates.DynamicResourceAllocation") && l.ends_with("true")),
        "{text}"
    );
}

#[test]
fn show_json() {
    let out = run_expecting(
        kubelet_config("show")
            .args(["-o", "json"])
            .arg(fixture("fixtures/kubeadm-config.yaml")),
        0,
    );
    let v = json(&out.stdout);
    assert_eq!(v["format"], "yaml");
    let policy = v["settings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["field"] == "topologyManagerPolicy")
        .unwrap();
    assert_eq!(policy["value"], "best-effort");
    assert_eq!(policy["default"], false);
}

#[test]
fn set_writes_golden_file_backup_and_reminder() {
    let (dir, path) = staged("oke-kubelet-config.json");
    let state = dir.path().join("cpu_manager_state");
    fs::write(&state, "{}").unwrap();
    let text = run_expecting(
        kubelet_config("set")
            .arg(&path)
            .args(SEED_000)
            .arg("--remove-cpu-manager-state")
            .arg(&state),
        0,
    )
    .stdout;
    assert!(
        text.contains("systemctl restart kubelet")
            && text.contains("NotReady")
            && text.contains("every GPU node"),
        "{text}"
    );
    assert!(text.contains("removed the CPU manager checkpoint"));
    assert_eq!(
        fs::read(&path).unwrap(),
        fs::read(fixture("golden/oke-kubelet-config.seed000.json")).unwrap()
    );
    assert!(!state.exists());
    let backups: Vec<_> = fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("oke-kubelet-config.json.bak."))
        .collect();
    assert_eq!(backups.len(), 1);
}

#[test]
fn dry_run_prints_a_diff_and_writes_nothing() {
    let (dir, path) = staged("kubeadm-config.yaml");
    let before = fs::read(&path).unwrap();
    let text = run_expecting(
        kubelet_config("set")
            .arg(&path)
            .args(SEED_000)
            .arg("--dry-run"),
        0,
    )
    .stdout;
    assert!(
        text.contains("-topologyManagerPolicy: best-effort # none"),
        "{text}"
    );
    assert!(
        text.contains("+topologyManagerPolicy: restricted # none"),
        "{text}"
    );
    assert!(
        text.contains("+  prefer-closest-numa-nodes: \"true\""),
        "{text}"
    );
    assert_eq!(fs::read(&path).unwrap(), before);
    assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 1);
}

#[test]
fn refusals_exit_2_and_leave_the_file() {
    for (file, args, expect) in [
        (
            "oke-kubelet-config.json",
            vec!["--topology-manager-policy", "numa"],
            "expected one of none|best-effort",
        ),
        (
            "no-reserved.yaml",
            vec!["--cpu-manager-policy", "static"],
            "static needs reserved CPUs",
        ),
        (
            "kubeadm-config.yaml",
            vec![
                "--topology-manager-option",
                "prefer-closest-numa-nodes=maybe",
            ],
            "expected true or false",
        ),
        ("truncated.json", SEED_000.to_vec(), "not valid JSON"),
        (
            "not-kubelet.yaml",
            SEED_000.to_vec(),
            "not a KubeletConfiguration",
        ),
    ] {
        let (dir, path) = staged(file);
        let before = fs::read(&path).unwrap();
        let err = run_expecting(kubelet_config("set").arg(&path).args(&args), 2).stderr;
        assert!(err.contains(expect), "{file}: {err}");
        assert_eq!(fs::read(&path).unwrap(), before, "{file} modified");
        assert_eq!(
            fs::read_dir(dir.path()).unwrap().count(),
            1,
            "{file}: stray files"
        );
    }
}

#[test]
fn rollback_restores_the_original() {
    let (_dir, path) = staged("kubeadm-config.yaml");
    let original = fs::read(&path).unwrap();
    run_expecting(kubelet_config("set").arg(&path).args(SEED_000), 0);
    assert_ne!(fs::read(&path).unwrap(), original);
    run_expecting(kubelet_config("rollback").arg(&path), 0);
    assert_eq!(fs::read(&path).unwrap(), original);
}

/// A symlinked KubeletConfiguration: the target is replaced, the link stays a link.
#[test]
fn set_through_a_symlink_keeps_the_link() {
    let (dir, real) = staged("kubeadm-config.yaml");
    let link = dir.path().join("config.yaml");
    std::os::unix::fs::symlink(&real, &link).unwrap();
    run_expecting(kubelet_config("set").arg(&link).args(SEED_000), 0);
    assert!(
        fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink()
    );
    assert!(
        fs::read_to_string(&real)
            .unwrap()
            .contains("topologyManagerPolicy: restricted")
    );
}

/// Rollback twice used to toggle; the second refuses (exit 2, says why) unless --force.
#[test]
fn rollback_twice_refuses_then_force_restores() {
    let (_dir, path) = staged("kubeadm-config.yaml");
    let original = fs::read(&path).unwrap();
    run_expecting(kubelet_config("set").arg(&path).args(SEED_000), 0);
    let edited = fs::read(&path).unwrap();
    let first = run_expecting(kubelet_config("rollback").arg(&path), 0).stdout;
    assert!(
        first.contains("topologyManagerPolicy: restricted -> best-effort"),
        "{first}"
    );
    let err = run_expecting(kubelet_config("rollback").arg(&path), 2).stderr;
    assert!(
        err.contains("would undo that rollback") && err.contains("--force"),
        "{err}"
    );
    assert_eq!(fs::read(&path).unwrap(), original);
    run_expecting(kubelet_config("rollback").arg(&path).arg("--force"), 0);
    assert_eq!(fs::read(&path).unwrap(), edited);
}

/// `show` on a file the kubelet would refuse exits 1 and says why on stderr.
#[test]
fn show_of_an_invalid_file_exits_1() {
    let (dir, _) = staged("kubeadm-config.yaml");
    let bad = dir.path().join("bad.yaml");
    fs::write(
        &bad,
        "kind: KubeletConfiguration\ntopologyManagerPolicy: strict\n",
    )
    .unwrap();
    let out = run_expecting(kubelet_config("show").arg(&bad), 1);
    assert!(out.stderr.contains("\"strict\""), "{}", out.stderr);
}

/// With -o json, errors are a JSON document on stdout too; OS errors are not repeated.
#[test]
fn json_output_errors_are_json() {
    let out = run_expecting(
        kubelet_config("show")
            .args(["-o", "json"])
            .arg("/nonexistent/config.yaml"),
        2,
    );
    let v = json(&out.stdout);
    let e = v["error"].as_str().unwrap();
    assert!(e.contains("/nonexistent/config.yaml"), "{e}");
    assert_eq!(
        out.stderr.matches("No such file").count(),
        1,
        "{}",
        out.stderr
    );
}

/// Changing cpuManagerPolicy without --remove-cpu-manager-state warns on stderr.
#[test]
fn cpu_policy_change_warns_about_the_checkpoint() {
    let (_dir, path) = staged("kubeadm-config.yaml");
    let out = run_expecting(kubelet_config("set").arg(&path).args(SEED_000), 0);
    assert!(
        out.stderr
            .contains("warning: cpuManagerPolicy changes none -> static")
            && out.stderr.contains("cpu_manager_state"),
        "{}",
        out.stderr
    );
}
