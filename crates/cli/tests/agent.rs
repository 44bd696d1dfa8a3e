//! `topoalign agent`: clear errors without a node name or a kubelet socket.

#![allow(clippy::unwrap_used)]

mod common;

use common::*;

#[test]
fn once_without_a_kubelet_socket_names_the_socket() {
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("kubelet.sock");
    let out = run(topoalign()
        .args([
            "agent",
            "--profile",
            "mi300x-8",
            "--node",
            "n1",
            "--once",
            "-o",
            "json",
            "--socket",
        ])
        .arg(&sock));
    assert_ne!(out.code, 0);
    assert!(out.stderr.contains("kubelet.sock"), "{}", out.stderr);
    assert!(
        json(&out.stdout)["error"]
            .as_str()
            .unwrap()
            .contains("pod-resources"),
        "{}",
        out.stdout
    );
}

#[test]
fn a_node_name_is_required() {
    let out =
        run(topoalign()
            .env_remove("NODE_NAME")
            .args(["agent", "--profile", "mi300x-8", "--once"]));
    assert_ne!(out.code, 0);
    assert!(out.stderr.contains("--node"), "{}", out.stderr);
}
