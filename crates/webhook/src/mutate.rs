//! The decision on one pod: which containers change, the JSON Patch that changes them,
//! the record annotation, what becomes of the Multus networks, and the warnings.
//!
//! All or nothing: when any container asks for device-plugin resources the webhook cannot
//! rewrite (counts that do not pair, an unknown name under a device-plugin domain, a
//! quantity that is not a whole number), the pod is left exactly as it came, with a
//! warning per reason. A pod with nothing of the webhook's gets no patch and no warning.

use serde::Serialize;
use serde_json::{Map, Value};
use topoalign_kube_types::webhook::{MULTUS_NETWORKS_ANNOTATION, REWRITE_ANNOTATION};

use crate::container::{ContainerChange, ContainerKind, ContainerRef, Planned, plan_container};
use crate::names::Names;
use crate::networks::{self, NetworkFeeds};
use crate::patch::{PatchOp, Pointer};
use crate::pod::{Fields, PodIn};
use crate::record::{NetworksRecord, Record};

/// Every warning starts with this, so that a user reading `kubectl`'s output knows who
/// speaks.
pub const WARNING_PREFIX: &str = "topoalign webhook: ";

/// What the webhook did with a pod.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum Outcome {
    /// Its device-plugin requests were rewritten.
    Rewritten,
    /// Nothing of the webhook's: no patch, no warning.
    Untouched,
    /// It asks for device-plugin resources the webhook cannot rewrite (or is no pod):
    /// left unchanged, with warnings.
    Declined,
}

impl Outcome {
    /// The metric label.
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Rewritten => "rewritten",
            Outcome::Untouched => "untouched",
            Outcome::Declined => "declined",
        }
    }
}

/// The decision on one pod.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Decision {
    /// What happened.
    pub outcome: Outcome,
    /// The containers changed.
    pub changes: Vec<ContainerChange>,
    /// The JSON Patch (empty unless rewritten).
    pub patch: Vec<PatchOp>,
    /// The record written to the pod (`None` unless rewritten).
    pub record: Option<Record>,
    /// Warnings for the AdmissionReview response.
    pub warnings: Vec<String>,
}

impl Decision {
    fn declined(warnings: Vec<String>) -> Self {
        Decision {
            outcome: Outcome::Declined,
            changes: Vec::new(),
            patch: Vec::new(),
            record: None,
            warnings: warnings
                .into_iter()
                .map(|w| format!("{WARNING_PREFIX}{w}"))
                .collect(),
        }
    }

    fn untouched() -> Self {
        Decision {
            outcome: Outcome::Untouched,
            changes: Vec::new(),
            patch: Vec::new(),
            record: None,
            warnings: Vec::new(),
        }
    }
}

/// The pod's containers, init containers first (as the scheduler indexes them).
fn containers(pod: &PodIn) -> Result<Vec<ContainerRef<'_>>, String> {
    let Some(spec) = &pod.spec else {
        return Err("the object is not a Pod: it has no spec".into());
    };
    let Some(regular) = &spec.containers else {
        return Err("the object is not a Pod: spec.containers is missing".into());
    };
    let lists = [
        (
            "initContainers",
            spec.init_containers.as_deref().unwrap_or(&[]),
        ),
        ("containers", regular.as_slice()),
    ];
    let mut out = Vec::new();
    for (list, items) in lists {
        for (index, c) in items.iter().enumerate() {
            let name = c.name.clone().unwrap_or_else(|| format!("{list}[{index}]"));
            let always = c.restart_policy.as_deref() == Some("Always");
            let kind = match (list, always) {
                ("containers", _) => ContainerKind::Container,
                (_, true) => ContainerKind::Sidecar,
                (_, false) => ContainerKind::Init,
            };
            out.push(ContainerRef {
                kind,
                index,
                name,
                c,
            });
        }
    }
    Ok(out)
}

/// Decides what to do with `pod` (created in `namespace`; empty: the pod's own, else
/// `default`).
pub fn mutate_pod(pod: &Value, namespace: &str, names: &Names, feeds: &NetworkFeeds) -> Decision {
    match crate::pod::from_value(pod) {
        Ok(p) => decide(&p, namespace, names, feeds),
        Err(why) => Decision::declined(vec![why]),
    }
}

/// Decides what to do with a pod given as JSON text.
pub(crate) fn mutate_pod_str(
    pod: &str,
    namespace: &str,
    names: &Names,
    feeds: &NetworkFeeds,
) -> Decision {
    match crate::pod::from_str(pod) {
        Ok(p) => decide(&p, namespace, names, feeds),
        Err(why) => Decision::declined(vec![why]),
    }
}

/// The decision on a decoded pod; an empty `namespace` is the pod's own, else `default`.
fn decide(pod: &PodIn, namespace: &str, names: &Names, feeds: &NetworkFeeds) -> Decision {
    let namespace = match namespace {
        "" => pod
            .metadata
            .as_ref()
            .and_then(|m| m.namespace.as_deref())
            .unwrap_or("default"),
        ns => ns,
    };
    let refs = match containers(pod) {
        Ok(r) => r,
        Err(why) => return Decision::declined(vec![why]),
    };
    let mut changes = Vec::new();
    let mut why = Vec::new();
    for c in &refs {
        match plan_container(c, names) {
            Planned::Nothing => {}
            Planned::Change(ch) => changes.push(ch),
            Planned::Cannot(w) => why.extend(w),
        }
    }
    if !why.is_empty() {
        why.push("the pod is left as written: its device-plugin requests stay".into());
        return Decision::declined(why);
    }
    if changes.is_empty() {
        return Decision::untouched();
    }
    let annotations = pod.metadata.as_ref().and_then(|m| m.annotations.as_ref());
    let mut warnings: Vec<String> = changes.iter().flat_map(|c| c.notes.clone()).collect();
    let mut record = Record {
        containers: changes.clone(),
        networks: None,
    };
    let mut ops = container_ops(&changes);
    // The Multus networks.
    let mut networks_op = None;
    if changes.iter().any(|c| c.had_nics)
        && let Some(text) = annotations
            .and_then(|a| a.get(MULTUS_NETWORKS_ANNOTATION))
            .and_then(Value::as_str)
    {
        let rewritten: Vec<&str> = changes
            .iter()
            .flat_map(|c| c.from.keys().map(String::as_str))
            .collect();
        match networks::parse(text) {
            Err(e) => warnings.push(format!(
                "{MULTUS_NETWORKS_ANNOTATION} left as is: {e}; Multus refuses it too"
            )),
            Ok((parsed, entries)) => {
                let (mut drop, mut removed, mut kept) = (Vec::new(), Vec::new(), Vec::new());
                for (i, e) in entries.iter().enumerate() {
                    let q = e.qualified(namespace);
                    let ns = e.namespace.as_deref().unwrap_or(namespace);
                    if feeds.fed(ns, &e.name, &rewritten) {
                        drop.push(i);
                        removed.push(q);
                    } else {
                        kept.push(q);
                    }
                }
                if !removed.is_empty() {
                    let why = "SR-IOV CNI would get no VF from the device plugin (`VF pci addr is required`): the pod's NICs come from its claim";
                    warnings.push(format!(
                        "removed network {} from {MULTUS_NETWORKS_ANNOTATION}: {why}",
                        removed.join(", ")
                    ));
                    record.networks = Some(NetworksRecord {
                        removed,
                        why: why.to_string(),
                        was: text.to_string(),
                    });
                    let path =
                        Pointer::of(&["metadata", "annotations", MULTUS_NETWORKS_ANNOTATION])
                            .into_string();
                    networks_op = Some(match networks::without(&parsed, &drop) {
                        Some(value) => PatchOp::Replace {
                            path,
                            value: Value::String(value),
                        },
                        None => PatchOp::Remove { path },
                    });
                }
                if !kept.is_empty() {
                    warnings.push(format!(
                        "network {} kept: if its NetworkAttachmentDefinition is SR-IOV fed by {}, the pod will not start (list it with --sriov-network)",
                        kept.join(", "),
                        rewritten.join(", ")
                    ));
                }
            }
        }
    }
    // The record.
    let existing = annotations.and_then(|a| a.get(REWRITE_ANNOTATION));
    if let Some(prev) = existing {
        match prev.as_str().map(Record::from_annotation) {
            Some(Ok(prev)) => record = prev.then(record),
            _ => {
                return Decision::declined(vec![format!(
                    "annotation {REWRITE_ANNOTATION} holds something the webhook did not write; the pod is left as written"
                )]);
            }
        }
    }
    ops.extend(networks_op);
    ops.push(record_op(pod, annotations, &record));
    Decision {
        outcome: Outcome::Rewritten,
        changes,
        patch: ops,
        record: Some(record),
        warnings: warnings
            .into_iter()
            .map(|w| format!("{WARNING_PREFIX}{w}"))
            .collect(),
    }
}

/// The operations on the containers' limits and requests.
fn container_ops(changes: &[ContainerChange]) -> Vec<PatchOp> {
    let mut ops = Vec::new();
    for c in changes {
        let base = Pointer::of(&["spec", c.kind.list()])
            .child(&c.index.to_string())
            .child("resources");
        let limits = base.child("limits");
        for name in c.from.keys() {
            ops.push(PatchOp::Remove {
                path: limits.child(name).into_string(),
            });
        }
        for (name, n) in &c.to {
            ops.push(PatchOp::Add {
                path: limits.child(name).into_string(),
                value: Value::String(n.to_string()),
            });
        }
        if c.in_requests.is_empty() {
            continue;
        }
        let requests = base.child("requests");
        for name in &c.in_requests {
            ops.push(PatchOp::Remove {
                path: requests.child(name).into_string(),
            });
        }
        for (name, n) in &c.to {
            ops.push(PatchOp::Add {
                path: requests.child(name).into_string(),
                value: Value::String(n.to_string()),
            });
        }
    }
    ops
}

/// The operation that writes the record annotation.
fn record_op(pod: &PodIn, annotations: Option<&Fields>, record: &Record) -> PatchOp {
    let value = Value::String(record.to_annotation());
    match annotations {
        Some(_) => PatchOp::Add {
            path: Pointer::of(&["metadata", "annotations", REWRITE_ANNOTATION]).into_string(),
            value,
        },
        None if pod.metadata.is_some() => PatchOp::Add {
            path: "/metadata/annotations".into(),
            value: Value::Object(Map::from_iter([(REWRITE_ANNOTATION.to_string(), value)])),
        },
        None => PatchOp::Add {
            path: "/metadata".into(),
            value: serde_json::json!({ "annotations": { REWRITE_ANNOTATION: value } }),
        },
    }
}

#[cfg(test)]
#[path = "mutate_tests.rs"]
pub(crate) mod tests;
