//! One decision without a cluster (`topoalign webhook review FILE`): a Pod manifest is
//! first defaulted as the API server defaults it before admission (each container's
//! requests filled from its limits, `SetDefaults_Pod` in `pkg/apis/core/v1/defaults.go`),
//! then decided; an AdmissionReview is answered as the server would answer it.

use serde::Serialize;
use serde_json::Value;

use crate::error::NotAReview;
use crate::mutate::{Decision, Outcome, mutate_pod};
use crate::names::Names;
use crate::networks::NetworkFeeds;
use crate::patch::{PatchError, apply};
use crate::review::review;

/// What the webhook would do with a manifest.
#[derive(Debug, Clone, Serialize)]
pub struct Offline {
    /// What happened (in the decision's document when there is one).
    #[serde(skip)]
    pub outcome: Outcome,
    /// The decision, when the input held a pod's creation.
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    pub decision: Option<Decision>,
    /// The pod as the API server would store it (defaulted, patched).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pod: Option<Value>,
    /// The AdmissionReview response, when the input was a review.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub response: Option<Value>,
}

/// Why a manifest cannot be reviewed offline.
#[derive(Debug, thiserror::Error)]
pub enum OfflineError {
    /// An AdmissionReview without a request to answer.
    #[error(transparent)]
    Review(#[from] NotAReview),
    /// The webhook's own patch does not apply (a bug: reported, never hidden).
    #[error("the webhook's patch does not apply to the pod: {0}")]
    Patch(#[from] PatchError),
    /// The document is neither a Pod nor an AdmissionReview.
    #[error("expected a Pod or an AdmissionReview, got kind {0:?}")]
    Kind(String),
}

/// Fills each container's requests from its limits where missing, as the API server's
/// defaulting does before admission.
pub fn default_requests(pod: &mut Value) {
    let Some(spec) = pod.get_mut("spec").and_then(Value::as_object_mut) else {
        return;
    };
    for list in ["initContainers", "containers"] {
        let Some(items) = spec.get_mut(list).and_then(Value::as_array_mut) else {
            continue;
        };
        for c in items {
            let Some(res) = c.get_mut("resources").and_then(Value::as_object_mut) else {
                continue;
            };
            let Some(limits) = res.get("limits").and_then(Value::as_object).cloned() else {
                continue;
            };
            let requests = res
                .entry("requests")
                .or_insert_with(|| Value::Object(serde_json::Map::new()));
            if let Some(r) = requests.as_object_mut() {
                for (k, v) in limits {
                    r.entry(k).or_insert(v);
                }
            }
        }
    }
}

/// Reviews a Pod manifest (created in `namespace`, else its own, else `default`) or an
/// AdmissionReview.
pub fn review_manifest(
    doc: &Value,
    namespace: Option<&str>,
    names: &Names,
    feeds: &NetworkFeeds,
) -> Result<Offline, OfflineError> {
    let kind = doc.get("kind").and_then(Value::as_str).unwrap_or("");
    match kind {
        "AdmissionReview" => {
            let body = serde_json::to_vec(doc).map_err(NotAReview::Json)?;
            let a = review(&body, names, feeds)?;
            let pod = match (&a.decision, doc.pointer("/request/object")) {
                (Some(d), Some(obj)) => {
                    let mut p = obj.clone();
                    apply(&mut p, &d.patch)?;
                    Some(p)
                }
                _ => None,
            };
            Ok(Offline {
                outcome: a.outcome,
                decision: a.decision,
                pod,
                response: serde_json::from_slice(&a.body).ok(),
            })
        }
        "Pod" => {
            let mut pod = doc.clone();
            default_requests(&mut pod);
            let d = mutate_pod(&pod, namespace.unwrap_or(""), names, feeds);
            apply(&mut pod, &d.patch)?;
            Ok(Offline {
                outcome: d.outcome,
                decision: Some(d),
                pod: Some(pod),
                response: None,
            })
        }
        other => Err(OfflineError::Kind(other.to_string())),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_manifest_is_defaulted_then_decided() {
        let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
            "spec": {"containers": [{"name": "c", "resources": {"limits": {"amd.com/gpu": 4, "nvidia.com/sriov-rdma-vf": 4, "cpu": "8"}}}]}});
        let o = review_manifest(
            &pod,
            Some("dk"),
            &Names::default(),
            &NetworkFeeds::default(),
        )
        .unwrap();
        assert_eq!(o.outcome, Outcome::Rewritten);
        let res = &o.pod.unwrap()["spec"]["containers"][0]["resources"];
        assert_eq!(
            res["requests"],
            json!({"cpu": "8", "topoalign.dev/gpu-nic-pair": "4"})
        );
        assert_eq!(
            res["limits"],
            json!({"cpu": "8", "topoalign.dev/gpu-nic-pair": "4"})
        );
    }

    #[test]
    fn other_kinds_are_refused() {
        let e = review_manifest(
            &json!({"kind": "Deployment"}),
            None,
            &Names::default(),
            &NetworkFeeds::default(),
        )
        .unwrap_err();
        assert!(e.to_string().contains("\"Deployment\""), "{e}");
    }
}
