//! `topoalign tm` end to end.

use crate::common::{Outcome, json, run, run_expecting, subcommand, write_file};
use assert_cmd::Command;

/// `topoalign tm`, ready for arguments.
fn tm() -> Command {
    subcommand("tm")
}

/// Runs `cmd` and returns (exit code, stderr).
fn stderr_of(cmd: &mut Command) -> (i32, String) {
    let Outcome { code, stderr, .. } = run(cmd);
    (code, stderr)
}

#[test]
fn restricted_four_plus_four_is_admitted_on_one_node_with_the_seed_gap() {
    let mut cmd = tm();
    cmd.args([
        "--profile",
        "mi300x-8",
        "--policy",
        "restricted",
        "--gpus",
        "4",
        "--nics",
        "4",
    ])
    .args([
        "--option",
        "prefer-closest-numa-nodes=true",
        "--format",
        "json",
    ]);
    let v = json(&run_expecting(&mut cmd, 0).stdout);
    assert_eq!(v["admitted"], true);
    assert_eq!(v["numaNodesUsed"], serde_json::json!([0]));
    let classes: Vec<&str> = v["pairs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["class"].as_str().unwrap())
        .collect();
    assert_eq!(classes, ["PIX", "NODE", "NODE", "NODE"]);
    assert_eq!(v["merges"][0]["best"]["affinity"], serde_json::json!([0]));
}

#[test]
fn single_numa_node_rejects_eight_plus_eight_with_exit_1() {
    let mut cmd = tm();
    cmd.args([
        "--profile",
        "mi300x-8",
        "--policy",
        "single-numa-node",
        "--gpus",
        "8",
        "--nics",
        "8",
    ]);
    let text = run_expecting(&mut cmd, 1).stdout;
    assert!(text.contains("REJECTED  TopologyAffinityError"), "{text}");
}

#[test]
fn matrix_prints_the_seed_rows() {
    let text = run_expecting(
        tm().args(["--matrix", "--profile", "mi300x-8", "--draws", "50"]),
        0,
    )
    .stdout;
    assert!(text.contains("Forces single-NUMA"), "{text}");
    assert!(text.contains("Allows cross-NUMA"), "{text}");
    assert!(
        text.contains("Rejects pod (TopologyAffinityError)"),
        "{text}"
    );
    assert!(text.contains("No alignment — random"), "{text}");
}

#[test]
fn pod_manifest_kubelet_config_and_used_files() {
    let dir = tempfile::tempdir().unwrap();
    let pod = write_file(
        dir.path(),
        "pod.yaml",
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: t\nspec:\n  containers:\n  - name: c\n    resources:\n      limits:\n        amd.com/gpu: 2\n        nvidia.com/sriov-rdma-vf: 2\n        cpu: \"4\"\n        memory: 8Gi\n",
    );
    let cfg = write_file(
        dir.path(),
        "kubelet.json",
        r#"{"topologyManagerPolicy": "restricted", "cpuManagerPolicy": "static", "kubeReserved": {"cpu": "637m"}}"#,
    );
    let used = write_file(
        dir.path(),
        "used.json",
        r#"{"gpus": ["0000:11:00.0", "0000:2f:00.0", "0000:46:00.0"], "cpus": "0-3"}"#,
    );
    let mut cmd = tm();
    cmd.args(["--profile", "mi300x-8", "--format", "json"])
        .arg("--pod")
        .arg(&pod)
        .arg("--kubelet-config")
        .arg(&cfg)
        .arg("--used")
        .arg(&used);
    let v = json(&run_expecting(&mut cmd, 0).stdout);
    assert_eq!(v["qos"], "Guaranteed");
    assert_eq!(
        v["numaNodesUsed"],
        serde_json::json!([1]),
        "only one GPU left on NUMA 0"
    );
    let cpus: topoalign_topology::CpuSet = v["allocations"][0]["cpus"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    assert_eq!(cpus.len(), 4);
    assert!(
        cpus.ids()
            .iter()
            .all(|c| (56..112).contains(c) || *c >= 168),
        "{cpus}"
    );
}

#[test]
fn input_case_file() {
    let dir = tempfile::tempdir().unwrap();
    let case = write_file(
        dir.path(),
        "case.json",
        r#"{"profile": "mi300x-8", "settings": {"topologyManagerPolicy": "restricted"},
            "pod": {"kind": "Pod", "spec": {"containers": [{"name": "c", "resources": {"limits": {"amd.com/gpu": 8, "example.com/vf": 8}}}]}},
            "resources": {"example.com/vf": "vfs:1"}, "seed": 3}"#,
    );
    let mut cmd = tm();
    cmd.arg("--input").arg(&case).args(["--format", "json"]);
    let v = json(&run_expecting(&mut cmd, 0).stdout);
    assert_eq!(v["numaNodesUsed"], serde_json::json!([0, 1]));
}

#[test]
fn bad_input_is_a_clear_error_with_exit_2() {
    let (rc, err) =
        stderr_of(tm().args(["--profile", "mi300x-8", "--policy", "strict", "--gpus", "1"]));
    assert_eq!(rc, 2);
    assert!(err.contains("unknown policy `strict`"), "{err}");

    let (rc, err) =
        stderr_of(tm().args(["--profile", "mi300x-8", "--cpus", "2x", "--memory", "1Gi"]));
    assert_eq!(rc, 2);
    assert!(err.contains("--cpus") && err.contains("2x"), "{err}");

    let (rc, err) = stderr_of(tm().args([
        "--profile",
        "mi300x-8",
        "--gpus",
        "1",
        "--gpu-resource",
        "example.com/thing",
    ]));
    assert_eq!(rc, 2);
    assert!(
        err.contains("unknown resource `example.com/thing`"),
        "{err}"
    );

    let out = run(tm().args([
        "--profile",
        "mi300x-8",
        "--policy",
        "single-numa-node",
        "--option",
        "prefer-closest-numa-nodes=true",
        "--gpus",
        "1",
    ]));
    // The kubelet accepts prefer-closest-numa-nodes with single-numa-node and ignores
    // it: the simulator admits too and warns.
    assert_eq!(out.code, 0, "{}", out.stderr);
    let text = &out.stdout;
    assert!(
        text.contains("has no effect with policy `single-numa-node`"),
        "{text}"
    );

    let (rc, err) = stderr_of(tm().args([
        "--profile",
        "mi300x-8",
        "--policy",
        "restricted",
        "--option",
        "max-allowable-numa-nodes=2",
        "--gpus",
        "1",
    ]));
    assert_eq!(rc, 2);
    assert!(err.contains("max-allowable-numa-nodes"), "{err}");

    let dir = tempfile::tempdir().unwrap();
    let pod = write_file(
        dir.path(),
        "pod.yaml",
        "spec:\n  containers:\n  - name: c\n    resources:\n      limits:\n        memory: 64Gb\n",
    );
    let (rc, err) = stderr_of(tm().args(["--profile", "mi300x-8"]).arg("--pod").arg(&pod));
    assert_eq!(rc, 2);
    assert!(
        err.contains("spec.containers[0].resources.limits.memory"),
        "{err}"
    );

    let used = write_file(dir.path(), "used.json", r#"{"gpus": ["0000:99:00.0"]}"#);
    let (rc, err) = stderr_of(
        tm().args(["--profile", "mi300x-8", "--gpus", "1"])
            .arg("--used")
            .arg(&used),
    );
    assert_eq!(rc, 2);
    assert!(err.contains("usage.gpus[0]"), "{err}");
}

/// The differential test's entry point: one JSON result per case line, in order.
#[test]
fn merge_cases_reads_json_lines_and_names_bad_lines() {
    let dir = tempfile::tempdir().unwrap();
    let cases = write_file(
        dir.path(),
        "cases.jsonl",
        concat!(
            r#"{"id":"none","policy":"none","scope":"pod","options":{"bogus":"x"},"numaNodes":[0,1],"distances":[[10,20],[20,10]],"providers":[{"gpu":[{"affinity":[0],"preferred":true}]}]}"#,
            "\n",
            r#"{"id":"ws","policy":"restricted","scope":"container","options":{"max-allowable-numa-nodes":" 16"},"numaNodes":[0,1],"providers":[]}"#,
            "\n",
            r#"{"id":"r","policy":"restricted","scope":"container","numaNodes":[0,1],"providers":[{"a":[{"affinity":[0],"preferred":true}]},{"b":[{"affinity":[1],"preferred":true}]}]}"#,
            "\n"
        ),
    );
    let out = run_expecting(
        tm().args(["merge-cases", "-o", "json", "--input"])
            .arg(&cases),
        0,
    );
    let v = json(&out.stdout);
    assert_eq!(
        v,
        serde_json::json!([
            {"id": "none", "error": null, "affinity": null, "preferred": false, "admit": true},
            {"id": "ws", "error": v[1]["error"], "affinity": null, "preferred": false, "admit": false},
            {"id": "r", "error": null, "affinity": [0, 1], "preferred": false, "admit": false},
        ])
    );
    assert!(
        v[1]["error"]
            .as_str()
            .unwrap()
            .contains("max-allowable-numa-nodes")
    );
    let bad = write_file(
        dir.path(),
        "bad.jsonl",
        "\n{\"id\":\"x\",\"policy\":\"none\"}\n",
    );
    let out = run(tm().args(["merge-cases", "--input"]).arg(&bad));
    assert_eq!(out.code, 2);
    assert!(out.stderr.contains("line 2: scope"), "{}", out.stderr);
    assert!(json(&out.stdout)["error"].as_str().is_some());
}

/// `--draws 0` used to print "admitted 1/1"; `--gpus -1` gets a clear message.
#[test]
fn bounds_on_draws_and_counts() {
    let (rc, err) = stderr_of(tm().args(["--matrix", "--draws", "0"]));
    assert_eq!(rc, 2);
    assert!(
        err.contains("--draws") && err.contains("at least 1"),
        "{err}"
    );
    let (rc, err) = stderr_of(tm().args(["--profile", "mi300x-8", "--gpus", "-1"]));
    assert_eq!(rc, 2);
    assert!(err.contains("not a device count from 0 to 4096"), "{err}");
}
