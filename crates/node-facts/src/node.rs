//! The Node's side: the labels it carries now and which of them a field manager owns
//! (from `managedFields`), and the server-side apply that writes a manager's labels.
//! Applying only `metadata.labels` under the writer's own field manager changes only the
//! labels that manager owns: a key it wrote before and leaves out now is removed, labels
//! of every other manager stay as they are.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::Node;
use kube::Client;
use kube::api::{Api, Patch, PatchParams};
use serde_json::{Value, json};

/// A Node's labels, and those among them a given field manager owns.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ManagedLabels {
    /// Every label of the node now.
    pub labels: BTreeMap<String, String>,
    /// The keys the field manager wrote (its own, free to change or drop).
    pub owned: BTreeSet<String>,
}

impl ManagedLabels {
    /// The labels of `node` and the keys `manager` owns there.
    pub fn of(node: &Node, manager: &str) -> Self {
        ManagedLabels {
            labels: node.metadata.labels.clone().unwrap_or_default(),
            owned: owned_labels(node, manager),
        }
    }
}

/// The keys among a Node's labels that `manager` owns, from its `managedFields`
/// (`fieldsV1` `f:metadata` → `f:labels` → `f:<key>`).
pub fn owned_labels(node: &Node, manager: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for entry in node.metadata.managed_fields.iter().flatten() {
        if entry.manager.as_deref() != Some(manager) {
            continue;
        }
        let Some(fields) = &entry.fields_v1 else {
            continue;
        };
        if let Some(labels) = fields
            .0
            .pointer("/f:metadata/f:labels")
            .and_then(Value::as_object)
        {
            out.extend(
                labels
                    .keys()
                    .filter_map(|k| k.strip_prefix("f:"))
                    .map(str::to_string),
            );
        }
    }
    out
}

/// Reads the Node `node` once: its labels and those `manager` owns.
pub async fn read_node_labels(
    client: &Client,
    node: &str,
    manager: &str,
) -> Result<ManagedLabels, kube::Error> {
    let api: Api<Node> = Api::all(client.clone());
    let n = api.get(node).await?;
    Ok(ManagedLabels::of(&n, manager))
}

/// The apply body that sets exactly `labels` on `node` for one field manager: a Node with
/// its name and labels, nothing else (what `--dry-run` shows is what is applied).
pub fn label_patch(node: &str, labels: &BTreeMap<String, String>) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": node, "labels": labels},
    })
}

/// Applies `labels` to the Node `node` by server-side apply as `manager` (forced: the
/// caller has left out every level another manager labels): only the labels this manager
/// owns change.
pub async fn apply_labels(
    client: &Client,
    node: &str,
    manager: &str,
    labels: &BTreeMap<String, String>,
) -> Result<(), kube::Error> {
    let api: Api<Node> = Api::all(client.clone());
    let pp = PatchParams::apply(manager).force();
    api.patch(node, &pp, &Patch::Apply(&label_patch(node, labels)))
        .await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    #[test]
    fn owned_labels_come_from_the_managers_fields() {
        let node: Node = serde_json::from_value(serde_json::json!({
            "metadata": {
                "name": "n1",
                "labels": {"a.io/x": "1", "fabric.topograph.run/tier-0": "leaf-1"},
                "managedFields": [
                    {"manager": "topoalign-agent", "operation": "Apply", "fieldsType": "FieldsV1",
                     "fieldsV1": {"f:metadata": {"f:labels": {"f:fabric.topograph.run/tier-0": {}}}}},
                    {"manager": "kubelet", "operation": "Update", "fieldsType": "FieldsV1",
                     "fieldsV1": {"f:metadata": {"f:labels": {"f:a.io/x": {}}}}}
                ]
            }
        }))
        .unwrap();
        assert_eq!(
            owned_labels(&node, "topoalign-agent"),
            BTreeSet::from(["fabric.topograph.run/tier-0".to_string()])
        );
        let seen = ManagedLabels::of(&node, "topoalign.dev");
        assert_eq!(seen.labels.len(), 2);
        assert!(seen.owned.is_empty(), "another manager owns nothing here");
    }

    #[test]
    fn the_patch_holds_the_name_and_the_labels_only() {
        let labels = BTreeMap::from([("nvidia.com/gpu.clique".to_string(), "u.1".to_string())]);
        let p = label_patch("n1", &labels);
        assert_eq!(
            p,
            json!({"apiVersion": "v1", "kind": "Node",
                   "metadata": {"name": "n1", "labels": {"nvidia.com/gpu.clique": "u.1"}}})
        );
        // An empty set is still a patch: it drops every label the manager owned.
        assert_eq!(
            label_patch("n1", &BTreeMap::new())["metadata"]["labels"],
            json!({})
        );
    }
}
