//! The driver's HTTP endpoints (axum): `/healthz` (the process serves), `/readyz` (the
//! pool is published and in sync, and the kubelet plugin serves) and `/metrics`
//! (OpenMetrics text). Anything else is 404; methods other than GET are 405.

use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::get;
use tokio::net::TcpListener;

use crate::error::DriverError;
use crate::metrics::Metrics;

/// What `/readyz` reports on, updated by the publisher and the plugin.
#[derive(Debug)]
pub struct Health {
    published: AtomicBool,
    plugin_serving: AtomicBool,
    plugin_required: bool,
    last_publish_error: Mutex<Option<String>>,
}

impl Health {
    /// A driver that is not ready yet; `plugin_required` is false with `--no-plugin`.
    pub fn new(plugin_required: bool) -> Self {
        Health {
            published: AtomicBool::new(false),
            plugin_serving: AtomicBool::new(false),
            plugin_required,
            last_publish_error: Mutex::new(None),
        }
    }

    /// The last publishing round succeeded: the API server holds the desired pool.
    pub fn set_published(&self) {
        self.published.store(true, Ordering::SeqCst);
        if let Ok(mut e) = self.last_publish_error.lock() {
            *e = None;
        }
    }

    /// The last publishing round failed with `why`.
    pub fn set_publish_failed(&self, why: String) {
        self.published.store(false, Ordering::SeqCst);
        if let Ok(mut e) = self.last_publish_error.lock() {
            *e = Some(why);
        }
    }

    /// The kubelet plugin's sockets serve (or stopped serving).
    pub fn set_plugin_serving(&self, serving: bool) {
        self.plugin_serving.store(serving, Ordering::SeqCst);
    }

    /// Why the driver is not ready; empty when it is.
    pub fn not_ready_reasons(&self) -> Vec<String> {
        let mut why = Vec::new();
        if !self.published.load(Ordering::SeqCst) {
            let last = self.last_publish_error.lock().ok().and_then(|e| e.clone());
            why.push(match last {
                Some(e) => format!("ResourceSlices not published: {e}"),
                None => "ResourceSlices not published yet".to_string(),
            });
        }
        if self.plugin_required && !self.plugin_serving.load(Ordering::SeqCst) {
            why.push("kubelet plugin not serving yet".to_string());
        }
        why
    }
}

/// What the handlers share.
#[derive(Debug, Clone)]
pub struct AppState {
    /// Readiness.
    pub health: Arc<Health>,
    /// Metrics.
    pub metrics: Arc<Metrics>,
}

/// The router with the three endpoints.
pub fn router(state: AppState) -> Router {
    Router::new()
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics))
        .with_state(state)
}

async fn healthz() -> &'static str {
    "ok\n"
}

async fn readyz(State(s): State<AppState>) -> impl IntoResponse {
    let why = s.health.not_ready_reasons();
    if why.is_empty() {
        (StatusCode::OK, "ok\n".to_string())
    } else {
        (
            StatusCode::SERVICE_UNAVAILABLE,
            format!("not ready: {}\n", why.join("; ")),
        )
    }
}

async fn metrics(State(s): State<AppState>) -> impl IntoResponse {
    (
        [(
            header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        s.metrics.encode(),
    )
}

/// Serves the endpoints on `listener` until `shutdown` completes.
pub async fn serve(
    listener: TcpListener,
    state: AppState,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), DriverError> {
    axum::serve(listener, router(state))
        .with_graceful_shutdown(shutdown)
        .await
        .map_err(DriverError::Serve)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// A raw HTTP/1.1 GET against a real listening server.
    async fn get(addr: std::net::SocketAddr, method: &str, path: &str) -> String {
        let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
        let req = format!("{method} {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
        s.write_all(req.as_bytes()).await.unwrap();
        let mut out = String::new();
        s.read_to_string(&mut out).await.unwrap();
        out
    }

    #[tokio::test]
    async fn endpoints_answer_over_tcp() {
        let health = Arc::new(Health::new(true));
        let metrics = Arc::new(Metrics::new());
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let server = tokio::spawn(serve(
            listener,
            AppState {
                health: health.clone(),
                metrics: metrics.clone(),
            },
            async move {
                let _ = rx.await;
            },
        ));

        assert!(
            get(addr, "GET", "/healthz")
                .await
                .starts_with("HTTP/1.1 200")
        );
        let r = get(addr, "GET", "/readyz").await;
        assert!(r.starts_with("HTTP/1.1 503"), "{r}");
        assert!(
            r.contains("ResourceSlices not published yet") && r.contains("plugin"),
            "{r}"
        );

        health.set_publish_failed("connection refused".into());
        assert!(
            get(addr, "GET", "/readyz")
                .await
                .contains("connection refused")
        );
        health.set_published();
        health.set_plugin_serving(true);
        assert!(
            get(addr, "GET", "/readyz")
                .await
                .starts_with("HTTP/1.1 200")
        );

        metrics.publishes.inc();
        let m = get(addr, "GET", "/metrics").await;
        assert!(m.contains("application/openmetrics-text"), "{m}");
        assert!(m.contains("topoalign_driver_publishes_total 1"), "{m}");

        assert!(get(addr, "GET", "/nope").await.starts_with("HTTP/1.1 404"));
        assert!(
            get(addr, "POST", "/metrics")
                .await
                .starts_with("HTTP/1.1 405")
        );

        tx.send(()).unwrap();
        server.await.unwrap().unwrap();
    }

    #[test]
    fn plugin_is_not_required_with_no_plugin() {
        let h = Health::new(false);
        h.set_published();
        assert!(h.not_ready_reasons().is_empty());
    }
}
