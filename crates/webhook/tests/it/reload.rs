//! The certificate re-read: a rotated pair is served from the next handshake on; a pair
//! that cannot be used is not taken, the previous one keeps serving, and it is said.

use std::time::Duration;

use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject;
use topoalign_webhook::Reread;

use crate::common::{call, connect, fixture, limits, metric, start};

async fn served(addr: std::net::SocketAddr) -> Vec<u8> {
    let s = connect(addr).await;
    s.get_ref().1.peer_certificates().unwrap()[0].to_vec()
}

fn der(name: &str) -> Vec<u8> {
    CertificateDer::from_pem_file(fixture(name))
        .unwrap()
        .to_vec()
}

#[tokio::test]
async fn a_rotated_pair_is_served_and_a_bad_one_is_refused() {
    let r = start(limits(64), 1 << 20, Duration::from_millis(100)).await;
    let files = r.tls();
    assert_eq!(served(r.addr).await, der("a.crt"));
    assert!(matches!(r.app.reread_certificates(), Reread::Same));
    // cert-manager rotates: the server picks b up within a few re-read intervals.
    std::fs::copy(fixture("b.crt"), &files.cert).unwrap();
    std::fs::copy(fixture("b.key"), &files.key).unwrap();
    let mut seen = false;
    for _ in 0..50 {
        if served(r.addr).await == der("b.crt") {
            seen = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(seen, "the rotated certificate is never served");
    // A key of another certificate: refused, b still served, /readyz says why.
    std::fs::copy(fixture("a.crt"), &files.cert).unwrap();
    match r.app.reread_certificates() {
        Reread::Failed(e) => assert!(e.to_string().contains("tls.crt with"), "{e}"),
        other => panic!("a mismatched pair was taken: {other:?}"),
    }
    assert_eq!(served(r.addr).await, der("b.crt"));
    let (code, body) = call(r.addr, "GET", "/readyz", b"").await;
    assert_eq!(code, 200);
    assert!(body.contains("cannot be used"), "{body}");
    // A half-written certificate: refused too.
    std::fs::write(&files.cert, b"-----BEGIN CERTIFICATE-----\nMIIB").unwrap();
    assert!(matches!(r.app.reread_certificates(), Reread::Failed(_)));
    assert!(
        metric(
            r.addr,
            "topoalign_webhook_tls_reloads_total{result=\"failed\"}"
        )
        .await
        .unwrap()
            >= 2.0
    );
    // Repaired: served again, and /readyz no longer notes a failure.
    std::fs::copy(fixture("a.crt"), &files.cert).unwrap();
    std::fs::copy(fixture("a.key"), &files.key).unwrap();
    assert!(matches!(r.app.reread_certificates(), Reread::Reloaded));
    assert_eq!(served(r.addr).await, der("a.crt"));
    assert!(
        !call(r.addr, "GET", "/readyz", b"")
            .await
            .1
            .contains("cannot")
    );
}

#[test]
fn a_bad_pair_at_start_names_the_file() {
    use topoalign_webhook::{Certificates, TlsFiles};
    let dir = tempfile::tempdir().unwrap();
    let files = TlsFiles::in_dir(dir.path());
    let e = Certificates::load(files.clone()).unwrap_err().to_string();
    assert!(e.starts_with("reading ") && e.contains("tls.crt"), "{e}");
    std::fs::write(&files.cert, "not pem").unwrap();
    std::fs::copy(fixture("a.key"), &files.key).unwrap();
    let e = Certificates::load(files.clone()).unwrap_err().to_string();
    assert!(e.contains("tls.crt: no CERTIFICATE block"), "{e}");
    std::fs::copy(fixture("a.crt"), &files.cert).unwrap();
    std::fs::write(&files.key, "-----BEGIN PRIVATE KEY-----\n").unwrap();
    let e = Certificates::load(files.clone()).unwrap_err().to_string();
    assert!(e.contains("tls.key: no usable PEM private key"), "{e}");
    std::fs::copy(fixture("b.key"), &files.key).unwrap();
    let e = Certificates::load(files).unwrap_err().to_string();
    assert!(e.contains("with"), "{e}");
}
