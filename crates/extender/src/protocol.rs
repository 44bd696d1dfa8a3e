//! The kube-scheduler extender wire protocol, `k8s.io/kube-scheduler/extender/v1`.
//!
//! The Go structs carry no json tags, so `encoding/json` writes each field under its Go
//! name (`Pod`, `NodeNames`, `FailedAndUnresolvableNodes`, `Host`, `Score`, …), writes
//! nil pointers, maps and slices as `null`, and reads field names case-insensitively.
//! These types write exactly the Go names and every field (as Go does), and read the Go
//! names plus their lower-case spelling.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// `MaxExtenderPriority`: the highest score an extender may give.
pub const MAX_EXTENDER_PRIORITY: i64 = 10;
/// `MinExtenderPriority`.
pub const MIN_EXTENDER_PRIORITY: i64 = 0;

/// `v1.NodeList` as the scheduler sends it when `nodeCacheCapable` is false: only
/// `items[].metadata.name` is read; the items are echoed back untouched.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct NodeList {
    /// `metadata` (kept as sent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Value>,
    /// The nodes, whole.
    #[serde(default)]
    pub items: Vec<Value>,
}

impl NodeList {
    /// The names of the nodes, in order; an item without `metadata.name` is an error
    /// naming its index.
    pub fn names(&self) -> Result<Vec<String>, String> {
        self.items
            .iter()
            .enumerate()
            .map(|(i, n)| {
                n.pointer("/metadata/name")
                    .and_then(Value::as_str)
                    .map(str::to_string)
                    .ok_or_else(|| {
                        format!("Nodes.items[{i}].metadata.name: missing (expected a string)")
                    })
            })
            .collect()
    }
}

/// `ExtenderArgs`: the body of a filter or prioritize call.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ExtenderArgs {
    /// `Pod`: the pod being scheduled (a whole `v1.Pod`).
    #[serde(rename = "Pod", alias = "pod", default)]
    pub pod: Option<Value>,
    /// `Nodes`: candidate nodes, only when `nodeCacheCapable` is false.
    #[serde(rename = "Nodes", alias = "nodes", default)]
    pub nodes: Option<NodeList>,
    /// `NodeNames`: candidate node names, only when `nodeCacheCapable` is true.
    #[serde(
        rename = "NodeNames",
        alias = "nodeNames",
        alias = "nodenames",
        default
    )]
    pub node_names: Option<Vec<String>>,
}

/// `FailedNodesMap`: node name → failure message.
pub type FailedNodesMap = BTreeMap<String, String>;

/// `ExtenderFilterResult`: the answer to a filter call.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ExtenderFilterResult {
    /// `Nodes`: the nodes that pass, when the call carried `Nodes`.
    #[serde(rename = "Nodes", alias = "nodes", default)]
    pub nodes: Option<NodeList>,
    /// `NodeNames`: the names that pass, when the call carried `NodeNames`.
    #[serde(rename = "NodeNames", alias = "nodeNames", default)]
    pub node_names: Option<Vec<String>>,
    /// `FailedNodes`: nodes filtered out that preemption might help.
    #[serde(rename = "FailedNodes", alias = "failedNodes", default)]
    pub failed_nodes: Option<FailedNodesMap>,
    /// `FailedAndUnresolvableNodes`: nodes filtered out that preemption cannot help.
    #[serde(
        rename = "FailedAndUnresolvableNodes",
        alias = "failedAndUnresolvableNodes",
        default
    )]
    pub failed_and_unresolvable_nodes: Option<FailedNodesMap>,
    /// `Error`: a message when the whole call failed ("" otherwise).
    #[serde(rename = "Error", alias = "error", default)]
    pub error: String,
}

/// `HostPriority`: one node's score.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HostPriority {
    /// `Host`: the node name.
    #[serde(rename = "Host", alias = "host")]
    pub host: String,
    /// `Score`: 0 ..= [`MAX_EXTENDER_PRIORITY`].
    #[serde(rename = "Score", alias = "score")]
    pub score: i64,
}

/// `HostPriorityList`.
pub type HostPriorityList = Vec<HostPriority>;

/// Why a request body could not be read.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ArgsError {
    /// Not JSON, or not the `ExtenderArgs` shape.
    #[error("request body is not ExtenderArgs JSON: {0}")]
    Json(String),
    /// No `Pod`.
    #[error("`Pod`: missing (expected the pod being scheduled)")]
    NoPod,
    /// Neither `NodeNames` nor `Nodes`.
    #[error("`NodeNames` and `Nodes` are both missing (expected one candidate list)")]
    NoNodes,
    /// A malformed `Nodes` list.
    #[error("{0}")]
    Nodes(String),
}

/// Which candidate list the call carried, so that the answer uses the same one.
#[derive(Debug, Clone, PartialEq)]
pub enum Candidates {
    /// `NodeNames` (node-cache-capable extender).
    Names(Vec<String>),
    /// `Nodes`: the names, and the whole list to filter and echo.
    Nodes(Vec<String>, NodeList),
}

impl Candidates {
    /// The candidate names.
    pub fn names(&self) -> &[String] {
        match self {
            Candidates::Names(n) | Candidates::Nodes(n, _) => n,
        }
    }
}

/// Decodes and checks a filter/prioritize body: the pod and the candidate list.
pub fn parse_args(body: &[u8]) -> Result<(Value, Candidates), ArgsError> {
    let args: ExtenderArgs =
        serde_json::from_slice(body).map_err(|e| ArgsError::Json(e.to_string()))?;
    let pod = match args.pod {
        Some(p) if p.is_object() => p,
        _ => return Err(ArgsError::NoPod),
    };
    let candidates = match (args.node_names, args.nodes) {
        (Some(names), _) => Candidates::Names(names),
        (None, Some(list)) => {
            let names = list.names().map_err(ArgsError::Nodes)?;
            Candidates::Nodes(names, list)
        }
        (None, None) => return Err(ArgsError::NoNodes),
    };
    Ok((pod, candidates))
}

/// Builds the filter answer in the candidate list's own form.
pub fn filter_result(
    candidates: &Candidates,
    passed: &[bool],
    failed: FailedNodesMap,
    unresolvable: FailedNodesMap,
) -> ExtenderFilterResult {
    let (nodes, node_names) = match candidates {
        Candidates::Names(names) => (
            None,
            Some(
                names
                    .iter()
                    .zip(passed)
                    .filter(|(_, ok)| **ok)
                    .map(|(n, _)| n.clone())
                    .collect(),
            ),
        ),
        Candidates::Nodes(_, list) => (
            Some(NodeList {
                metadata: list.metadata.clone(),
                items: list
                    .items
                    .iter()
                    .zip(passed)
                    .filter(|(_, ok)| **ok)
                    .map(|(n, _)| n.clone())
                    .collect(),
            }),
            None,
        ),
    };
    ExtenderFilterResult {
        nodes,
        node_names,
        failed_nodes: Some(failed),
        failed_and_unresolvable_nodes: Some(unresolvable),
        error: String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_node_names_and_node_lists() {
        let (pod, c) =
            parse_args(br#"{"Pod":{"metadata":{"name":"p"}},"Nodes":null,"NodeNames":["a","b"]}"#)
                .unwrap();
        assert_eq!(pod["metadata"]["name"], "p");
        assert_eq!(c.names(), ["a", "b"]);
        let (_, c) = parse_args(
            br#"{"Pod":{},"Nodes":{"metadata":{},"items":[{"metadata":{"name":"x"}}]},"NodeNames":null}"#,
        )
        .unwrap();
        assert!(matches!(c, Candidates::Nodes(ref n, _) if n == &["x".to_string()]));
    }

    #[test]
    fn refuses_bad_bodies_with_the_field_named() {
        assert!(matches!(parse_args(b"{"), Err(ArgsError::Json(_))));
        assert_eq!(parse_args(br#"{"NodeNames":[]}"#), Err(ArgsError::NoPod));
        assert_eq!(parse_args(br#"{"Pod":{}}"#), Err(ArgsError::NoNodes));
        let e = parse_args(br#"{"Pod":{},"Nodes":{"items":[{"metadata":{}}]}}"#).unwrap_err();
        assert!(
            e.to_string().contains("Nodes.items[0].metadata.name"),
            "{e}"
        );
        let e = parse_args(br#"{"Pod":{},"NodeNames":"a"}"#).unwrap_err();
        assert!(
            e.to_string().contains("NodeNames") || e.to_string().contains("sequence"),
            "{e}"
        );
    }
}
