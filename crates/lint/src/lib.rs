//! Linting of Pod/Deployment/Job/MPIJob/ResourceClaimTemplate manifests for
//! topology-alignment problems.
//!
//! [`lint_text`] reads a multi-document YAML stream and returns [`Finding`]s: GPU+NIC pods
//! that are not Guaranteed (CPU alignment), requests one NUMA node of the topology cannot
//! hold (single-numa-node rejects them), several MIG slices in one pod, GPU+NIC pods on a
//! node without alignment (policy none), and DRA claims pairing a GPU and a NIC without a
//! pcieRoot/NUMA `matchAttribute` (or with a pcieRoot match the machine cannot satisfy).

pub mod admission;
#[cfg(feature = "clap")]
pub mod args;
pub mod capacity;
pub mod claim_fit;
pub mod claim_rules;
pub mod documents;
pub mod finding;
pub mod located;
pub mod pod_rules;
pub mod report;
pub mod resources;
pub mod typed;
pub mod workloads;

use serde_json::Value;

pub use finding::{Finding, LintContext, NodePolicy, Severity};
pub use report::Report;

use crate::documents::split_documents;
use crate::pod_rules::RawFinding;
use crate::typed::TypeProblem;
use crate::workloads::{Workload, workload_of};

/// A field the API types refuse: the API server would refuse the object. Requests and
/// limits are `invalid-quantity`, anything else `invalid-field`.
fn type_problem(p: TypeProblem) -> RawFinding {
    let in_resources = [".resources.limits", ".resources.requests"]
        .iter()
        .any(|list| p.path.contains(list));
    let (rule, expected) = if in_resources {
        (
            "invalid-quantity",
            "expected a quantity: a string such as \"500m\" or \"64Gi\", or a number",
        )
    } else {
        ("invalid-field", "the API server refuses the object")
    };
    RawFinding {
        message: match p.path.as_str() {
            "" => format!("{}; {expected}", p.message),
            path => format!("{path}: {}; {expected}", p.message),
        },
        path: p.path,
        severity: Severity::Error,
        rule,
    }
}

/// Lints every document of `text` (named `file` in the findings).
pub fn lint_text(file: &str, text: &str, ctx: &LintContext<'_>) -> Vec<Finding> {
    let mut out = Vec::new();
    for doc in split_documents(text) {
        let finding = |object: String, raw: RawFinding| Finding {
            file: file.to_string(),
            document: doc.index,
            line: doc.lines.line_of(&raw.path).unwrap_or(doc.line),
            object,
            path: raw.path,
            severity: raw.severity,
            rule: raw.rule,
            message: raw.message,
        };
        let value = match &doc.value {
            Ok(v) => v,
            Err(msg) => {
                out.push(finding(
                    "?".into(),
                    RawFinding {
                        path: String::new(),
                        severity: Severity::Error,
                        rule: "malformed-yaml",
                        message: format!("document {} is not valid YAML: {msg}", doc.index),
                    },
                ));
                continue;
            }
        };
        // `kubectl get … -o yaml` prints a `kind: List` (or `PodList`, …): each item is
        // an object of its own, its fields under `items[i]`.
        let list_items = value
            .get("kind")
            .and_then(Value::as_str)
            .filter(|k| k.ends_with("List"))
            .and(value.get("items"))
            .and_then(Value::as_array);
        let objects: Vec<(String, &Value)> = match list_items {
            Some(items) => (items.iter().enumerate())
                .map(|(i, v)| (format!("items[{i}]."), v))
                .collect(),
            None => vec![(String::new(), value)],
        };
        for (prefix, value) in objects {
            for (object, mut raw) in lint_object(value, doc.index, doc.line, ctx) {
                raw.path = match raw.path.as_str() {
                    "" => prefix.trim_end_matches('.').to_string(),
                    p => format!("{prefix}{p}"),
                };
                out.push(finding(object, raw));
            }
        }
    }
    out
}

/// The findings of one object (`kind/name` with each), paths relative to the object.
fn lint_object(
    value: &Value,
    index: usize,
    line: usize,
    ctx: &LintContext<'_>,
) -> Vec<(String, RawFinding)> {
    let name = value
        .get("metadata")
        .and_then(|m| m.get("name"))
        .and_then(Value::as_str)
        .unwrap_or("?");
    let Some(kind) = value.get("kind").and_then(Value::as_str) else {
        let why = if value.is_object() {
            "has no `kind`"
        } else {
            "is not a mapping"
        };
        let raw = RawFinding {
            path: "kind".into(),
            severity: Severity::Error,
            rule: "no-kind",
            message: format!(
                "document {index} (starting line {line}) {why}; expected a Kubernetes object"
            ),
        };
        return vec![(format!("?/{name}"), raw)];
    };
    let object = format!("{kind}/{name}");
    let read = workload_of(kind, value);
    let mut raws: Vec<RawFinding> = read.problems.into_iter().map(type_problem).collect();
    match read.workload {
        Workload::Pods(pods) => raws.extend(pods.iter().flat_map(|p| pod_rules::lint_pod(p, ctx))),
        Workload::Claim { path, spec, v1 } => {
            raws.extend(claim_rules::lint_claim(&path, &spec, ctx.topology));
            raws.extend(v1.and_then(|v1| claim_fit::lint_fit(&path, &v1, ctx.topology)));
        }
        Workload::Unknown => raws.push(RawFinding {
            path: "kind".into(),
            severity: Severity::Info,
            rule: "unknown-kind",
            message: format!("kind {kind} is not checked"),
        }),
    }
    raws.into_iter().map(|r| (object.clone(), r)).collect()
}
