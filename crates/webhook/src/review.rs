//! One AdmissionReview in, its answer out (admission.k8s.io/v1): the pod decision
//! ([`mutate_pod`]) as a base64 JSON Patch, or no patch.
//!
//! Every review with a `request.uid` is answered `allowed: true`: a review of another
//! version or kind, a request for something other than a pod's creation, or an object
//! that is no pod gets no patch (a warning says why where it is unexpected). Only a body
//! with no `request.uid` to answer to is refused ([`NotAReview`], the server's 400).

use base64::Engine as _;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use serde_json::error::Category;
use serde_json::value::RawValue;

use crate::error::NotAReview;
use crate::mutate::{Decision, Outcome, WARNING_PREFIX, mutate_pod_str};
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

/// The envelope and its request, the object kept as text (read as a pod afterwards, so
/// that an object that is no pod is still answered under the request's uid).
#[derive(Deserialize)]
struct ReviewIn<'a> {
    #[serde(default, rename = "apiVersion")]
    api_version: Option<Value>,
    #[serde(default)]
    kind: Option<Value>,
    #[serde(default, borrow)]
    request: Option<RequestIn<'a>>,
}

/// The request: its small fields decoded, the object kept as text.
#[derive(Deserialize)]
struct RequestIn<'a> {
    #[serde(default)]
    uid: Option<Value>,
    #[serde(default)]
    kind: Option<Value>,
    #[serde(default, rename = "subResource")]
    sub_resource: Option<Value>,
    #[serde(default)]
    operation: Option<Value>,
    #[serde(default)]
    namespace: Option<Value>,
    #[serde(default, borrow)]
    object: Option<&'a RawValue>,
}

fn text(v: &Option<Value>) -> &str {
    v.as_ref().and_then(Value::as_str).unwrap_or("")
}

/// Answers one AdmissionReview body.
pub fn review(body: &[u8], names: &Names, feeds: &NetworkFeeds) -> Result<Answer, NotAReview> {
    let envelope: ReviewIn<'_> = serde_json::from_slice(body).map_err(|e| match e.classify() {
        Category::Data => NotAReview::Shape("not an object with a request object"),
        _ => NotAReview::Json(e),
    })?;
    let Some(request) = envelope.request else {
        return Err(NotAReview::Shape("no request object"));
    };
    let Some(uid) = request.uid.as_ref().and_then(Value::as_str) else {
        return Err(NotAReview::Shape("no request.uid"));
    };
    let api_version = text(&envelope.api_version);
    let kind = text(&envelope.kind);
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
    let gvk = request.kind.as_ref();
    let is_pod = gvk.and_then(|k| k.get("group")).and_then(Value::as_str) == Some("")
        && gvk.and_then(|k| k.get("kind")).and_then(Value::as_str) == Some("Pod");
    let sub = text(&request.sub_resource);
    if !is_pod || !sub.is_empty() {
        let what = gvk.map_or_else(|| "nothing".to_string(), Value::to_string);
        return Ok(skip(Some(format!(
            "{WARNING_PREFIX}handles pods only, got {what}{}; nothing changed (check the webhook configuration's rules)",
            match sub {
                "" => String::new(),
                s => format!(" subresource {s}"),
            }
        ))));
    }
    if text(&request.operation) != "CREATE" {
        return Ok(skip(None));
    }
    let Some(object) = request
        .object
        .map(RawValue::get)
        .filter(|o| o.trim_start().starts_with('{'))
    else {
        return Ok(skip(Some(format!(
            "{WARNING_PREFIX}request.object is not a Pod object; nothing changed"
        ))));
    };
    let decision = mutate_pod_str(object, text(&request.namespace), names, feeds);
    let patch = (!decision.patch.is_empty()).then(|| {
        // One buffer, encoded at once: base64's fast path (a writer fed token by token is
        // several times slower).
        let json = serde_json::to_vec(&decision.patch).unwrap_or_default();
        base64::engine::general_purpose::STANDARD.encode(json)
    });
    Ok(Answer {
        body: response(ADMISSION_V1, uid, patch, decision.warnings.clone()),
        outcome: decision.outcome,
        decision: Some(decision),
    })
}

/// The AdmissionReview response's `response`.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ResponseOut<'a> {
    uid: &'a str,
    allowed: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    patch_type: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    patch: Option<&'a str>,
    #[serde(skip_serializing_if = "<[String]>::is_empty")]
    warnings: &'a [String],
}

/// The AdmissionReview response.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ReviewOut<'a> {
    api_version: &'a str,
    kind: &'static str,
    response: ResponseOut<'a>,
}

/// The AdmissionReview response.
fn response(api_version: &str, uid: &str, patch: Option<String>, warnings: Vec<String>) -> Vec<u8> {
    let out = ReviewOut {
        api_version,
        kind: "AdmissionReview",
        response: ResponseOut {
            uid,
            allowed: true,
            patch_type: patch.as_ref().map(|_| "JSONPatch"),
            patch: patch.as_deref(),
            warnings: &warnings,
        },
    };
    serde_json::to_vec(&out).unwrap_or_default()
}

#[cfg(test)]
#[path = "review_tests.rs"]
mod tests;
