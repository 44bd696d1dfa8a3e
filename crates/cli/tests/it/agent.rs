//! `topoalign agent`: clear errors without a node name or a kubelet socket.

use crate::common::*;

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

#[test]
fn a_metrics_address_in_use_is_named() {
    // The port is held by this test; the kubeconfig names an API server that is never
    // reached (the address is bound before anything is read or written).
    let busy = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = busy.local_addr().unwrap().to_string();
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    std::fs::write(
        &kubeconfig,
        "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster: {server: 'https://127.0.0.1:1'}\n\
         users:\n- name: u\n  user: {token: t}\ncontexts:\n- name: x\n  context: {cluster: c, user: u}\n\
         current-context: x\n",
    )
    .unwrap();
    let out = run(topoalign()
        .args([
            "agent",
            "--profile",
            "mi300x-8",
            "--node",
            "n1",
            "--metrics-addr",
            &addr,
        ])
        .arg("--kubeconfig")
        .arg(&kubeconfig)
        .arg("--socket")
        .arg(dir.path().join("kubelet.sock")));
    assert_ne!(out.code, 0);
    assert!(
        out.stderr.contains(&format!("--metrics-addr {addr}")),
        "{}",
        out.stderr
    );
    drop(busy);
}

/// The node's fabric facts are read at start: a bad domain file, a truncated
/// `nvidia-smi -q` and a rail source that does not fit stop the agent before anything is
/// read or written, each naming its flag or file and the field.
#[test]
fn bad_fabric_facts_are_named_before_the_kubelet_is_read() {
    let dir = tempfile::tempdir().unwrap();
    let domains = write_file(
        dir.path(),
        "domains.yaml",
        "labels: {fabric.topograph.run/tier-0: leaf-1, network.topology.nvidia.com/leaf: leaf-2}\n",
    );
    let query = write_file(
        dir.path(),
        "q.txt",
        "Attached GPUs : 2\nGPU 00000000:1B:00.0\n",
    );
    let rails = write_file(dir.path(), "rails.yaml", "rails: 8\nnics: {mlx5_99: 0}\n");
    let cases = [
        ("--domains", domains, "conflicts with"),
        ("--fabric-from", query, "truncated"),
        ("--rails", rails, "mlx5_99"),
    ];
    for (flag, file, why) in cases {
        let out = run(topoalign()
            .args(["agent", "--profile", "dgx-h100", "--node", "n1", "--once"])
            .arg(flag)
            .arg(&file)
            .arg("--socket")
            .arg(dir.path().join("absent.sock")));
        assert_eq!(out.code, 2, "{flag}: {}", out.stderr);
        let name = file.file_name().unwrap().to_str().unwrap();
        assert!(
            out.stderr.contains(name) && out.stderr.contains(why),
            "{flag}: {}",
            out.stderr
        );
        assert!(!out.stderr.contains("absent.sock"), "{}", out.stderr);
    }
}
