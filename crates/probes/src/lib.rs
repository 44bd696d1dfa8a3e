//! The probe endpoints of topoalign's long-running processes (the DRA driver, the node
//! agent, the scheduler extender), defined once:
//!
//! - `GET /healthz`: `200 ok` while the process serves;
//! - `GET /readyz`: `200 ok`, or `503 not ready: <reasons>` naming what is missing; then
//!   one line per [`Probe::notes`] (a mode the process runs in, ready or not);
//! - `GET /metrics`: the process's Prometheus registry as OpenMetrics text.
//!
//! Other paths answer 404, other methods 405 (axum's routing).
//!
//! The rest of the process kit they are all assembled from: `kit`, the server all of
//! them run on (timeouts, connection cap, bounded shutdown); `process`, the API client
//! from a kubeconfig, the SIGTERM/SIGINT shutdown future and the tokio runtime;
//! `logging`, the log format and the one log subscriber; `cluster`, one-shot reads of
//! the live cluster (lists and gets whose errors name what and the server, for commands
//! that look at a cluster once); `args` (the `clap` feature),
//! the flags every process takes, defined once ([`ProcessArgs`]: `--kubeconfig`,
//! `--listen`, `--log-format`, `--log-filter`), each process saying its own defaults.

#[cfg(feature = "clap")]
mod args;
mod cluster;
mod interval;
mod kit;
mod logging;
mod process;

#[cfg(feature = "clap")]
pub use args::{KubeArgs, ProcessArgs, ProcessDefaults};
pub use cluster::{ClusterObjects, ClusterReader, PodDevices, ReadError, read_cluster};
pub use interval::{IntervalError, parse_interval};
pub use kit::{
    BodyError, ConnStats, Handshake, Limits, Plain, Stopped, read_body, serve_with,
    serve_with_handshake,
};
pub use logging::LogFormat;
pub use logging::{COMMAND_FILTER, install_command_logging};
pub use process::{ClientError, Threads, kube_client, kube_config, runtime, shutdown_signals};
pub use process::{Serving, Signalled, StartError, say_stopping, serving};

use std::future::Future;
use std::sync::Arc;

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use prometheus_client::registry::Registry;
use tokio::net::TcpListener;

/// The content type of `/metrics`.
pub const OPENMETRICS: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// What a process tells its probes.
pub trait Probe: Send + Sync + 'static {
    /// Why the process is not ready; empty when it is.
    fn not_ready(&self) -> Vec<String>;
    /// What `/readyz` says after its verdict, one line each (a degraded mode the process
    /// is ready in, say); none by default.
    fn notes(&self) -> Vec<String> {
        Vec::new()
    }
    /// Its metrics as OpenMetrics text ([`encode`] of its registry).
    fn metrics(&self) -> String;
}

/// A registry as OpenMetrics text.
pub fn encode(registry: &Registry) -> String {
    let mut out = String::new();
    match prometheus_client::encoding::text::encode(&mut out, registry) {
        Ok(()) => out,
        Err(e) => format!("# encoding failed: {e}\n"),
    }
}

/// The router with `/healthz`, `/readyz` and `/metrics` (merge it into a router with
/// more routes, or serve it alone with [`serve`]).
pub fn router<P: Probe>(probe: Arc<P>) -> Router {
    Router::new()
        .route("/healthz", get(|| async { "ok\n" }))
        .route("/readyz", get(readyz::<P>))
        .route("/metrics", get(metrics::<P>))
        .with_state(probe)
}

async fn readyz<P: Probe>(State(p): State<Arc<P>>) -> Response {
    let why = p.not_ready();
    let notes: String = p.notes().iter().map(|n| format!("{n}\n")).collect();
    if why.is_empty() {
        (StatusCode::OK, format!("ok\n{notes}")).into_response()
    } else {
        (
            StatusCode::SERVICE_UNAVAILABLE,
            format!("not ready: {}\n{notes}", why.join("; ")),
        )
            .into_response()
    }
}

async fn metrics<P: Probe>(State(p): State<Arc<P>>) -> Response {
    ([(header::CONTENT_TYPE, OPENMETRICS)], p.metrics()).into_response()
}

/// Serves [`router`] on `listener` with [`Limits::probes`] until `shutdown` completes;
/// returns within its shutdown grace (2 s) whatever clients do.
pub async fn serve<P: Probe>(
    listener: TcpListener,
    probe: Arc<P>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    serve_with(
        listener,
        router(probe),
        Limits::probes(),
        Arc::new(ConnStats::default()),
        shutdown,
    )
    .await
    .map(|_| ())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use std::sync::Mutex;

    use prometheus_client::metrics::counter::Counter;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    use super::*;

    struct Fake {
        why: Mutex<Vec<String>>,
        notes: Mutex<Vec<String>>,
        registry: Registry,
    }

    impl Probe for Fake {
        fn not_ready(&self) -> Vec<String> {
            self.why.lock().unwrap().clone()
        }
        fn notes(&self) -> Vec<String> {
            self.notes.lock().unwrap().clone()
        }
        fn metrics(&self) -> String {
            encode(&self.registry)
        }
    }

    /// A raw HTTP/1.1 request against the listening server.
    async fn call(addr: std::net::SocketAddr, method: &str, path: &str) -> String {
        let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
        let req = format!("{method} {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
        s.write_all(req.as_bytes()).await.unwrap();
        let mut out = String::new();
        s.read_to_string(&mut out).await.unwrap();
        out
    }

    #[tokio::test]
    async fn the_three_endpoints_answer_over_tcp() {
        let mut registry = Registry::default();
        let c = Counter::<u64>::default();
        registry.register("probe_calls", "calls", c.clone());
        c.inc();
        let p = Arc::new(Fake {
            why: Mutex::new(vec!["not listed yet".into(), "no plugin".into()]),
            notes: Mutex::new(Vec::new()),
            registry,
        });
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let server = tokio::spawn(serve(listener, p.clone(), async {
            let _ = stopped.await;
        }));
        assert!(
            call(addr, "GET", "/healthz")
                .await
                .starts_with("HTTP/1.1 200")
        );
        let r = call(addr, "GET", "/readyz").await;
        assert!(r.starts_with("HTTP/1.1 503"), "{r}");
        assert!(r.ends_with("not ready: not listed yet; no plugin\n"), "{r}");
        p.why.lock().unwrap().clear();
        let r = call(addr, "GET", "/readyz").await;
        assert!(
            r.starts_with("HTTP/1.1 200") && r.ends_with("\r\n\r\nok\n"),
            "{r}"
        );
        // Notes follow the verdict, one line each, ready or not.
        p.notes.lock().unwrap().push("mode plain-only: why".into());
        let r = call(addr, "GET", "/readyz").await;
        assert!(r.ends_with("\r\n\r\nok\nmode plain-only: why\n"), "{r}");
        p.why.lock().unwrap().push("no plugin".into());
        let r = call(addr, "GET", "/readyz").await;
        assert!(
            r.ends_with("not ready: no plugin\nmode plain-only: why\n"),
            "{r}"
        );
        let m = call(addr, "GET", "/metrics").await;
        assert!(m.contains(OPENMETRICS), "{m}");
        assert!(m.contains("probe_calls_total 1"), "{m}");
        assert!(m.trim_end().ends_with("# EOF"), "{m}");
        assert!(call(addr, "GET", "/nope").await.starts_with("HTTP/1.1 404"));
        assert!(
            call(addr, "POST", "/metrics")
                .await
                .starts_with("HTTP/1.1 405")
        );
        stop.send(()).unwrap();
        server.await.unwrap().unwrap();
    }

    /// The driver's and the agent's probe ports: SIGTERM (the shutdown future) while a
    /// client holds a half-sent request still ends the server within its 2 s grace.
    #[tokio::test]
    async fn probe_ports_stop_in_time_whatever_clients_do() {
        let p = Arc::new(Fake {
            why: Mutex::new(Vec::new()),
            notes: Mutex::new(Vec::new()),
            registry: Registry::default(),
        });
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let server = tokio::spawn(serve(listener, p, async {
            let _ = stopped.await;
        }));
        let mut half = tokio::net::TcpStream::connect(addr).await.unwrap();
        half.write_all(b"GET /metrics HTTP/1.1\r\nHost")
            .await
            .unwrap();
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        let t0 = std::time::Instant::now();
        stop.send(()).unwrap();
        tokio::time::timeout(std::time::Duration::from_secs(4), server)
            .await
            .expect("stopped within the bound")
            .unwrap()
            .unwrap();
        assert!(t0.elapsed() < std::time::Duration::from_millis(2_600));
    }
}
