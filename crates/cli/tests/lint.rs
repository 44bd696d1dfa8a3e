#![allow(clippy::unwrap_used, clippy::expect_used)]
//! `topoalign lint` end to end.

use std::path::{Path, PathBuf};

use assert_cmd::Command;

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../lint/tests/fixtures")
        .join(name)
}

fn topoalign() -> Command {
    Command::cargo_bin("topoalign").unwrap()
}

#[test]
fn warnings_only_exit_0_unless_warnings_as_errors() {
    let out = topoalign()
        .arg("lint")
        .arg(fixture("seed000-topology-test.yaml"))
        .assert()
        .code(0)
        .get_output()
        .stdout
        .clone();
    let text = String::from_utf8(out).unwrap();
    assert!(
        text.contains("Pod/topology-test spec: warning [policy-none]"),
        "{text}"
    );
    assert!(text.contains("0 error(s), 1 warning(s)"), "{text}");
    topoalign()
        .arg("lint")
        .arg(fixture("seed000-topology-test.yaml"))
        .arg("--warnings-as-errors")
        .assert()
        .code(1);
}

#[test]
fn policy_from_kubelet_config() {
    let kubelet = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../kubelet/tests/golden/kubeadm-config.restricted.yaml");
    let out = topoalign()
        .arg("lint")
        .arg(fixture("seed000-topology-test.yaml"))
        .arg("--kubelet-config")
        .arg(kubelet)
        .args(["-o", "json"])
        .assert()
        .code(1)
        .get_output()
        .stdout
        .clone();
    let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
    assert_eq!(v["policy"], "restricted");
    assert_eq!(v["podScope"], true);
    assert_eq!(v["findings"][0]["rule"], "gpu-nic-qos");
    assert_eq!(v["findings"][0]["severity"], "error");
    assert_eq!(
        v["findings"][0]["path"],
        "spec.containers[0].resources.limits"
    );
}

#[test]
fn gb300_claims_and_stdin() {
    let text = std::fs::read_to_string(fixture("gb300-claims.yaml")).unwrap();
    let out = topoalign()
        .args(["lint", "-", "--profile", "gb300-4", "-o", "json"])
        .write_stdin(text)
        .assert()
        .code(1)
        .get_output()
        .stdout
        .clone();
    let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
    assert_eq!(v["errors"], 1);
    let rules: Vec<&str> = v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["rule"].as_str().unwrap())
        .collect();
    assert!(rules.contains(&"dra-pcieroot-unsatisfiable"));
    assert_eq!(v["findings"][0]["file"], "-");
}

#[test]
fn single_numa_node_rejects_8_plus_8() {
    let out = topoalign()
        .arg("lint")
        .arg(fixture("mi300x-workloads.yaml"))
        .args(["--policy", "single-numa-node"])
        .assert()
        .code(1)
        .get_output()
        .stdout
        .clone();
    let text = String::from_utf8(out).unwrap();
    assert!(text.contains("Job/train-8x8 spec.template.spec.containers[0].resources.limits: error [single-numa-capacity]"), "{text}");
    assert!(text.contains("single-numa-node rejects the pod"), "{text}");
}

#[test]
fn bad_input_is_exit_2() {
    topoalign()
        .args(["lint", "/nonexistent/x.yaml"])
        .assert()
        .code(2);
    topoalign()
        .arg("lint")
        .arg(fixture("broken.yaml"))
        .args(["--policy", "strict"])
        .assert()
        .code(2);
    // Malformed documents are findings (exit 1), not crashes.
    topoalign()
        .arg("lint")
        .arg(fixture("broken.yaml"))
        .assert()
        .code(1);
}
