//! CPUs on the DRA path (REFERENCE §14). The kubelet's DRA manager is no Topology Manager
//! hint provider: a Guaranteed container's exclusive CPUs (static CPU manager) ignore
//! where its DRA devices sit (kubernetes/website#56232). The CPUs must then come from
//! kubernetes-sigs/dra-driver-cpu in the same claim, matched on the NUMA attribute; and
//! that driver refuses to run beside the CPU manager (`cpuManagerPolicy: none`, its
//! docs/user/configuration.md, "Kubelet configuration prerequisites").
//!
//! - `dra-cpus-unaligned` (warning): a Guaranteed container with whole exclusive CPUs
//!   whose GPUs come from DRA (a claim the input holds, or an extended resource a
//!   DeviceClass backs) while no claim of it asks for CPUs.
//! - `cpu-manager-with-dra-cpu` (error): the node's kubelet runs the static CPU manager
//!   (its KubeletConfiguration, `--kubelet-config`, or a Node's
//!   `topoalign.dev/cpu-manager-policy` label) where dra-driver-cpu must run (a claim asks
//!   for its CPUs, or the Node has its ResourceSlices).

use k8s_openapi::api::core::v1::Node;
use topoalign_kube_types::kubelet_settings::CpuPolicy;
use topoalign_kube_types::labels::CPU_POLICY_LABEL;

use crate::claim_rules::ClaimSpec;
use crate::cluster::{ClaimRef, Cluster};
use crate::finding::{LintContext, RawFinding, Severity};
use crate::pod_rules::containers;
use crate::resources::{ResourceKind, classify};
use crate::workloads::PodSpecAt;

/// Where to read what to do.
const SEE: &str = "see deploy/README.md, CPUs on the DRA path";

/// The fix for the CPU manager: what dra-driver-cpu needs.
fn policy_fix(ctx: &LintContext<'_>) -> String {
    let file = ctx.kubelet_config.unwrap_or("/var/lib/kubelet/config.yaml");
    format!(
        "dra-driver-cpu refuses to run beside the kubelet's CPU manager and needs `cpuManagerPolicy: none` \
         (`topoalign kubelet-config set {file} --cpu-manager-policy none \
         --remove-cpu-manager-state`, then restart the kubelet); {SEE}"
    )
}

/// The GPU-like extended resources of a container that a DeviceClass backs.
fn dra_gpu_resources(names: impl Iterator<Item = String>, cluster: &Cluster) -> Vec<String> {
    names
        .filter(|n| {
            let lower = n.to_ascii_lowercase();
            let backed = classify(n) == ResourceKind::Dra || cluster.extended.contains_key(n);
            let gpu_class = cluster.extended.get(n).is_some_and(|c| c.contains("gpu"));
            backed
                && (gpu_class || lower.contains("gpu") || lower.contains("/mig-"))
                && !lower.ends_with("/nic")
        })
        .collect()
}

/// Lints one pod spec of an object in `namespace`.
pub(crate) fn lint_pod_cpus(
    pod: &PodSpecAt,
    namespace: Option<&str>,
    cluster: &Cluster,
) -> Vec<RawFinding> {
    let claims = pod.spec.resource_claims.iter().flatten();
    let refs: Vec<(String, Option<(ClaimRef, &str)>)> = claims
        .map(|rc| {
            let target = match (&rc.resource_claim_template_name, &rc.resource_claim_name) {
                (Some(t), _) => Some((ClaimRef::Template, t.as_str())),
                (None, Some(c)) => Some((ClaimRef::Claim, c.as_str())),
                (None, None) => None,
            };
            (rc.name.clone(), target)
        })
        .collect();
    let lookup = |name: &str| {
        let (_, target) = refs.iter().find(|(n, _)| n == name)?;
        let (by, claim) = (*target)?;
        Some((claim, cluster.dra_claim(by, claim, namespace)?))
    };
    let mut out = Vec::new();
    // `containers` lists init containers first, as the spec's lists are chained here.
    let specs = (pod.spec.init_containers.iter().flatten()).chain(pod.spec.containers.iter());
    for (c, k8s) in containers(pod).iter().zip(specs) {
        if c.init || c.resources.guaranteed_problem().is_some() {
            continue;
        }
        let used: Vec<&str> = (k8s.resources.as_ref())
            .and_then(|r| r.claims.as_ref())
            .into_iter()
            .flatten()
            .map(|c| c.name.as_str())
            .collect();
        let known: Vec<(&str, _)> = used.iter().filter_map(|n| lookup(n)).collect();
        let extended = dra_gpu_resources(c.resources.limits.keys().cloned(), cluster);
        let gpu_claims: Vec<&str> = (known.iter())
            .filter(|(_, k)| k.gpus)
            .map(|(n, _)| *n)
            .collect();
        if gpu_claims.is_empty() && extended.is_empty() {
            continue;
        }
        if known.iter().any(|(_, k)| k.cpus.is_some()) {
            continue;
        }
        let cpus = c.resources.limits.get("cpu").map_or("", |q| q.0.as_str());
        let from = match (gpu_claims.as_slice(), extended.as_slice()) {
            ([], e) => format!(
                "the extended resource {} (a DeviceClass backs it)",
                e.join(", ")
            ),
            (g, _) => format!("the claim {}", g.join(", ")),
        };
        out.push(RawFinding {
            path: format!("{}.resources.limits.cpu", c.path),
            severity: Severity::Warning,
            rule: "dra-cpus-unaligned",
            message: format!(
                "Guaranteed with {cpus} exclusive CPUs and its GPUs from {from}: the kubelet's \
                 Topology Manager takes no hints from DRA devices, so the static CPU manager pins \
                 these CPUs without regard to the GPUs' NUMA node (often the other socket; \
                 kubernetes/website#56232); take them from kubernetes-sigs/dra-driver-cpu in the \
                 same claim, each GPU's on its NUMA node: `topoalign claims --pairs N --cpus {cpus}` \
                 (those nodes then run `cpuManagerPolicy: none`); {SEE}"
            ),
        });
    }
    out
}

/// Lints one claim spec: a CPU request where the node's kubelet (its configuration) runs
/// the static CPU manager.
pub(crate) fn lint_claim_cpus(
    path: &str,
    spec: &ClaimSpec,
    ctx: &LintContext<'_>,
) -> Vec<RawFinding> {
    let static_policy = ctx
        .settings
        .is_some_and(|s| s.cpu_manager_policy == CpuPolicy::Static);
    let Some(r) = spec
        .requests
        .iter()
        .find(|r| r.cpu)
        .filter(|_| static_policy)
    else {
        return Vec::new();
    };
    vec![RawFinding {
        path: format!("{path}.devices.requests[{}]", r.index),
        severity: Severity::Error,
        rule: "cpu-manager-with-dra-cpu",
        message: format!(
            "request {:?} asks CPUs of dra-driver-cpu, and the node's kubelet configuration sets \
             `cpuManagerPolicy: static`: {}",
            r.name,
            policy_fix(ctx)
        ),
    }]
}

/// Lints one Node: labelled as running the static CPU manager while dra-driver-cpu
/// publishes its CPUs.
pub(crate) fn lint_node_cpus(
    node: &Node,
    cluster: &Cluster,
    ctx: &LintContext<'_>,
) -> Vec<RawFinding> {
    let name = node.metadata.name.as_deref().unwrap_or("?");
    let label = (node.metadata.labels.as_ref()).and_then(|l| l.get(CPU_POLICY_LABEL));
    if label.map(String::as_str) != Some("static") || !cluster.cpu_driver_nodes.contains(name) {
        return Vec::new();
    }
    vec![RawFinding {
        path: format!("metadata.labels[{CPU_POLICY_LABEL}]"),
        severity: Severity::Error,
        rule: "cpu-manager-with-dra-cpu",
        message: format!(
            "node {name} runs the static CPU manager ({CPU_POLICY_LABEL}=static) and dra-driver-cpu \
             publishes its CPUs: {}",
            policy_fix(ctx)
        ),
    }]
}
