//! End-to-end lint of realistic manifests against the built-in profiles.

use std::path::Path;

use topoalign_lint::{Finding, LintContext, NodePolicy, Severity, lint_text};
use topoalign_topology::Topology;

fn profile(name: &str) -> Topology {
    topoalign_profiles::get(name).unwrap()
}

fn lint(file: &str, topo: &Topology, policy: NodePolicy) -> Vec<Finding> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(file);
    let text = std::fs::read_to_string(&path).unwrap();
    let ctx = LintContext {
        topology: topo,
        policy,
        pod_scope: false,
        kubelet_config: None,
        settings: None,
        topology_manager: Some(&topoalign_tm::admit_on_empty_node),
    };
    lint_text(file, &text, &ctx)
}

fn rules(fs: &[Finding]) -> Vec<(usize, &str, &'static str, Severity)> {
    fs.iter()
        .map(|f| (f.document, f.object.as_str(), f.rule, f.severity))
        .collect()
}

#[test]
fn seed_000_pod_under_each_policy() {
    let mi = profile("mi300x-8");
    let none = lint("seed000-topology-test.yaml", &mi, NodePolicy::None);
    assert_eq!(
        rules(&none),
        [(1, "Pod/topology-test", "policy-none", Severity::Warning)]
    );
    assert!(none[0].message.contains("topoalign kubelet-config set"));
    let best = lint("seed000-topology-test.yaml", &mi, NodePolicy::BestEffort);
    assert_eq!(
        rules(&best),
        [(1, "Pod/topology-test", "gpu-nic-qos", Severity::Warning)]
    );
    let restricted = lint("seed000-topology-test.yaml", &mi, NodePolicy::Restricted);
    assert_eq!(
        rules(&restricted),
        [(1, "Pod/topology-test", "gpu-nic-qos", Severity::Error)]
    );
    assert_eq!(restricted[0].path, "spec.containers[0].resources.limits");
    assert!(restricted[0].message.contains("no cpu limit"));
}

#[test]
fn mi300x_workloads() {
    let mi = profile("mi300x-8");
    let snn = lint("mi300x-workloads.yaml", &mi, NodePolicy::SingleNumaNode);
    assert_eq!(
        rules(&snn),
        [
            (2, "Job/train-8x8", "single-numa-capacity", Severity::Error),
            (3, "StatefulSet/kv-cache", "gpu-nic-qos", Severity::Error),
            (4, "Service/vllm", "unknown-kind", Severity::Info),
        ]
    );
    assert_eq!(
        snn[0].path,
        "spec.template.spec.containers[0].resources.limits"
    );
    assert!(
        snn[0].message.contains("at most 4 GPUs"),
        "{}",
        snn[0].message
    );
    assert!(snn[1].message.contains("1500m differs from its limit 2"));
    // Under restricted the kubelet's merge rejects 8 GPUs + 8 VFs (the VFs fit one NUMA
    // node, the GPUs need two, so the merged hint is not preferred): lint says what `tm`
    // says, never "admitted".
    let restricted = lint("mi300x-workloads.yaml", &mi, NodePolicy::Restricted);
    assert_eq!(
        (restricted[0].rule, restricted[0].severity),
        ("topology-admission", Severity::Error)
    );
    assert!(
        restricted[0].message.contains("rejects this pod")
            && restricted[0].message.contains("TopologyAffinityError")
            && restricted[0]
                .message
                .contains("NUMA nodes {0,1}, is not preferred"),
        "{}",
        restricted[0].message
    );
    assert!(
        restricted
            .iter()
            .all(|f| !f.message.contains("admitted under"))
    );
    // best-effort admits it on both NUMA nodes, as the kubelet does.
    let best = lint("mi300x-workloads.yaml", &mi, NodePolicy::BestEffort);
    assert!(
        best[0]
            .message
            .contains("spans NUMA nodes {0,1} (the kubelet admits it under best-effort"),
        "{}",
        best[0].message
    );
}

#[test]
fn a_list_is_linted_item_by_item() {
    let mi = profile("mi300x-8");
    let text = std::fs::read_to_string(format!(
        "{}/tests/fixtures/mi300x-workloads.yaml",
        env!("CARGO_MANIFEST_DIR")
    ))
    .unwrap();
    let plain: Vec<serde_json::Value> = serde_saphyr::from_multiple(&text).unwrap();
    let list = serde_json::json!({"apiVersion": "v1", "kind": "List", "items": plain});
    let ctx = LintContext {
        topology: &mi,
        policy: NodePolicy::SingleNumaNode,
        pod_scope: false,
        kubelet_config: None,
        settings: None,
        topology_manager: Some(&topoalign_tm::admit_on_empty_node),
    };
    let f = lint_text("list.json", &list.to_string(), &ctx);
    let got: Vec<(&str, &str)> = f.iter().map(|x| (x.object.as_str(), x.rule)).collect();
    assert_eq!(
        got,
        [
            ("Job/train-8x8", "single-numa-capacity"),
            ("StatefulSet/kv-cache", "gpu-nic-qos"),
            ("Service/vllm", "unknown-kind"),
        ]
    );
    assert_eq!(
        f[0].path,
        "items[1].spec.template.spec.containers[0].resources.limits"
    );
}

#[test]
fn pod_scope_sums_containers() {
    let mi = profile("mi300x-8");
    let text = "kind: Pod\nmetadata: {name: two}\nspec:\n  containers:\n  - name: a\n    resources: {limits: {amd.com/gpu: 3}}\n  - name: b\n    resources: {limits: {amd.com/gpu: 3}}\n";
    let ctx = |pod_scope| LintContext {
        topology: &mi,
        policy: NodePolicy::SingleNumaNode,
        pod_scope,
        kubelet_config: None,
        settings: None,
        topology_manager: Some(&topoalign_tm::admit_on_empty_node),
    };
    assert!(lint_text("x", text, &ctx(false)).is_empty());
    let pod = lint_text("x", text, &ctx(true));
    assert_eq!(pod.len(), 1);
    assert_eq!(pod[0].path, "spec");
    assert!(pod[0].message.starts_with("6 × amd.com/gpu"));
}

#[test]
fn mig_slices() {
    let mi = profile("mi300x-8");
    let f = lint("mig.yaml", &mi, NodePolicy::Restricted);
    assert_eq!(
        rules(&f),
        [(1, "CronJob/nightly-eval", "mig-multi", Severity::Warning)]
    );
    assert_eq!(
        f[0].path,
        "spec.jobTemplate.spec.template.spec.containers[0].resources.limits"
    );
    assert!(f[0].message.contains("3 MIG slices") && f[0].message.contains("peer-to-peer"));
}

#[test]
fn seed_001_claim_templates_on_gb300() {
    let gb = profile("gb300-4");
    let f = lint("gb300-claims.yaml", &gb, NodePolicy::None);
    assert_eq!(
        rules(&f),
        [
            (
                1,
                "ResourceClaimTemplate/1nic-aligned",
                "dra-pinned-pair",
                Severity::Info
            ),
            (
                2,
                "ResourceClaimTemplate/2nic-aligned",
                "dra-pinned-pair",
                Severity::Info
            ),
            (
                3,
                "ResourceClaimTemplate/1nic-unaligned",
                "dra-pinned-pair",
                Severity::Warning
            ),
            (
                5,
                "ResourceClaimTemplate/gpu-nic-same-root",
                "dra-pcieroot-unsatisfiable",
                Severity::Error
            ),
            (
                6,
                "ResourceClaimTemplate/gpu-nic-first-fit",
                "dra-no-alignment",
                Severity::Warning
            ),
        ]
    );
    assert!(f[0].message.contains("path NODE"), "{}", f[0].message);
    assert!(f[2].message.contains("mlx5_2") && f[2].message.contains("path SYS"));
    assert_eq!(f[3].path, "spec.spec.devices.constraints[0].matchAttribute");
}

#[test]
fn pcie_root_match_is_fine_where_gpus_and_nics_share_roots() {
    let dgx = profile("dgx-h100");
    let text = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/gb300-claims.yaml"),
    )
    .unwrap();
    let ctx = LintContext {
        topology: &dgx,
        policy: NodePolicy::None,
        pod_scope: false,
        kubelet_config: None,
        settings: None,
        topology_manager: Some(&topoalign_tm::admit_on_empty_node),
    };
    let f = lint_text("gb300-claims.yaml", &text, &ctx);
    assert!(
        !f.iter().any(|x| x.rule == "dra-pcieroot-unsatisfiable"),
        "{f:?}"
    );
}

#[test]
fn mpijob_worker_is_guaranteed_and_launcher_has_no_devices() {
    let gb = profile("gb300-4");
    assert!(lint("gb300-mpijob.yaml", &gb, NodePolicy::Restricted).is_empty());
}

#[test]
fn broken_documents_are_reported_and_the_rest_is_linted() {
    let mi = profile("mi300x-8");
    let f = lint("broken.yaml", &mi, NodePolicy::Restricted);
    assert_eq!(
        rules(&f),
        [
            (2, "?/kindless", "no-kind", Severity::Error),
            (3, "?", "malformed-yaml", Severity::Error),
            (
                4,
                "Pod/after-the-broken-one",
                "gpu-nic-qos",
                Severity::Error
            ),
        ]
    );
    assert!(
        f[1].message.contains("line 16 column 18"),
        "{}",
        f[1].message
    );
    assert_eq!(f[1].line, 15);
}

/// `amd.com/gpu: lots`, `cpu: "-1"` and `memory: 1.5` used to pass; each is an error at the
/// line of its field (the YAML parser's location), with the field path.
#[test]
fn invalid_quantities_are_errors_at_their_line() {
    let mi = profile("mi300x-8");
    let f = lint("invalid-quantities.yaml", &mi, NodePolicy::Restricted);
    let bad: Vec<(&str, usize)> = f
        .iter()
        .filter(|x| x.rule == "invalid-quantity")
        .map(|x| (x.path.as_str(), x.line))
        .collect();
    assert_eq!(
        bad,
        [
            ("spec.containers[0].resources.limits[\"amd.com/gpu\"]", 12),
            ("spec.containers[0].resources.limits.cpu", 13),
            ("spec.containers[0].resources.limits.memory", 14),
        ]
    );
    assert!(f.iter().all(|x| x.severity == Severity::Error), "{f:?}");
    let msg = &f[0].message;
    assert!(msg.contains("`lots` is not a quantity"), "{msg}");
    assert!(
        f[2].message.contains("whole number of bytes"),
        "{}",
        f[2].message
    );
}

/// More GPUs than the whole node has: an error under every policy, not a NUMA warning.
#[test]
fn more_gpus_than_the_node_has_is_an_error() {
    let mi = profile("mi300x-8");
    for policy in [NodePolicy::None, NodePolicy::BestEffort] {
        let f = lint("invalid-quantities.yaml", &mi, policy);
        let cap: Vec<&Finding> = f.iter().filter(|x| x.rule == "node-capacity").collect();
        assert_eq!(cap.len(), 1, "{f:?}");
        assert_eq!((cap[0].document, cap[0].severity), (2, Severity::Error));
        assert!(cap[0].message.contains("only 8 GPUs"), "{}", cap[0].message);
        assert_eq!(cap[0].line, 25);
    }
}

/// The suggested fix must run as printed: the static CPU manager needs reserved CPUs.
#[test]
fn suggested_command_has_reserved_cpus_and_a_real_path() {
    let mi = profile("mi300x-8");
    let none = lint("seed000-topology-test.yaml", &mi, NodePolicy::None);
    let msg = &none[0].message;
    assert!(
        msg.contains("kubelet-config set /var/lib/kubelet/config.yaml ")
            && msg.contains("--cpu-manager-policy static --reserved-cpus 0,"),
        "{msg}"
    );
}

/// A value the API types refuse (`cpu: true`) is an error at its own line and field path,
/// and the rest of the object is still checked.
#[test]
fn a_value_the_api_types_refuse_is_located_and_the_rest_still_checked() {
    let text = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\nspec:\n  containers:\n  - name: c\n    resources:\n      limits:\n        cpu: true\n        amd.com/gpu: 16\n";
    let mi = profile("mi300x-8");
    let ctx = LintContext {
        topology: &mi,
        policy: NodePolicy::BestEffort,
        pod_scope: false,
        kubelet_config: None,
        settings: None,
        topology_manager: Some(&topoalign_tm::admit_on_empty_node),
    };
    let fs = lint_text("p.yaml", text, &ctx);
    let bad = fs.iter().find(|f| f.rule == "invalid-quantity").unwrap();
    assert_eq!(
        (bad.line, bad.path.as_str(), bad.severity),
        (
            10,
            "spec.containers[0].resources.limits.cpu",
            Severity::Error
        )
    );
    assert!(bad.message.contains("boolean"), "{}", bad.message);
    assert!(fs.iter().any(|f| f.rule == "node-capacity"), "{fs:?}");
}

/// A Deployment whose template is not a pod template is one error at the field.
#[test]
fn a_wrongly_shaped_workload_is_an_invalid_field() {
    let text = "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: d\nspec:\n  selector: {}\n  template:\n    spec:\n      containers: nope\n";
    let mi = profile("mi300x-8");
    let ctx = LintContext {
        topology: &mi,
        policy: NodePolicy::None,
        pod_scope: false,
        kubelet_config: None,
        settings: None,
        topology_manager: Some(&topoalign_tm::admit_on_empty_node),
    };
    let fs = lint_text("d.yaml", text, &ctx);
    assert_eq!(fs.len(), 1, "{fs:?}");
    assert_eq!(
        (fs[0].rule, fs[0].line, fs[0].path.as_str()),
        ("invalid-field", 9, "spec.template.spec.containers")
    );
}

/// What `topoalign claims` writes, linted: the ladder's constraints pair each GPU request
/// with its own NIC request (no warning for requests that do not belong together), and a
/// claim no node of the kind can satisfy is an error.
#[test]
fn claims_written_by_topoalign_are_judged_by_the_allocator_model() {
    use topoalign_dra::claim::{ClaimShape, ClaimSpec, claim_template};
    let lint_claim = |spec: &ClaimSpec, topo: &topoalign_topology::Topology| {
        let t = claim_template(spec).unwrap();
        let ctx = LintContext {
            topology: topo,
            policy: NodePolicy::Restricted,
            pod_scope: false,
            kubelet_config: None,
            settings: None,
            topology_manager: Some(&topoalign_tm::admit_on_empty_node),
        };
        lint_text("claim.json", &serde_json::to_string(&t).unwrap(), &ctx)
    };
    let mi = profile("mi300x-8");
    let ladder = ClaimSpec {
        shape: ClaimShape::Ladder,
        ..ClaimSpec::pairs(2)
    };
    assert_eq!(lint_claim(&ladder, &mi), []);
    assert_eq!(lint_claim(&ClaimSpec::pairs(8), &mi), []);
    let nine = lint_claim(&ClaimSpec::pairs(9), &mi);
    assert_eq!(
        rules(&nine),
        [(
            1,
            "ResourceClaimTemplate/gpu-nic-pairs-9",
            "dra-unsatisfiable",
            Severity::Error
        )]
    );
    let pix = ClaimSpec {
        max_rank: Some(topoalign_topology::PcieClass::Pix.rank()),
        ..ClaimSpec::pairs(2)
    };
    let gb = profile("gb300-4");
    let f = lint_claim(&pix, &gb);
    assert_eq!(f.len(), 1, "{f:?}");
    assert!(
        f[0].message.contains("best GPU–NIC pair is NODE"),
        "{}",
        f[0].message
    );
    assert_eq!(lint_claim(&pix, &mi), []);
}
