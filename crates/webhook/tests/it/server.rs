//! Reviews and probes over real TLS.

use std::time::Duration;

use base64::Engine as _;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::common::{call, limits, metric, review_of, seed_pod, start};

#[tokio::test]
async fn a_review_over_tls_is_answered_with_the_patch_and_counted() {
    let r = start(limits(64), 1 << 20, Duration::from_secs(60)).await;
    let (code, body) = call(r.addr, "POST", "/mutate", &review_of(seed_pod())).await;
    assert_eq!(code, 200, "{body}");
    let v: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v["response"]["uid"], "u-1");
    assert_eq!(v["response"]["allowed"], true);
    let patch = base64::engine::general_purpose::STANDARD
        .decode(v["response"]["patch"].as_str().unwrap())
        .unwrap();
    let patch: json_patch::Patch = serde_json::from_slice(&patch).unwrap();
    let mut pod = seed_pod();
    json_patch::patch(&mut pod, &patch).unwrap();
    assert_eq!(
        pod["spec"]["containers"][0]["resources"]["limits"],
        json!({"topoalign.dev/gpu-nic-pair": "4"})
    );
    // A pod without devices: 200, no patch.
    let plain = json!({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c"}]}});
    let (code, body) = call(r.addr, "POST", "/mutate", &review_of(plain)).await;
    assert_eq!(code, 200);
    assert_eq!(
        serde_json::from_str::<Value>(&body).unwrap()["response"],
        json!({"uid": "u-1", "allowed": true})
    );
    assert_eq!(
        call(r.addr, "GET", "/healthz", b"").await,
        (200, "ok\n".into())
    );
    assert_eq!(call(r.addr, "GET", "/readyz", b"").await.0, 200);
    assert_eq!(
        metric(
            r.addr,
            "topoalign_webhook_admissions_total{outcome=\"rewritten\"}"
        )
        .await,
        Some(1.0)
    );
    assert_eq!(
        metric(
            r.addr,
            "topoalign_webhook_admissions_total{outcome=\"untouched\"}"
        )
        .await,
        Some(1.0)
    );
    assert_eq!(
        metric(r.addr, "topoalign_webhook_admission_duration_seconds_count").await,
        Some(2.0)
    );
}

#[tokio::test]
async fn bodies_that_are_no_review_get_4xx_never_5xx() {
    let r = start(limits(64), 64 << 10, Duration::from_secs(60)).await;
    let (code, body) = call(r.addr, "POST", "/mutate", b"{\"apiVersion\":").await;
    assert_eq!(code, 400, "{body}");
    assert!(body.contains("not JSON"), "{body}");
    let (code, body) = call(r.addr, "POST", "/mutate", b"{\"kind\":\"AdmissionReview\"}").await;
    assert_eq!(code, 400, "{body}");
    assert!(body.contains("no request object"), "{body}");
    let big = vec![b' '; 1 << 20];
    let (code, body) = call(r.addr, "POST", "/mutate", &big).await;
    assert_eq!(code, 413, "{body}");
    assert_eq!(call(r.addr, "GET", "/mutate", b"").await.0, 405);
    assert_eq!(call(r.addr, "GET", "/nope", b"").await.0, 404);
    for reason in ["not_json", "not_review", "too_large"] {
        assert_eq!(
            metric(
                r.addr,
                &format!("topoalign_webhook_bad_requests_total{{reason=\"{reason}\"}}")
            )
            .await,
            Some(1.0),
            "{reason}"
        );
    }
}

#[tokio::test]
async fn plain_http_on_the_tls_port_is_closed_and_counted() {
    let r = start(limits(64), 1 << 20, Duration::from_secs(60)).await;
    let mut s = tokio::net::TcpStream::connect(r.addr).await.unwrap();
    s.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .unwrap();
    let mut out = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(5), s.read_to_end(&mut out)).await;
    assert!(!String::from_utf8_lossy(&out).contains("200 OK"));
    assert_eq!(
        metric(r.addr, "topoalign_webhook_handshakes_failed_total").await,
        Some(1.0)
    );
}
