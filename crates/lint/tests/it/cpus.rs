//! CPUs on the DRA path: Guaranteed containers whose GPUs come from DRA without CPUs of
//! dra-driver-cpu, and the static CPU manager where dra-driver-cpu runs.

use std::path::Path;

use topoalign_kube_types::kubelet_settings::Settings;
use topoalign_lint::{Finding, LintContext, NodePolicy, Severity, lint_text};
use topoalign_topology::Topology;

fn read(file: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(file);
    std::fs::read_to_string(path).unwrap()
}

fn ctx<'a>(topo: &'a Topology, settings: Option<&'a Settings>) -> LintContext<'a> {
    LintContext {
        topology: topo,
        policy: NodePolicy::Restricted,
        pod_scope: false,
        kubelet_config: Some("/etc/kubernetes/kubelet-config.json"),
        settings,
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
fn guaranteed_cpus_beside_dra_gpus_are_warned_with_the_fix() {
    let topo = topoalign_profiles::get("dgx-h100").unwrap();
    let fs = lint_text("dra-cpus.yaml", &read("dra-cpus.yaml"), &ctx(&topo, None));
    assert_eq!(
        of_rule(&fs, "dra-cpus-unaligned"),
        [
            (
                "Pod/blind-cpus",
                "spec.containers[0].resources.limits.cpu",
                Severity::Warning
            ),
            (
                "Pod/extended-pairs",
                "spec.containers[0].resources.limits.cpu",
                Severity::Warning
            ),
        ],
        "{fs:#?}"
    );
    let rule = |object: &str| {
        (fs.iter())
            .find(|f| f.object == object && f.rule == "dra-cpus-unaligned")
            .unwrap()
    };
    let blind = rule("Pod/blind-cpus");
    for part in [
        "the claim pairs-4",
        "takes no hints from DRA devices",
        "--cpus 16",
        "dra-driver-cpu",
    ] {
        assert!(blind.message.contains(part), "{part}: {}", blind.message);
    }
    let ext = rule("Pod/extended-pairs");
    assert!(
        ext.message.contains("topoalign.dev/gpu-nic-pair"),
        "{}",
        ext.message
    );
    // No static CPU manager in the configuration: the claim with CPUs is fine, and the
    // extended resource is not mistaken for a device plugin's GPU by the other rules.
    assert!(
        of_rule(&fs, "cpu-manager-with-dra-cpu")
            .iter()
            .all(|(o, ..)| o.starts_with("Node/"))
    );
    assert!(
        !fs.iter()
            .any(|f| f.object == "Pod/extended-pairs" && f.rule != "dra-cpus-unaligned"),
        "{fs:#?}"
    );
}

#[test]
fn the_static_cpu_manager_beside_dra_driver_cpu_is_an_error() {
    let topo = topoalign_profiles::get("dgx-h100").unwrap();
    let cfg = serde_json::json!({"cpuManagerPolicy": "static", "reservedSystemCPUs": "0"});
    let settings = Settings::from_kubelet_config(&cfg).unwrap();
    let fs = lint_text(
        "dra-cpus.yaml",
        &read("dra-cpus.yaml"),
        &ctx(&topo, Some(&settings)),
    );
    assert_eq!(
        of_rule(&fs, "cpu-manager-with-dra-cpu"),
        [
            (
                "ResourceClaimTemplate/pairs-4-cpus-16",
                "spec.spec.devices.requests[1]",
                Severity::Error
            ),
            (
                "Node/gpu-1",
                "metadata.labels[topoalign.dev/cpu-manager-policy]",
                Severity::Error
            ),
        ],
        "{fs:#?}"
    );
    let f = fs
        .iter()
        .find(|f| f.rule == "cpu-manager-with-dra-cpu")
        .unwrap();
    assert!(
        f.message.contains(
            "kubelet-config set /etc/kubernetes/kubelet-config.json --cpu-manager-policy none"
        ),
        "{}",
        f.message
    );
}
