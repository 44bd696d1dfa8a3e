//! Linting of Pod/Deployment/Job/MPIJob/ResourceClaimTemplate manifests for
//! topology-alignment problems.
//!
//! [`lint_text`] reads a multi-document YAML stream and returns [`Finding`]s: GPU+NIC pods
//! that are not Guaranteed (CPU alignment), requests one NUMA node of the topology cannot
//! hold (single-numa-node rejects them), MIG sets no node can ever hold (and the geometry
//! that would), unknown MIG profiles, several MIG slices in one pod, GPU+NIC pods on a
//! node without alignment (policy none), and DRA claims pairing a GPU and a NIC without a
//! pcieRoot/NUMA `matchAttribute` (or with a pcieRoot match the machine cannot satisfy),
//! pods whose topoalign claim gives RoCE NICs without a network for them, and Nodes where
//! a device plugin still advertises the GPUs or RDMA NICs topoalign's driver hands out;
//! Guaranteed containers whose GPUs come from DRA but whose exclusive CPUs do not (the
//! kubelet aligns no CPU with DRA devices), and the static CPU manager where
//! dra-driver-cpu must run; PCI devices two DRA drivers publish on one node.
//! [`lint_texts`] lints several files as one input: a pod's claim may be in another file.

mod admission;
#[cfg(feature = "clap")]
mod args;
mod capacity;
mod claim_fit;
mod claim_rules;
mod cluster;
mod cpu_rules;
mod documents;
mod finding;
mod located;
mod mig_rules;
mod mig_sources;
mod node_rules;
mod pod_rules;
mod report;
mod resources;
mod roce_rules;
mod slice_rules;
mod typed;
mod workloads;

use serde_json::Value;

#[cfg(feature = "clap")]
pub use args::{InputError, LintArgs};
pub use finding::{Finding, LintContext, NodePolicy, Severity, TopologyManagerModel};
pub use report::Report;

use crate::cluster::Cluster;
use crate::documents::split_documents;
use crate::finding::RawFinding;
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

/// The objects of a document with their path prefix: `kubectl get … -o yaml` prints a
/// `kind: List` (or `PodList`, …) whose items are objects of their own, under `items[i]`.
fn objects_of(value: &Value) -> Vec<(String, &Value)> {
    let list_items = value
        .get("kind")
        .and_then(Value::as_str)
        .filter(|k| k.ends_with("List"))
        .and(value.get("items"))
        .and_then(Value::as_array);
    match list_items {
        Some(items) => (items.iter().enumerate())
            .map(|(i, v)| (format!("items[{i}]."), v))
            .collect(),
        None => vec![(String::new(), value)],
    }
}

/// Lints every document of `text` (named `file` in the findings); a pod's claims and a
/// node's ResourceSlices are looked up in `text` only.
pub fn lint_text(file: &str, text: &str, ctx: &LintContext<'_>) -> Vec<Finding> {
    lint_texts(&[(file, text)], ctx)
}

/// Lints several files (`(name, text)`) as one input: claims, claim templates and
/// ResourceSlices of any file are seen by the pods and Nodes of every file.
pub fn lint_texts(inputs: &[(&str, &str)], ctx: &LintContext<'_>) -> Vec<Finding> {
    let mut cluster = Cluster::default();
    for (_, text) in inputs {
        for doc in split_documents(text) {
            if let Ok(value) = &doc.value {
                for (_, object) in objects_of(value) {
                    cluster.add(object);
                }
            }
        }
    }
    (inputs.iter())
        .flat_map(|(file, text)| lint_file(file, text, ctx, &cluster))
        .collect()
}

fn lint_file(file: &str, text: &str, ctx: &LintContext<'_>, cluster: &Cluster) -> Vec<Finding> {
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
        for (prefix, value) in objects_of(value) {
            for (object, mut raw) in lint_object(value, doc.index, doc.line, ctx, cluster) {
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
    cluster: &Cluster,
) -> Vec<(String, RawFinding)> {
    let meta = |k: &str| {
        value
            .get("metadata")
            .and_then(|m| m.get(k))
            .and_then(Value::as_str)
    };
    let name = meta("name").unwrap_or("?");
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
        Workload::Pods(pods) => {
            raws.extend(pods.iter().flat_map(|p| {
                let mut f = pod_rules::lint_pod(p, ctx);
                f.extend(mig_rules::lint_mig(p, cluster, ctx));
                f
            }));
            let ns = meta("namespace");
            raws.extend((pods.iter()).flat_map(|p| roce_rules::lint_roce(p, ns, cluster, ctx)));
            raws.extend((pods.iter()).flat_map(|p| cpu_rules::lint_pod_cpus(p, ns, cluster)));
        }
        Workload::Node(node) => {
            raws.extend(node_rules::lint_node(&node, cluster));
            raws.extend(cpu_rules::lint_node_cpus(&node, cluster, ctx));
            raws.extend(mig_rules::lint_mig_node(&node, cluster));
        }
        Workload::Slice => raws.extend(slice_rules::lint_slice(value, &cluster.published)),
        Workload::Claim { path, spec, v1 } => {
            raws.extend(claim_rules::lint_claim(&path, &spec, ctx.topology));
            raws.extend(cpu_rules::lint_claim_cpus(&path, &spec, ctx));
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
