//! RoCE pods without a network for their NICs, and Nodes where a device plugin still
//! advertises what topoalign's driver hands out: fixtures linted end to end.

use std::path::Path;

use topoalign_lint::{Finding, LintContext, NodePolicy, Severity, lint_text, lint_texts};
use topoalign_topology::Topology;

fn read(file: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(file);
    std::fs::read_to_string(path).unwrap()
}

fn ctx(topo: &Topology) -> LintContext<'_> {
    LintContext {
        topology: topo,
        policy: NodePolicy::Restricted,
        pod_scope: false,
        kubelet_config: None,
        settings: None,
        topology_manager: Some(&topoalign_tm::admit_on_empty_node),
    }
}

fn of_rule<'a>(fs: &'a [Finding], rule: &str) -> Vec<(&'a str, &'a str, Severity)> {
    fs.iter()
        .filter(|f| f.rule == rule)
        .map(|f| (f.object.as_str(), f.path.as_str(), f.severity))
        .collect()
}

#[test]
fn a_roce_pod_without_host_network_or_attachment_is_warned() {
    let mi = topoalign_profiles::get("mi300x-8").unwrap();
    let text = read("roce-pods.yaml");
    let fs = lint_text("roce-pods.yaml", &text, &ctx(&mi));
    assert_eq!(
        of_rule(&fs, "roce-network"),
        [(
            "Deployment/trainer",
            "spec.template.spec.resourceClaims[0]",
            Severity::Warning
        )],
        "{fs:#?}"
    );
    let f = fs.iter().find(|f| f.rule == "roce-network").unwrap();
    assert!(
        f.message.contains("ResourceClaimTemplate `gpu-nic-pairs`"),
        "{}",
        f.message
    );
    assert!(f.message.contains("hostNetwork: true"));
    assert!(f.message.contains("k8s.v1.cni.cncf.io/networks"));
    let line = text.lines().nth(f.line - 1).unwrap();
    assert!(line.contains("- name: devices"), "line {}: {line}", f.line);
}

#[test]
fn a_claim_in_another_file_is_found_when_the_files_are_linted_together() {
    let mi = topoalign_profiles::get("mi300x-8").unwrap();
    let (pods, claim) = (read("roce-pods.yaml"), read("roce-shared-claim.yaml"));
    let together = lint_texts(
        &[
            ("roce-pods.yaml", &pods),
            ("roce-shared-claim.yaml", &claim),
        ],
        &ctx(&mi),
    );
    let roce: Vec<&Finding> = together
        .iter()
        .filter(|f| f.rule == "roce-network")
        .collect();
    assert_eq!(roce.len(), 2, "{roce:#?}");
    assert_eq!(roce[1].object, "Pod/gpus-and-unknown");
    assert_eq!(roce[1].path, "spec.resourceClaims[1]");
    assert!(roce[1].message.contains("ResourceClaim `shared-nics`"));
    assert_eq!(roce[1].file, "roce-pods.yaml");
}

#[test]
fn infiniband_nodes_need_no_pod_network() {
    // gb300-4's ConnectX NICs are InfiniBand: verbs devices are enough.
    let gb = topoalign_profiles::get("gb300-4").unwrap();
    let fs = lint_text("roce-pods.yaml", &read("roce-pods.yaml"), &ctx(&gb));
    assert!(of_rule(&fs, "roce-network").is_empty(), "{fs:#?}");
}

#[test]
fn nodes_advertising_devices_beside_the_driver_are_errors() {
    let mi = topoalign_profiles::get("mi300x-8").unwrap();
    let text = read("nodes.yaml");
    let fs = lint_text("nodes.yaml", &text, &ctx(&mi));
    assert_eq!(
        of_rule(&fs, "device-plugin-conflict"),
        [
            (
                "Node/gpu-a",
                "items[0].status.allocatable[\"nvidia.com/gpu\"]",
                Severity::Error
            ),
            (
                "Node/gpu-a",
                "items[0].status.allocatable[\"rdma/rdma_shared_device_a\"]",
                Severity::Error
            ),
            // Not labelled, but it has topoalign's ResourceSlice.
            (
                "Node/gpu-b",
                "items[1].status.allocatable[\"amd.com/gpu\"]",
                Severity::Error
            ),
            (
                "Node/bad-quantity",
                "status.allocatable[\"openshift.io/mlnx_sriov_rdma\"]",
                Severity::Error
            ),
        ],
        "{fs:#?}"
    );
    let a = fs.iter().find(|f| f.object == "Node/gpu-a").unwrap();
    assert!(a.message.contains("`gpu-a`"));
    assert!(a.message.contains("NVIDIA GPU device plugin"));
    let line = text.lines().nth(a.line - 1).unwrap();
    assert!(
        line.contains("nvidia.com/gpu: \"8\""),
        "line {}: {line}",
        a.line
    );
    // A malformed allocatable is an error at its field, not a panic or silence.
    let bad: Vec<(&str, &str)> = fs
        .iter()
        .filter(|f| f.rule == "invalid-field")
        .map(|f| (f.object.as_str(), f.path.as_str()))
        .collect();
    assert_eq!(
        bad,
        [
            ("Node/malformed", "status.allocatable"),
            (
                "Node/bad-quantity",
                "status.allocatable[\"nvidia.com/gpu\"]"
            ),
        ],
        "{fs:#?}"
    );
    // Nodes and slices are read, not "unknown kinds".
    assert!(fs.iter().all(|f| f.rule != "unknown-kind"), "{fs:#?}");
}
