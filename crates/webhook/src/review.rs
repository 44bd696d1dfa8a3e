//! One AdmissionReview in, its answer out (admission.k8s.io/v1): the pod decision
//! ([`mutate_pod`]) as a base64 JSON Patch, or no patch.
//!
//! Every review with a `request.uid` is answered `allowed: true`: a review of another
//! version or kind, a request for something other than a pod's creation, or an object
//! that is no pod gets no patch (a warning says why where it is unexpected). Only a body
//! with no `request.uid` to answer to is refused ([`NotAReview`], the server's 400).

use base64::Engine as _;
use serde::Deserialize;
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
            body: response(answer_version, uid, None, &Vec::from_iter(warning)),
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
    let patch = (!decision.patch.is_empty())
        .then(|| serde_json::to_vec(&decision.patch).unwrap_or_default());
    Ok(Answer {
        body: response(ADMISSION_V1, uid, patch.as_deref(), &decision.warnings),
        outcome: decision.outcome,
        decision: Some(decision),
    })
}

/// The AdmissionReview response, `{"apiVersion", "kind", "response": {"uid", "allowed",
/// "patchType", "patch", "warnings"}}`, with `patch` (the JSON Patch document)
/// base64-encoded into it. Written field by field: the strings that may need escaping go
/// through serde_json, the base64 text straight into the body (it needs no escaping, and
/// scanning its ~10 KB for characters to escape was the largest cost of an admission,
/// `benches/admission.rs`).
fn response(api_version: &str, uid: &str, patch: Option<&[u8]>, warnings: &[String]) -> Vec<u8> {
    let b64 = &base64::engine::general_purpose::STANDARD;
    let encoded = patch.map_or(0, |p| base64::encoded_len(p.len(), true).unwrap_or(0));
    let text: usize = warnings.iter().map(|w| w.len() + 8).sum();
    let mut body = Vec::with_capacity(160 + api_version.len() + uid.len() + encoded + text);
    let ok = put(&mut body, br#"{"apiVersion":"#, api_version)
        && put(
            &mut body,
            br#","kind":"AdmissionReview","response":{"uid":"#,
            uid,
        );
    if !ok {
        return Vec::new();
    }
    body.extend_from_slice(br#","allowed":true"#);
    if let Some(patch) = patch {
        body.extend_from_slice(br#","patchType":"JSONPatch","patch":""#);
        let start = body.len();
        body.resize(start + encoded, 0);
        let written = b64.encode_slice(patch, &mut body[start..]).unwrap_or(0);
        body.truncate(start + written);
        body.push(b'"');
    }
    if !warnings.is_empty() && !put(&mut body, br#","warnings":"#, warnings) {
        return Vec::new();
    }
    body.extend_from_slice(b"}}");
    body
}

/// Appends `raw`, then `value` as JSON (strings escaped by serde_json); false on failure
/// (none for strings into a `Vec`).
fn put<T: serde::Serialize + ?Sized>(body: &mut Vec<u8>, raw: &[u8], value: &T) -> bool {
    body.extend_from_slice(raw);
    serde_json::to_writer(body, value).is_ok()
}

#[cfg(test)]
#[path = "review_tests.rs"]
mod tests;
