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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_http2_concurrent_reviews_share_one_connection() {
    use std::sync::Arc;

    use http_body_util::{BodyExt, Full};
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, ServerName};

    let r = start(limits(64), 1 << 20, Duration::from_secs(60)).await;
    let mut roots = rustls::RootCertStore::empty();
    roots
        .add(CertificateDer::from_pem_file(crate::common::fixture("ca.crt")).unwrap())
        .unwrap();
    let mut config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_root_certificates(roots)
    .with_no_client_auth();
    config.alpn_protocols = vec![b"h2".to_vec()];
    let tcp = tokio::net::TcpStream::connect(r.addr).await.unwrap();
    let tls = tokio_rustls::TlsConnector::from(Arc::new(config))
        .connect(ServerName::try_from("127.0.0.1").unwrap(), tcp)
        .await
        .unwrap();
    assert_eq!(tls.get_ref().1.alpn_protocol(), Some(b"h2".as_slice()));
    let (send, conn) = hyper::client::conn::http2::handshake(
        hyper_util::rt::TokioExecutor::new(),
        hyper_util::rt::TokioIo::new(tls),
    )
    .await
    .unwrap();
    tokio::spawn(conn);
    let body = review_of(seed_pod());
    let mut all = tokio::task::JoinSet::new();
    for _ in 0..50 {
        let mut s = send.clone();
        let req = hyper::Request::post("https://127.0.0.1/mutate")
            .header("content-type", "application/json")
            .body(Full::new(bytes_of(&body)))
            .unwrap();
        all.spawn(async move {
            let resp = s.send_request(req).await.unwrap();
            let status = resp.status();
            let bytes = resp.into_body().collect().await.unwrap().to_bytes();
            (status, serde_json::from_slice::<Value>(&bytes).unwrap())
        });
    }
    while let Some(done) = all.join_next().await {
        let (status, v) = done.unwrap();
        assert_eq!(status, 200);
        assert_eq!(v["response"]["patchType"], "JSONPatch");
    }
    assert_eq!(
        metric(
            r.addr,
            "topoalign_webhook_admissions_total{outcome=\"rewritten\"}"
        )
        .await,
        Some(50.0)
    );
}

fn bytes_of(b: &[u8]) -> hyper::body::Bytes {
    hyper::body::Bytes::copy_from_slice(b)
}
