//! The extender's offline commands: synthetic Node lists (`topoalign extender nodes`)
//! and one decision on Node manifests without a cluster (`topoalign extender decide`).

use std::fmt::Write as _;
use std::sync::RwLock;
use std::time::Duration;

use serde::Serialize;
use serde_json::{Value, json};
use topoalign_tm::ResourceMap;

use crate::dra::verdict::DraNode;
use crate::judge::{Judges, Ruling, Verb, judge_all};
use crate::plugin::judge::{Decision, Verdict};
use crate::plugin::nodeinfo::{Interner, from_node_labels};
use crate::plugin::podreq::{PodError, PodRequest, pod_request};
use crate::plugin::shared::Decider;
use crate::plugin::state::ClusterState;
use crate::plugin::synth::SynthNode;

/// Why an offline decision could not be made.
#[derive(Debug, thiserror::Error)]
pub enum OfflineError {
    /// The node document is neither a list nor a Node.
    #[error("expected a v1 List/NodeList with `items`, or a Node")]
    NotNodes,
    /// A node without a name.
    #[error("items[{0}].metadata.name missing")]
    NoName(usize),
    /// The pod cannot be read.
    #[error(transparent)]
    Pod(#[from] PodError),
}

/// Synthetic nodes as a v1 `List` of Node manifests.
pub fn node_list(nodes: &[SynthNode]) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "List",
        "items": nodes.iter().map(SynthNode::manifest).collect::<Vec<_>>(),
    })
}

/// One line per synthetic node.
pub fn node_table(nodes: &[SynthNode]) -> String {
    let mut t = String::new();
    for n in nodes {
        let _ = writeln!(
            t,
            "{:<20} {:<10} {:<17} {} of {} GPUs used",
            n.name,
            n.profile,
            n.policy.as_str(),
            n.used.gpus.len(),
            n.gpus
        );
    }
    t
}

/// One node's offline answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeResult {
    /// The node.
    pub node: String,
    /// Whether it passes the filter.
    pub passes: bool,
    /// Its priority.
    pub score: i64,
    /// Why it fails, or why it was not judged ("" when it fits).
    pub reason: String,
}

/// The Node manifests of a document: the items of a List/NodeList, or one Node.
pub fn node_items(doc: &Value) -> Result<Vec<Value>, OfflineError> {
    match doc.get("items").and_then(Value::as_array) {
        Some(items) => Ok(items.clone()),
        None if doc.get("kind").and_then(Value::as_str) == Some("Node") => Ok(vec![doc.clone()]),
        None => Err(OfflineError::NotNodes),
    }
}

/// Filters and scores `pod` on `nodes` (Node manifests in the declared form).
pub fn decide_on_manifests(
    nodes: &[Value],
    pod: &Value,
    resources: ResourceMap,
) -> Result<(PodRequest, Vec<NodeResult>), OfflineError> {
    let decider = Decider::new(resources, 0);
    let req = pod_request(pod, decider.resources())?;
    let mut interner = Interner::default();
    let mut state = ClusterState::default();
    let mut names = Vec::new();
    for (i, n) in nodes.iter().enumerate() {
        let name = n
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .ok_or(OfflineError::NoName(i))?;
        if let Some(e) = from_node_labels(n, &mut interner) {
            state.upsert_node(name, e);
        }
        names.push(name.to_string());
    }
    let state = RwLock::new(state);
    let judges = Judges {
        state: &state,
        decider: &decider,
        dra: None,
        metrics: None,
        budget: Duration::ZERO,
        turns: None,
    };
    let mut results = Vec::with_capacity(names.len());
    judge_all(&judges, Verb::Explain, pod, &names, None, |v| {
        let reason = match v.ruling {
            Ruling::Plugin(seen) => match seen.decision() {
                Decision::Judged(Verdict::Fit(_)) => String::new(),
                Decision::Judged(Verdict::Reject { message, .. }) => message,
                Decision::Judged(Verdict::Neutral(w)) => w,
                Decision::Neutral(w) => format!("neutral: {}", w.label()),
            },
            Ruling::Dra(Some(DraNode::Fit(_))) => String::new(),
            Ruling::Dra(Some(DraNode::Reject(m))) => m.clone(),
            Ruling::Dra(Some(DraNode::Neutral(n))) => format!("neutral: {}", n.label()),
            Ruling::Dra(None) => "neutral: claims not judged".to_string(),
        };
        results.push(NodeResult {
            node: v.name.to_string(),
            passes: v.passes(),
            score: v.score,
            reason,
        });
    })?;
    Ok((req, results))
}

/// The decision as text: the pod, then one line per node.
pub fn decide_table(req: &PodRequest, results: &[NodeResult]) -> String {
    let mut t = format!(
        "pod {}: {} GPU(s), {} NIC(s)\n",
        req.key, req.gpus, req.nics
    );
    for r in results {
        let _ = writeln!(
            t,
            "{:<22} {:<6} score {:>2}  {}",
            r.node,
            if r.passes { "pass" } else { "FAIL" },
            r.score,
            r.reason
        );
    }
    t
}
