//! `topoalign webhook`: the offline review of a pod or an AdmissionReview, the name table,
//! and clear errors (a missing file, a bad flag, missing certificates).

use crate::common::*;

const POD: &str = "apiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: dk}\nspec:\n  containers:\n  - name: c\n    image: x\n    resources:\n      limits: {amd.com/gpu: 2, nvidia.com/sriov-rdma-vf: 4}\n";

#[test]
fn review_rewrites_a_pod_and_prints_it_as_the_api_server_would_store_it() {
    let dir = tempfile::tempdir().unwrap();
    let pod = write_file(dir.path(), "pod.yaml", POD);
    let out = run_expecting(
        topoalign()
            .args(["webhook", "review"])
            .arg(&pod)
            .args(["-o", "json"]),
        0,
    );
    let v = json(&out.stdout);
    assert_eq!(v["outcome"], "rewritten");
    let res = &v["pod"]["spec"]["containers"][0]["resources"];
    let want = serde_json::json!({"topoalign.dev/gpu-nic-pair": "2", "topoalign.dev/nic": "2"});
    assert_eq!(res["limits"], want);
    assert_eq!(res["requests"], want);
    assert!(
        v["warnings"][0]
            .as_str()
            .unwrap()
            .contains("not tied to a GPU")
    );
    let table = run_expecting(topoalign().args(["webhook", "review"]).arg(&pod), 0).stdout;
    assert!(table.starts_with("rewritten"), "{table}");
    assert!(table.contains("topoalign.dev/gpu-nic-pair: 2"), "{table}");
}

#[test]
fn a_pod_that_does_not_pair_exits_1_with_the_reason() {
    let dir = tempfile::tempdir().unwrap();
    let pod = write_file(
        dir.path(),
        "pod.yaml",
        &POD.replace("sriov-rdma-vf: 4", "sriov-rdma-vf: 3"),
    );
    let out = run_expecting(topoalign().args(["webhook", "review"]).arg(&pod), 1);
    assert!(out.stdout.starts_with("declined"), "{}", out.stdout);
    assert!(
        out.stdout.contains("2 GPUs and 3 NICs do not pair"),
        "{}",
        out.stdout
    );
}

#[test]
fn an_admission_review_is_answered_as_the_server_answers_it() {
    let dir = tempfile::tempdir().unwrap();
    let review = serde_json::json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "request": {"uid": "u", "kind": {"group": "", "version": "v1", "kind": "Pod"},
            "namespace": "dk", "operation": "CREATE",
            "object": {"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c"}]}}}});
    let f = write_file(dir.path(), "review.json", &review.to_string());
    let out = run_expecting(
        topoalign()
            .args(["webhook", "review"])
            .arg(&f)
            .args(["-o", "json"]),
        0,
    );
    let v = json(&out.stdout);
    assert_eq!(v["outcome"], "untouched");
    assert_eq!(
        v["response"]["response"],
        serde_json::json!({"uid": "u", "allowed": true})
    );
}

#[test]
fn config_prints_the_table_and_bad_input_names_the_flag_or_file() {
    let out = stdout_of(&["webhook", "config", "-o", "json"]);
    let v = json(&out);
    assert_eq!(
        v["gpus"],
        serde_json::json!(["nvidia.com/gpu", "amd.com/gpu"])
    );
    assert_eq!(v["targets"]["pair"], "topoalign.dev/gpu-nic-pair");
    let out = run_expecting(
        topoalign().args(["webhook", "config", "--nic-resource", "sriov vf"]),
        2,
    );
    assert!(
        out.stderr.contains("--nic-resource: `sriov vf`"),
        "{}",
        out.stderr
    );
    let out = run_expecting(
        topoalign().args(["webhook", "review", "/nonexistent/pod.yaml"]),
        2,
    );
    assert!(
        out.stderr.contains("/nonexistent/pod.yaml: cannot read"),
        "{}",
        out.stderr
    );
    let out = run_expecting(
        topoalign().args(["webhook", "review", "/nonexistent/pod.yaml", "-o", "json"]),
        2,
    );
    assert!(
        json(&out.stdout)["error"]
            .as_str()
            .unwrap()
            .contains("cannot read")
    );
}

#[test]
fn the_server_without_its_certificate_says_which_file() {
    let out = run_expecting(
        topoalign().args([
            "webhook",
            "--listen",
            "127.0.0.1:0",
            "--tls-cert",
            "/nonexistent/tls.crt",
            "--tls-key",
            "/nonexistent/tls.key",
        ]),
        2,
    );
    assert!(
        out.stderr
            .contains("error: reading /nonexistent/tls.crt: No such file"),
        "{}",
        out.stderr
    );
}
