//! A webhook server on loopback with the test certificates, and a TLS client for it.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::client::TlsStream;
use topoalign_probes::{Limits, Stopped};
use topoalign_webhook::{App, Certificates, Names, ServeConfig, ServeError, TlsFiles, serve};

/// A file of `tests/it/tls`: `ca.crt`, and two server pairs `a` and `b` (127.0.0.1,
/// localhost) signed by it.
pub(crate) fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/it/tls")
        .join(name)
}

/// A running server.
pub(crate) struct Running {
    pub(crate) addr: SocketAddr,
    pub(crate) app: Arc<App>,
    pub(crate) dir: tempfile::TempDir,
    pub(crate) stop: Option<tokio::sync::oneshot::Sender<()>>,
    pub(crate) server: tokio::task::JoinHandle<Result<Stopped, ServeError>>,
}

impl Running {
    /// The served certificate files (copies of pair `a` at start).
    pub(crate) fn tls(&self) -> TlsFiles {
        TlsFiles::in_dir(self.dir.path())
    }
}

/// Short limits for tests.
pub(crate) fn limits(max_connections: usize) -> Limits {
    Limits {
        header_read_timeout: Duration::from_millis(800),
        body_read_timeout: Duration::from_millis(800),
        idle_timeout: Duration::from_secs(5),
        max_connections,
        shutdown_grace: Duration::from_millis(700),
    }
}

/// Starts a server with pair `a`, `limits`, a body limit and a re-read interval.
pub(crate) async fn start(limits: Limits, max_body_bytes: usize, reread: Duration) -> Running {
    let dir = tempfile::tempdir().unwrap();
    std::fs::copy(fixture("a.crt"), dir.path().join("tls.crt")).unwrap();
    std::fs::copy(fixture("a.key"), dir.path().join("tls.key")).unwrap();
    let cfg = ServeConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        tls: TlsFiles::in_dir(dir.path()),
        names: Names::default(),
        limits,
        max_body_bytes,
        reread_every: reread,
    };
    let certs = Arc::new(Certificates::load(cfg.tls.clone()).unwrap());
    let app = Arc::new(App::new(&cfg, certs));
    let listener = TcpListener::bind(cfg.listen).await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(serve(listener, app.clone(), limits, reread, async {
        let _ = stopped.await;
    }));
    Running {
        addr,
        app,
        dir,
        stop: Some(stop),
        server,
    }
}

/// A TLS connection that trusts only the test CA.
pub(crate) async fn connect(addr: SocketAddr) -> TlsStream<TcpStream> {
    let mut roots = rustls::RootCertStore::empty();
    roots
        .add(CertificateDer::from_pem_file(fixture("ca.crt")).unwrap())
        .unwrap();
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_root_certificates(roots)
    .with_no_client_auth();
    let connector = tokio_rustls::TlsConnector::from(Arc::new(config));
    let tcp = TcpStream::connect(addr).await.unwrap();
    let name = ServerName::try_from("127.0.0.1").unwrap();
    connector.connect(name, tcp).await.unwrap()
}

/// One request on a fresh TLS connection (`Connection: close`): status and body.
pub(crate) async fn call(addr: SocketAddr, method: &str, path: &str, body: &[u8]) -> (u16, String) {
    let mut s = connect(addr).await;
    let head = format!(
        "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    s.write_all(head.as_bytes()).await.unwrap();
    s.write_all(body).await.unwrap();
    s.flush().await.unwrap();
    read_response(&mut s).await
}

/// Reads a response to its end (the server closes the connection); status and body.
pub(crate) async fn read_response<S: tokio::io::AsyncRead + Unpin>(s: &mut S) -> (u16, String) {
    let mut out = Vec::new();
    // A TLS peer may close without close_notify after the response: keep what came.
    let _ = tokio::time::timeout(Duration::from_secs(10), s.read_to_end(&mut out)).await;
    let text = String::from_utf8_lossy(&out).into_owned();
    let status = text
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let body = text
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .unwrap_or_default();
    (status, body)
}

/// The value of a metric line that starts with `prefix` in `/metrics`.
pub(crate) async fn metric(addr: SocketAddr, prefix: &str) -> Option<f64> {
    let (_, text) = call(addr, "GET", "/metrics", b"").await;
    text.lines()
        .find(|l| l.starts_with(prefix))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
}

/// An AdmissionReview of a pod's creation in namespace `dk`.
pub(crate) fn review_of(pod: serde_json::Value) -> Vec<u8> {
    serde_json::to_vec(&serde_json::json!({
        "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "request": {"uid": "u-1", "kind": {"group": "", "version": "v1", "kind": "Pod"},
            "resource": {"group": "", "version": "v1", "resource": "pods"},
            "namespace": "dk", "operation": "CREATE", "object": pod}}))
    .unwrap()
}

/// Seed 000's pod: 4 GPUs + 4 VFs (limits and the requests defaulted from them).
pub(crate) fn seed_pod() -> serde_json::Value {
    let r = serde_json::json!({"amd.com/gpu": "4", "nvidia.com/sriov-rdma-vf": "4"});
    serde_json::json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "topology-test", "namespace": "dk"},
        "spec": {"containers": [{"name": "test", "image": "docker.io/ubuntu:22.04",
            "resources": {"limits": r, "requests": r}}]}})
}
