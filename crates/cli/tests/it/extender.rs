//! `topoalign extender`: synthetic Nodes, offline decisions, and a clear failure when no
//! API server can be reached.

use crate::common::*;

const POD: &str = r#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","namespace":"ml"},
"spec":{"containers":[{"name":"m","resources":{"limits":{"amd.com/gpu":4,"nvidia.com/sriov-rdma-vf":4}}}]}}"#;

#[test]
fn nodes_are_reproducible_and_decide_reads_them_back() {
    let a = stdout_of(&[
        "extender", "nodes", "--count", "9", "--seed", "5", "-o", "json",
    ]);
    let b = stdout_of(&[
        "extender", "nodes", "--count", "9", "--seed", "5", "-o", "json",
    ]);
    assert_eq!(a, b);
    let list = json(&a);
    assert_eq!(list["kind"], "List");
    let items = list["items"].as_array().unwrap();
    assert_eq!(items.len(), 9);
    assert_eq!(
        items[0]["metadata"]["labels"]["topoalign.dev/profile"],
        "mi300x-8"
    );
    let dir = tempfile::tempdir().unwrap();
    let nodes = write_file(dir.path(), "nodes.json", &a);
    let pod = write_file(dir.path(), "pod.json", POD);
    let out = run(topoalign()
        .args(["extender", "decide", "--nodes"])
        .arg(&nodes)
        .arg("--pod")
        .arg(&pod)
        .args(["-o", "json"]));
    let results = json(&out.stdout);
    let results = results.as_array().unwrap();
    assert_eq!(results.len(), 9);
    // NVIDIA nodes cannot give AMD GPUs; every mi300x decision names its reason.
    for r in results {
        if r["passes"] == false {
            assert!(!r["reason"].as_str().unwrap().is_empty(), "{r}");
        }
    }
    assert_eq!(
        out.code,
        if results.iter().any(|r| r["passes"] == true) {
            0
        } else {
            1
        }
    );
}

#[test]
fn bad_input_names_what_is_wrong() {
    let out = run_args(&["extender", "nodes", "--profiles", "mi400x"]);
    assert_ne!(out.code, 0);
    assert!(out.stderr.contains("mi400x"), "{}", out.stderr);
    let out = run_args(&["extender", "nodes", "--policies", "strict"]);
    assert_ne!(out.code, 0);
    assert!(out.stderr.contains("strict"), "{}", out.stderr);
    let dir = tempfile::tempdir().unwrap();
    let nodes = write_file(dir.path(), "nodes.json", r#"{"kind":"Pod"}"#);
    let pod = write_file(dir.path(), "pod.json", POD);
    let out = run(topoalign()
        .args(["extender", "decide", "--nodes"])
        .arg(&nodes)
        .arg("--pod")
        .arg(&pod));
    assert_ne!(out.code, 0);
    assert!(out.stderr.contains("expected a v1 List"), "{}", out.stderr);
}

#[test]
fn serving_without_a_reachable_api_server_fails_clearly() {
    let dir = tempfile::tempdir().unwrap();
    let kc = write_file(
        dir.path(),
        "kubeconfig",
        "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: https://127.0.0.1:9\ncontexts:\n- name: c\n  context:\n    cluster: c\n    user: u\ncurrent-context: c\nusers:\n- name: u\n  user:\n    token: t\n",
    );
    let out = run(topoalign()
        .args(["extender", "--listen", "127.0.0.1:0", "--kubeconfig"])
        .arg(&kc));
    assert_ne!(out.code, 0);
    assert!(out.stderr.contains("access to Nodes"), "{}", out.stderr);
}
