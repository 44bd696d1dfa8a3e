//! A fleet as its nodes' labels, read from `kubectl get nodes -o yaml` (a `List` or
//! `NodeList`), a single `Node`, or a YAML stream of Nodes.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Node;

use topoalign_fabric::{DocumentError, field_path};

use crate::error::GangError;

/// One node of a fleet: its name and labels.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FleetNode {
    /// Node name.
    pub name: String,
    /// Its labels.
    pub labels: BTreeMap<String, String>,
}

/// Reads the nodes of `text`; `file` names it in errors. Objects of other kinds in a
/// stream are skipped; a Node without a name is an error.
pub fn parse_nodes(text: &str, file: &str) -> Result<Vec<FleetNode>, GangError> {
    let docs: Vec<serde_json::Value> =
        serde_saphyr::from_multiple(text).map_err(|source| DocumentError::Syntax {
            file: file.to_string(),
            source: Box::new(source),
        })?;
    let mut out = Vec::new();
    for (d, doc) in docs.iter().enumerate() {
        let items: Vec<(String, &serde_json::Value)> = match doc["items"].as_array() {
            Some(items) => items
                .iter()
                .enumerate()
                .map(|(i, v)| (format!("[{d}].items[{i}]"), v))
                .collect(),
            None => vec![(format!("[{d}]"), doc)],
        };
        for (path, item) in items {
            if item["kind"].as_str() != Some("Node") {
                continue;
            }
            let node: Node =
                serde_path_to_error::deserialize(item).map_err(|e| DocumentError::Shape {
                    file: file.to_string(),
                    path: format!("{path}.{}", field_path(e.path())),
                    source: e.into_inner(),
                })?;
            let Some(name) = node.metadata.name else {
                return Err(GangError::Field {
                    file: file.to_string(),
                    field: format!("{path}.metadata.name"),
                    why: "a Node without a name".into(),
                });
            };
            out.push(FleetNode {
                name,
                labels: node.metadata.labels.unwrap_or_default(),
            });
        }
    }
    if out.is_empty() {
        return Err(GangError::Field {
            file: file.to_string(),
            field: ".".into(),
            why: "no Node in the file (expected `kubectl get nodes -o yaml` output)".into(),
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_lists_streams_and_refuses_nothing_useful() {
        let list = "apiVersion: v1\nkind: List\nitems:\n- kind: Node\n  metadata: {name: a, labels: {x: '1'}}\n- kind: Pod\n  metadata: {name: p}\n";
        let n = parse_nodes(list, "n.yaml").unwrap();
        assert_eq!(n.len(), 1);
        assert_eq!(n[0].labels["x"], "1");
        let stream = "kind: Node\nmetadata: {name: a}\n---\nkind: Node\nmetadata: {name: b}\n";
        assert_eq!(parse_nodes(stream, "n.yaml").unwrap().len(), 2);
        let e = parse_nodes("kind: Pod\n", "n.yaml").unwrap_err();
        assert!(e.to_string().contains("no Node"), "{e}");
        let e = parse_nodes("kind: Node\nmetadata: {labels: {x: 1}}\n", "n.yaml").unwrap_err();
        assert!(
            e.to_string().starts_with("n.yaml: [0].metadata.labels.x"),
            "{e}"
        );
    }
}
