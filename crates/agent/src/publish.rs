//! Writing to the API server: the NodeResourceTopology object and the node labels, both
//! by server-side apply under the field manager [`FIELD_MANAGER`].

use std::collections::BTreeMap;

use kube::Client;
use kube::api::{Api, DynamicObject, Patch, PatchParams};
use serde_json::Value;
use topoalign_kube_types::nrt::nrt_resource;

/// The server-side apply field manager of the agent.
pub(crate) const FIELD_MANAGER: &str = "topoalign-agent";

/// Why a write failed.
#[derive(Debug, thiserror::Error)]
pub enum PublishError {
    /// The API server refused the apply.
    #[error("applying {what} for node {node}: {source}")]
    Apply {
        /// What was applied.
        what: &'static str,
        /// The node.
        node: String,
        /// The error.
        source: kube::Error,
    },
}

/// Applies the NodeResourceTopology object (cluster-scoped, named after the node).
pub(crate) async fn apply_nrt(
    client: &Client,
    node: &str,
    object: &Value,
) -> Result<(), PublishError> {
    let api: Api<DynamicObject> = Api::all_with(client.clone(), &nrt_resource());
    let pp = PatchParams::apply(FIELD_MANAGER).force();
    api.patch(node, &pp, &Patch::Apply(object))
        .await
        .map_err(|source| PublishError::Apply {
            what: "NodeResourceTopology",
            node: node.to_string(),
            source,
        })?;
    Ok(())
}

/// Applies the agent's node labels (only the labels this field manager owns change).
pub(crate) async fn apply_labels(
    client: &Client,
    node: &str,
    labels: &BTreeMap<String, String>,
) -> Result<(), PublishError> {
    topoalign_node_facts::apply_labels(client, node, FIELD_MANAGER, labels)
        .await
        .map_err(|source| PublishError::Apply {
            what: "node labels",
            node: node.to_string(),
            source,
        })?;
    Ok(())
}
