//! Linting of Pod/Deployment/Job/MPIJob/ResourceClaimTemplate manifests for
//! topology-alignment problems.
//!
//! [`lint_text`] reads a multi-document YAML stream and returns [`Finding`]s: GPU+NIC pods
//! that are not Guaranteed (CPU alignment), requests one NUMA node of the topology cannot
//! hold (single-numa-node rejects them), several MIG slices in one pod, GPU+NIC pods on a
//! node without alignment (policy none), and DRA claims pairing a GPU and a NIC without a
//! pcieRoot/NUMA `matchAttribute` (or with a pcieRoot match the machine cannot satisfy).

#[cfg(feature = "clap")]
pub mod args;
pub mod capacity;
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
            out.push(finding(
                format!("?/{name}"),
                RawFinding {
                    path: "kind".into(),
                    severity: Severity::Error,
                    rule: "no-kind",
                    message: format!(
                        "document {} (starting line {}) {why}; expected a Kubernetes object",
                        doc.index, doc.line
                    ),
                },
            ));
            continue;
        };
        let object = format!("{kind}/{name}");
        let read = workload_of(kind, value);
        let mut raws: Vec<RawFinding> = read.problems.into_iter().map(type_problem).collect();
        raws.extend(match read.workload {
            Workload::Pods(pods) => pods
                .iter()
                .flat_map(|p| pod_rules::lint_pod(p, ctx))
                .collect(),
            Workload::Claim { path, spec } => claim_rules::lint_claim(&path, &spec, ctx.topology),
            Workload::Unknown => vec![RawFinding {
                path: "kind".into(),
                severity: Severity::Info,
                rule: "unknown-kind",
                message: format!("kind {kind} is not checked"),
            }],
        });
        out.extend(raws.into_iter().map(|r| finding(object.clone(), r)));
    }
    out
}
