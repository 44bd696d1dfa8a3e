//! Nodes (`kubectl get nodes -o yaml`) where topoalign's DRA driver runs beside a device
//! plugin that still advertises the same GPUs or RDMA NICs as extended resources: the
//! scheduler would hand each GPU out twice, once per mechanism.

use k8s_openapi::api::core::v1::Node;

use crate::cluster::Cluster;
use crate::finding::{RawFinding, Severity};
use crate::located::child_path;
use crate::resources::{ApiList, ResourceKind, classify, count};

/// The node label that schedules topoalign's driver DaemonSet (`deploy/daemonset.yaml`,
/// the chart's default `nodeSelector`).
pub(crate) const DRIVER_NODE_LABEL: &str = "topoalign.dev/gpu-node";

/// What to remove for an extended resource, and how.
fn plugin_of(resource: &str) -> &'static str {
    let lower = resource.to_ascii_lowercase();
    if lower == "nvidia.com/gpu" || lower.starts_with("nvidia.com/mig-") {
        "the NVIDIA GPU device plugin (its DaemonSet, or the GPU Operator's `devicePlugin.enabled=false`)"
    } else if lower == "amd.com/gpu" {
        "the AMD GPU device plugin (its DaemonSet, or the AMD GPU Operator's device plugin)"
    } else if lower.starts_with("rdma/") || lower.contains("shared") {
        "the RDMA shared device plugin (its DaemonSet, or the NVIDIA Network Operator's `rdmaSharedDevicePlugin`)"
    } else if classify(resource) == ResourceKind::Gpu {
        "the device plugin that advertises it"
    } else {
        "the SR-IOV network device plugin's resource pool for these NICs (its `resourceList` entry)"
    }
}

/// Why the node counts as running topoalign's driver, if it does.
fn driver_evidence(node: &Node, name: &str, cluster: &Cluster) -> Option<String> {
    let labelled = node
        .metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(DRIVER_NODE_LABEL))
        .is_some_and(|v| v == "true");
    if labelled {
        Some(format!(
            "is labelled {DRIVER_NODE_LABEL}=true (topoalign's DRA driver runs there)"
        ))
    } else if cluster.driver_nodes.contains(name) {
        Some("has ResourceSlices of topoalign's DRA driver".to_string())
    } else {
        None
    }
}

/// Lints one Node: an error per GPU, MIG or RDMA/SR-IOV extended resource it still
/// advertises (non-zero in `status.allocatable`, else in `status.capacity`) while
/// topoalign's driver runs on it. A node without a status advertises nothing.
pub(crate) fn lint_node(node: &Node, cluster: &Cluster) -> Vec<RawFinding> {
    let name = node.metadata.name.as_deref().unwrap_or("?");
    let Some(why) = driver_evidence(node, name, cluster) else {
        return Vec::new();
    };
    let Some(status) = node.status.as_ref() else {
        return Vec::new();
    };
    let empty = ApiList::new();
    let lists = [
        (
            "status.allocatable",
            status.allocatable.as_ref().unwrap_or(&empty),
        ),
        (
            "status.capacity",
            status.capacity.as_ref().unwrap_or(&empty),
        ),
    ];
    let mut out: Vec<RawFinding> = Vec::new();
    let mut seen: Vec<&str> = Vec::new();
    for (field, list) in lists {
        for (resource, q) in list {
            let kind = classify(resource);
            if matches!(kind, ResourceKind::Other | ResourceKind::Dra)
                || seen.contains(&resource.as_str())
            {
                continue;
            }
            // A count of 0 is a plugin already gone (the kubelet keeps the name); an
            // amount that is not a whole number is still something advertised.
            let amount = match count(q) {
                Some(0) => continue,
                Some(n) => n.to_string(),
                None => format!("`{}`", q.0),
            };
            seen.push(resource);
            out.push(RawFinding {
                path: child_path(field, resource),
                severity: Severity::Error,
                rule: "device-plugin-conflict",
                message: format!(
                    "node `{name}` {why} but still advertises {amount} × {resource} in {field}: the device plugin \
                     and the driver hand out the same devices, so one can be given twice; remove {}, then check \
                     again with `kubectl get nodes -o yaml | topoalign lint -` (see deploy/README.md)",
                    plugin_of(resource),
                ),
            });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn node(labels: serde_json::Value, status: serde_json::Value) -> Node {
        serde_json::from_value(
            json!({"metadata": {"name": "gpu-1", "labels": labels}, "status": status}),
        )
        .unwrap()
    }

    #[test]
    fn a_labelled_node_with_gpu_and_rdma_resources_is_an_error_per_plugin() {
        let n = node(
            json!({DRIVER_NODE_LABEL: "true"}),
            json!({"allocatable": {"cpu": "190", "nvidia.com/gpu": "8", "rdma/rdma_shared_device_a": "1k",
                                   "openshift.io/mlnx_sriov_rdma": "0"},
                   "capacity": {"nvidia.com/gpu": "8", "amd.com/gpu": "4", "openshift.io/mlnx_sriov_rdma": "16"}}),
        );
        let f = lint_node(&n, &Cluster::default());
        let paths: Vec<&str> = f.iter().map(|f| f.path.as_str()).collect();
        assert_eq!(
            paths,
            [
                "status.allocatable[\"nvidia.com/gpu\"]",
                "status.allocatable[\"rdma/rdma_shared_device_a\"]",
                "status.capacity[\"amd.com/gpu\"]",
                "status.capacity[\"openshift.io/mlnx_sriov_rdma\"]",
            ],
            "{f:?}"
        );
        assert!(f.iter().all(|f| f.severity == Severity::Error));
        assert!(
            f[0].message.contains("devicePlugin.enabled=false"),
            "{}",
            f[0].message
        );
        assert!(f[0].message.contains("`gpu-1`"));
        assert!(f[1].message.contains("RDMA shared device plugin"));
        assert!(f[2].message.contains("AMD GPU device plugin"));
        assert!(f[3].message.contains("SR-IOV network device plugin"));
    }

    #[test]
    fn a_node_with_topoalign_slices_counts_and_others_are_left_alone() {
        let status = json!({"allocatable": {"nvidia.com/gpu": 8}});
        let unlabelled = node(json!({}), status.clone());
        assert!(lint_node(&unlabelled, &Cluster::default()).is_empty());
        let mut c = Cluster::default();
        c.driver_nodes.insert("gpu-1".into());
        let f = lint_node(&unlabelled, &c);
        assert_eq!(f.len(), 1);
        assert!(f[0].message.contains("ResourceSlices"));
        let other_value = node(json!({DRIVER_NODE_LABEL: "false"}), status);
        assert!(lint_node(&other_value, &Cluster::default()).is_empty());
    }

    #[test]
    fn no_status_or_nothing_advertised_is_fine() {
        let labels = json!({DRIVER_NODE_LABEL: "true"});
        let bare: Node =
            serde_json::from_value(json!({"metadata": {"name": "n", "labels": labels}})).unwrap();
        assert!(lint_node(&bare, &Cluster::default()).is_empty());
        let clean = node(
            labels,
            json!({"allocatable": {"cpu": "8", "nvidia.com/gpu": "0"}}),
        );
        assert!(lint_node(&clean, &Cluster::default()).is_empty());
    }
}
