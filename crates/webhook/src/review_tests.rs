use serde_json::json;

use super::*;
use crate::mutate::tests::seed_pod;
use crate::patch::PatchOp;

fn envelope(api_version: &str, kind: &str, request: Value) -> Vec<u8> {
    serde_json::to_vec(&json!({"apiVersion": api_version, "kind": kind, "request": request}))
        .unwrap()
}

fn pod_request(operation: &str, object: Value) -> Value {
    json!({
        "uid": "705ab4f5-6393-11e8-b7cc-42010a800002",
        "kind": {"group": "", "version": "v1", "kind": "Pod"},
        "resource": {"group": "", "version": "v1", "resource": "pods"},
        "requestKind": {"group": "", "version": "v1", "kind": "Pod"},
        "namespace": "dk", "operation": operation,
        "userInfo": {"username": "admin"}, "object": object, "oldObject": null,
        "dryRun": false, "options": {"apiVersion": "meta.k8s.io/v1", "kind": "CreateOptions"}
    })
}

fn answer(body: &[u8]) -> (Answer, Value) {
    let a = review(body, &Names::default(), &NetworkFeeds::default()).unwrap();
    let v: Value = serde_json::from_slice(&a.body).unwrap();
    (a, v)
}

#[test]
fn a_pod_creation_is_answered_with_a_base64_json_patch() {
    let (a, v) = answer(&envelope(
        ADMISSION_V1,
        "AdmissionReview",
        pod_request("CREATE", seed_pod()),
    ));
    assert_eq!(a.outcome, Outcome::Rewritten);
    assert_eq!(v["apiVersion"], ADMISSION_V1);
    assert_eq!(v["kind"], "AdmissionReview");
    let r = &v["response"];
    assert_eq!(r["uid"], "705ab4f5-6393-11e8-b7cc-42010a800002");
    assert_eq!(r["allowed"], true);
    assert_eq!(r["patchType"], "JSONPatch");
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(r["patch"].as_str().unwrap())
        .unwrap();
    let ops: Value = serde_json::from_slice(&bytes).unwrap();
    let expected = serde_json::to_value::<&[PatchOp]>(&a.decision.unwrap().patch).unwrap();
    assert_eq!(ops, expected);
}

#[test]
fn other_operations_and_pods_without_devices_get_no_patch_and_no_warning() {
    let plain = json!({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c"}]}});
    for req in [
        pod_request("UPDATE", seed_pod()),
        pod_request("DELETE", seed_pod()),
        pod_request("CREATE", plain),
    ] {
        let (a, v) = answer(&envelope(ADMISSION_V1, "AdmissionReview", req));
        assert_eq!(a.outcome, Outcome::Untouched);
        assert_eq!(
            v["response"],
            json!({"uid": "705ab4f5-6393-11e8-b7cc-42010a800002", "allowed": true})
        );
    }
}

#[test]
fn reviews_of_another_version_kind_or_resource_are_allowed_with_a_warning() {
    let (a, v) = answer(&envelope(
        "admission.k8s.io/v1beta1",
        "AdmissionReview",
        pod_request("CREATE", seed_pod()),
    ));
    assert_eq!(a.outcome, Outcome::Declined);
    assert_eq!(v["apiVersion"], "admission.k8s.io/v1beta1");
    assert_eq!(v["response"]["allowed"], true);
    assert!(v["response"].get("patch").is_none());
    let w = v["response"]["warnings"][0].as_str().unwrap();
    assert!(w.contains("admission.k8s.io/v1beta1"), "{w}");
    let (_, v) = answer(&envelope(
        ADMISSION_V1,
        "AdmissionRequest",
        pod_request("CREATE", seed_pod()),
    ));
    assert_eq!(v["apiVersion"], ADMISSION_V1);
    assert!(
        v["response"]["warnings"][0]
            .as_str()
            .unwrap()
            .contains("AdmissionRequest")
    );
    let mut req = pod_request("CREATE", json!({}));
    req["kind"] = json!({"group": "apps", "version": "v1", "kind": "Deployment"});
    let (_, v) = answer(&envelope(ADMISSION_V1, "AdmissionReview", req));
    assert!(
        v["response"]["warnings"][0]
            .as_str()
            .unwrap()
            .contains("Deployment")
    );
    let mut req = pod_request("CREATE", seed_pod());
    req["subResource"] = json!("status");
    let (_, v) = answer(&envelope(ADMISSION_V1, "AdmissionReview", req));
    assert!(
        v["response"]["warnings"][0]
            .as_str()
            .unwrap()
            .contains("subresource status")
    );
    let (_, v) = answer(&envelope(
        ADMISSION_V1,
        "AdmissionReview",
        pod_request("CREATE", json!("pod")),
    ));
    assert!(
        v["response"]["warnings"][0]
            .as_str()
            .unwrap()
            .contains("not a Pod")
    );
}

#[test]
fn bodies_with_nothing_to_answer_to_are_errors_with_a_reason() {
    let e = review(
        b"{\"apiVersion\":",
        &Names::default(),
        &NetworkFeeds::default(),
    )
    .unwrap_err();
    assert!(matches!(e, NotAReview::Json(_)), "{e}");
    assert!(
        e.to_string().starts_with("the request body is not JSON"),
        "{e}"
    );
    for body in [
        json!([]),
        json!({"request": "x"}),
        json!({"request": {"kind": {}}}),
        json!({"request": {"uid": 7}}),
    ] {
        let e = review(
            &serde_json::to_vec(&body).unwrap(),
            &Names::default(),
            &NetworkFeeds::default(),
        )
        .unwrap_err();
        assert!(matches!(e, NotAReview::Shape(_)), "{body}: {e}");
        assert!(e.to_string().contains("admission.k8s.io/v1"), "{e}");
    }
}

/// The response written field by field is the document serde would write for the same
/// fields, in the same order, with strings that need escaping and the patch decoding back
/// to its bytes.
#[test]
fn the_response_is_the_document_serde_would_write() {
    use base64::Engine as _;
    let patch = br#"[{"op":"add","path":"/a~1b","value":"q\"uote"}]"#;
    let warnings = [
        "topoalign: \"quoted\" \\ and\nnewline".to_string(),
        "second ✓".to_string(),
    ];
    let uid = "uid-\"1\"\t";
    for (p, w) in [
        (Some(&patch[..]), &warnings[..]),
        (Some(&patch[..]), &[][..]),
        (None, &warnings[..]),
        (None, &[][..]),
    ] {
        let body = response("admission.k8s.io/v1beta1", uid, p, w);
        let text = std::str::from_utf8(&body).unwrap();
        let mut want = serde_json::json!({
            "apiVersion": "admission.k8s.io/v1beta1",
            "kind": "AdmissionReview",
            "response": {"uid": uid, "allowed": true}
        });
        if let Some(p) = p {
            want["response"]["patchType"] = "JSONPatch".into();
            want["response"]["patch"] = base64::engine::general_purpose::STANDARD.encode(p).into();
        }
        if !w.is_empty() {
            want["response"]["warnings"] = serde_json::json!(w);
        }
        // Same text as serde's writer (fields in this order), so the same document.
        assert_eq!(text, serde_json::to_string(&want).unwrap());
    }
}
