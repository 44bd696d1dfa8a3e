//! One AdmissionReview in, its answer out (admission.k8s.io/v1): the pod decision
//! ([`mutate_pod`]) as a base64 JSON Patch, or no patch.
//!
//! Every review with a `request.uid` is answered `allowed: true`: a review of another
//! version or kind, a request for something other than a pod's creation, or an object
//! that is no pod gets no patch (a warning says why where it is unexpected). Only a body
//! with no `request.uid` to answer to is refused ([`NotAReview`], the server's 400).

use base64::Engine as _;
use serde_json::{Value, json};

use crate::error::NotAReview;
use crate::mutate::{Decision, Outcome, WARNING_PREFIX, mutate_pod};
use crate::names::Names;
use crate::networks::NetworkFeeds;

/// The AdmissionReview version the webhook speaks.
pub const ADMISSION_V1: &str = "admission.k8s.io/v1";

/// The answer to one review.
#[derive(Debug, Clone)]
pub struct Answer {
    /// The AdmissionReview response, JSON.
    pub body: Vec<u8>,
    /// What happened to the pod.
    pub outcome: Outcome,
    /// The decision, when the review held a pod's creation.
    pub decision: Option<Decision>,
}

/// Answers one AdmissionReview body.
pub fn review(body: &[u8], names: &Names, feeds: &NetworkFeeds) -> Result<Answer, NotAReview> {
    let v: Value = serde_json::from_slice(body).map_err(NotAReview::Json)?;
    let Some(request) = v.get("request").and_then(Value::as_object) else {
        return Err(NotAReview::Shape("no request object"));
    };
    let Some(uid) = request.get("uid").and_then(Value::as_str) else {
        return Err(NotAReview::Shape("no request.uid"));
    };
    let api_version = v.get("apiVersion").and_then(Value::as_str).unwrap_or("");
    let kind = v.get("kind").and_then(Value::as_str).unwrap_or("");
    // Answer in the review's own version when it is one the API server may send, so that
    // it can read the answer; anything else is answered in v1.
    let answer_version = match api_version {
        "admission.k8s.io/v1beta1" => api_version,
        _ => ADMISSION_V1,
    };
    let skip = |warning: Option<String>| {
        let outcome = match warning {
            Some(_) => Outcome::Declined,
            None => Outcome::Untouched,
        };
        Answer {
            body: response(answer_version, uid, None, warning.into_iter().collect()),
            outcome,
            decision: None,
        }
    };
    if api_version != ADMISSION_V1 || kind != "AdmissionReview" {
        return Ok(skip(Some(format!(
            "{WARNING_PREFIX}cannot read a review of apiVersion {api_version:?}, kind {kind:?} (expected {ADMISSION_V1} AdmissionReview); the pod is left as written"
        ))));
    }
    let field = |k: &str| request.get(k).and_then(Value::as_str).unwrap_or("");
    let gvk = request.get("kind");
    let is_pod = gvk.and_then(|k| k.get("group")).and_then(Value::as_str) == Some("")
        && gvk.and_then(|k| k.get("kind")).and_then(Value::as_str) == Some("Pod");
    if !is_pod || !field("subResource").is_empty() {
        let what = gvk.map_or_else(|| "nothing".to_string(), Value::to_string);
        return Ok(skip(Some(format!(
            "{WARNING_PREFIX}handles pods only, got {what}{}; nothing changed (check the webhook configuration's rules)",
            match field("subResource") {
                "" => String::new(),
                s => format!(" subresource {s}"),
            }
        ))));
    }
    if field("operation") != "CREATE" {
        return Ok(skip(None));
    }
    let Some(pod) = request.get("object").filter(|o| o.is_object()) else {
        return Ok(skip(Some(format!(
            "{WARNING_PREFIX}request.object is not a Pod object; nothing changed"
        ))));
    };
    let namespace = match field("namespace") {
        "" => pod
            .get("metadata")
            .and_then(|m| m.get("namespace"))
            .and_then(Value::as_str)
            .unwrap_or("default"),
        ns => ns,
    };
    let decision = mutate_pod(pod, namespace, names, feeds);
    let patch = (!decision.patch.is_empty()).then(|| {
        let json = serde_json::to_vec(&decision.patch).unwrap_or_default();
        base64::engine::general_purpose::STANDARD.encode(json)
    });
    Ok(Answer {
        body: response(ADMISSION_V1, uid, patch, decision.warnings.clone()),
        outcome: decision.outcome,
        decision: Some(decision),
    })
}

/// The AdmissionReview response.
fn response(api_version: &str, uid: &str, patch: Option<String>, warnings: Vec<String>) -> Vec<u8> {
    let mut r = json!({"uid": uid, "allowed": true});
    if let Some(p) = patch {
        r["patchType"] = json!("JSONPatch");
        r["patch"] = json!(p);
    }
    if !warnings.is_empty() {
        r["warnings"] = json!(warnings);
    }
    serde_json::to_vec(&json!({
        "apiVersion": api_version,
        "kind": "AdmissionReview",
        "response": r,
    }))
    .unwrap_or_default()
}

#[cfg(test)]
#[path = "review_tests.rs"]
mod tests;
