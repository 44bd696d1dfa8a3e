//! MIG sets in device-plugin clusters: Pending forever, unknown profiles, the geometry
//! that would hold a set, unreadable GFD labels.

use topoalign_lint::{Finding, LintContext, NodePolicy, Severity, lint_text};
use topoalign_topology::Topology;

fn lint(text: &str, topo: &Topology) -> Vec<Finding> {
    let ctx = LintContext {
        topology: topo,
        policy: NodePolicy::None,
        pod_scope: false,
        kubelet_config: None,
        settings: None,
        topology_manager: Some(&topoalign_tm::admit_on_empty_node),
    };
    lint_text("m.yaml", text, &ctx)
}

fn mig_findings(fs: &[Finding]) -> Vec<(&str, &'static str, Severity)> {
    fs.iter()
        .filter(|f| f.rule.starts_with("mig"))
        .map(|f| (f.object.as_str(), f.rule, f.severity))
        .collect()
}

fn pod(name: &str, limits: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\nspec:\n  containers:\n  - name: c\n    image: x\n    resources:\n      limits:\n{limits}"
    )
}

fn h100_node(name: &str, gpus: u32, counts: &[(&str, u32)], strategy: &str) -> String {
    let mut labels = format!(
        "    nvidia.com/mig.strategy: {strategy}\n    nvidia.com/gpu.product: NVIDIA-H100-80GB-HBM3\n    nvidia.com/gpu.count: \"{gpus}\"\n"
    );
    for (p, c) in counts {
        labels.push_str(&format!("    nvidia.com/mig-{p}.count: \"{c}\"\n"));
    }
    format!("apiVersion: v1\nkind: Node\nmetadata:\n  name: {name}\n  labels:\n{labels}")
}

fn amd() -> Topology {
    topoalign_profiles::get("mi300x-8").unwrap()
}

#[test]
fn a_set_no_node_can_ever_hold_is_pending_forever() {
    // Seed 004: three 4g on nodes of one GPU each: the cluster has the slices, no node does.
    let text = [
        h100_node("a", 1, &[("4g.40gb", 1)], "mixed"),
        h100_node("b", 1, &[("4g.40gb", 1)], "mixed"),
        pod("big", "        nvidia.com/mig-4g.40gb: 3\n"),
    ]
    .join("---\n");
    let f = lint(&text, &amd());
    assert_eq!(
        mig_findings(&f),
        [("Pod/big", "mig-pending-forever", Severity::Error)]
    );
    let m = &f[0].message;
    assert!(m.contains("3 × nvidia.com/mig-4g.40gb"), "{m}");
    assert!(
        m.contains("node a: no geometry of 1 × h100-80gb holds 3 × 4g.40gb"),
        "{m}"
    );
    assert_eq!(f[0].path, "spec.containers[0].resources.limits");
}

#[test]
fn a_set_that_needs_a_new_geometry_gets_the_commands() {
    let text = [
        h100_node("a", 2, &[("1g.10gb", 14)], "mixed"),
        pod(
            "two",
            "        nvidia.com/mig-3g.40gb: 2\n        nvidia.com/mig-1g.10gb: 1\n",
        ),
    ]
    .join("---\n");
    let f = lint(&text, &amd());
    assert_eq!(
        mig_findings(&f),
        [("Pod/two", "mig-geometry", Severity::Warning)]
    );
    let m = &f[0].message;
    assert!(
        m.contains("no node offers it now") && m.contains("a geometry of node a"),
        "{m}"
    );
    assert!(m.contains("nvidia-smi mig -i 0 -cgi 9:0 -C"), "{m}");
    assert!(m.contains("-cgi 19:"), "{m}");
    // Where the node offers the set now, nothing is said.
    let text = [
        h100_node("a", 2, &[("3g.40gb", 2), ("1g.10gb", 2)], "mixed"),
        pod(
            "two",
            "        nvidia.com/mig-3g.40gb: 2\n        nvidia.com/mig-1g.10gb: 1\n",
        ),
    ]
    .join("---\n");
    assert_eq!(mig_findings(&lint(&text, &amd())), []);
}

#[test]
fn a_profile_the_model_lacks_is_named_with_the_known_ones() {
    let text = [
        h100_node("a", 8, &[("1g.10gb", 7)], "mixed"),
        pod("b200-shaped", "        nvidia.com/mig-2g.45gb: 1\n"),
    ]
    .join("---\n");
    let f = lint(&text, &amd());
    assert_eq!(
        mig_findings(&f),
        [
            ("Pod/b200-shaped", "mig-unknown-profile", Severity::Error),
            ("Pod/b200-shaped", "mig-pending-forever", Severity::Error)
        ]
    );
    assert!(f[0].message.contains("`2g.45gb` for h100-80gb") && f[0].message.contains("2g.20gb"));
}

#[test]
fn the_topology_is_a_node_of_its_gpu_model() {
    let dgx = topoalign_profiles::get("dgx-h100").unwrap();
    let f = lint(&pod("p", "        nvidia.com/mig-7g.80gb: 9\n"), &dgx);
    assert_eq!(
        mig_findings(&f),
        [("Pod/p", "mig-pending-forever", Severity::Error)]
    );
    assert!(
        f[0].message
            .contains("the topology `dgx-h100` (8 × h100-80gb)"),
        "{}",
        f[0].message
    );
    let f = lint(&pod("p", "        nvidia.com/mig-7g.80gb: 2\n"), &dgx);
    assert_eq!(
        mig_findings(&f),
        [("Pod/p", "mig-geometry", Severity::Info)]
    );
    assert!(
        f[0].message.contains("nvidia-smi mig -i 1 -cgi 0:0 -C"),
        "{}",
        f[0].message
    );
}

#[test]
fn unreadable_labels_are_errors_on_the_node() {
    let bad = "apiVersion: v1\nkind: Node\nmetadata:\n  name: gpu-1\n  labels:\n    nvidia.com/mig.strategy: mixed\n    nvidia.com/mig-1g.10gb.count: lots\n";
    let f = lint(bad, &amd());
    assert_eq!(
        mig_findings(&f),
        [("Node/gpu-1", "mig-node-labels", Severity::Error)]
    );
    assert!(
        f[0].message
            .contains("nvidia.com/mig-1g.10gb.count=\"lots\""),
        "{}",
        f[0].message
    );
    let bad = "apiVersion: v1\nkind: Node\nmetadata:\n  name: gpu-1\n  labels:\n    nvidia.com/mig.strategy: sometimes\n";
    let f = lint(bad, &amd());
    assert!(
        f[0].message.contains("single, mixed or none"),
        "{}",
        f[0].message
    );
}

#[test]
fn without_mig_nodes_several_slices_keep_the_general_warning() {
    let f = lint(&pod("p", "        nvidia.com/mig-1g.10gb: 2\n"), &amd());
    assert_eq!(
        mig_findings(&f),
        [("Pod/p", "mig-multi", Severity::Warning)]
    );
}

/// A single-strategy A100-40GB node of `gpus` GPUs as GFD labels it: the product carries
/// `-MIG-<profile>`, allocatable `nvidia.com/gpu` counts instances.
fn single_node(name: &str, profile: &str, instances: u32) -> String {
    format!(
        "apiVersion: v1\nkind: Node\nmetadata:\n  name: {name}\n  labels:\n    nvidia.com/mig.strategy: single\n    nvidia.com/mig.capable: \"true\"\n    nvidia.com/gpu.product: NVIDIA-A100-SXM4-40GB-MIG-{profile}\n    nvidia.com/gpu.count: \"{instances}\"\nstatus:\n  allocatable:\n    nvidia.com/gpu: \"{instances}\"\n"
    )
}

#[test]
fn under_the_single_strategy_a_gpu_count_is_a_count_of_instances() {
    // Two nodes of 7 × 1g.5gb: 8 × nvidia.com/gpu fits neither, ever.
    let nodes = [single_node("a", "1g.5gb", 7), single_node("b", "1g.5gb", 7)];
    let text = [
        nodes[0].clone(),
        nodes[1].clone(),
        pod("eight", "        nvidia.com/gpu: 8\n"),
        pod("four", "        nvidia.com/gpu: 4\n"),
    ]
    .join("---\n");
    let f = lint(&text, &amd());
    assert_eq!(
        mig_findings(&f),
        [
            ("Pod/eight", "mig-pending-forever", Severity::Error),
            ("Pod/four", "mig-single-strategy", Severity::Info),
        ]
    );
    let m = &f
        .iter()
        .find(|x| x.rule == "mig-pending-forever")
        .unwrap()
        .message;
    assert!(
        m.contains("8 × nvidia.com/gpu") && m.contains("node a: single strategy with 7 × 1g.5gb"),
        "{m}"
    );
    let m = &f
        .iter()
        .find(|x| x.rule == "mig-single-strategy")
        .unwrap()
        .message;
    assert!(m.contains("node a (1g.5gb), node b (1g.5gb)"), "{m}");

    // A node with whole GPUs, or a lint topology with 8 NVIDIA GPUs, can hold it.
    let plain = "apiVersion: v1\nkind: Node\nmetadata:\n  name: g\nstatus:\n  allocatable:\n    nvidia.com/gpu: \"8\"\n";
    let with_plain = format!("{text}---\n{plain}");
    assert!(mig_findings(&lint(&with_plain, &amd())).is_empty());
    let dgx = topoalign_profiles::get("dgx-a100-mig").unwrap();
    assert!(mig_findings(&lint(&text, &dgx)).is_empty());
}

#[test]
fn a_node_resource_topology_naming_mig_resources_is_a_mig_source() {
    // Only the NRT shows node n's MIG devices; the Node's labels name the model.
    let nrt = "apiVersion: topology.node.k8s.io/v1alpha2\nkind: NodeResourceTopology\nmetadata:\n  name: gpu-n\nzones:\n- name: node-0\n  type: Node\n  resources:\n  - {name: nvidia.com/mig-4g.40gb, capacity: \"1\", allocatable: \"1\", available: \"1\"}\n- name: node-1\n  type: Node\n  resources:\n  - {name: nvidia.com/mig-4g.40gb, capacity: \"1\", allocatable: \"1\", available: \"0\"}\n";
    let node = "apiVersion: v1\nkind: Node\nmetadata:\n  name: gpu-n\n  labels:\n    nvidia.com/gpu.product: NVIDIA-H100-80GB-HBM3\n    nvidia.com/gpu.count: \"2\"\n";
    let three = pod("three", "        nvidia.com/mig-4g.40gb: 3\n");
    let two = pod("two", "        nvidia.com/mig-4g.40gb: 2\n");
    // NRT first or Node first: the same judgement.
    for order in [[nrt, node], [node, nrt]] {
        let text = [order[0], order[1], &three, &two].join("---\n");
        let f = lint(&text, &amd());
        assert_eq!(
            mig_findings(&f),
            [("Pod/three", "mig-pending-forever", Severity::Error)],
            "{f:?}"
        );
        let m = &f
            .iter()
            .find(|x| x.rule == "mig-pending-forever")
            .unwrap()
            .message;
        assert!(
            m.contains("node gpu-n: no geometry of 2 × h100-80gb"),
            "{m}"
        );
    }
    // A profile the NRT names but the model lacks.
    let bad = nrt.replace("4g.40gb", "4g.20gb");
    let text = [&bad, node, &pod("x", "        nvidia.com/mig-1g.10gb: 1\n")].join("---\n");
    let f = lint(&text, &amd());
    assert!(
        f.iter().any(|x| x.rule == "mig-node-labels"
            && x.message
                .contains("NodeResourceTopology gpu-n resource nvidia.com/mig-4g.20gb")
            && x.message.contains("4g.40gb")),
        "{f:?}"
    );
}
