//! The HTTPS server: `POST /mutate` (the AdmissionReview), `GET /healthz`, `/readyz`,
//! `/metrics`, on the probes kit (header, body and idle timeouts, connection cap, bounded
//! shutdown) behind a TLS handshake with the certificate of [`Certificates`], re-read
//! every [`ServeConfig::reread_every`].
//!
//! A review is answered on the async worker that read it: the decision is pure and takes
//! microseconds. Nothing a client sends gets a 5xx: a body that is no AdmissionReview
//! gets 400, one too large 413, one sent too slowly 408; every review gets 200.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant, UNIX_EPOCH};

use axum::Router;
use axum::extract::{Request, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use tokio::net::{TcpListener, TcpStream};
use topoalign_probes::{BodyError, ConnStats, Handshake, Limits, Probe, Stopped};

use crate::error::{NotAReview, ServeError};
use crate::metrics::Metrics;
use crate::names::Names;
use crate::networks::NetworkFeeds;
use crate::review::review;
use crate::tls::{Certificates, Reread, TlsFiles};

/// The path the API server posts reviews to.
pub const MUTATE_PATH: &str = "/mutate";

/// How the server runs.
#[derive(Debug, Clone)]
pub struct ServeConfig {
    /// The address to listen on.
    pub listen: SocketAddr,
    /// The certificate and key.
    pub tls: TlsFiles,
    /// The resource names.
    pub names: Names,
    /// The server kit's limits.
    pub limits: Limits,
    /// The largest review body read, in bytes (larger: 413).
    pub max_body_bytes: usize,
    /// How often the certificate files are read again.
    pub reread_every: Duration,
}

/// What the handlers share.
#[derive(Debug)]
pub struct App {
    names: Names,
    feeds: RwLock<NetworkFeeds>,
    certs: Arc<Certificates>,
    /// The metrics.
    pub metrics: Metrics,
    conns: Arc<ConnStats>,
    max_body_bytes: usize,
    body_read_timeout: Duration,
}

impl App {
    /// An app serving `certs` with the configuration's names and limits.
    pub fn new(cfg: &ServeConfig, certs: Arc<Certificates>) -> Self {
        let conns = Arc::new(ConnStats::default());
        let metrics = Metrics::new(conns.clone());
        set_loaded(&metrics, &certs);
        App {
            feeds: RwLock::new(NetworkFeeds::configured(&cfg.names.sriov_networks)),
            names: cfg.names.clone(),
            certs,
            metrics,
            conns,
            max_body_bytes: cfg.max_body_bytes,
            body_read_timeout: cfg.limits.body_read_timeout,
        }
    }

    /// Reads the certificate files again, counting and logging what changed.
    pub fn reread_certificates(&self) -> Reread {
        let r = self.certs.reread();
        match &r {
            Reread::Same => {}
            Reread::Reloaded => {
                tracing::info!("serving certificate re-read: serving the new pair");
                Metrics::count(&self.metrics.tls_reloads, "result", "reloaded");
                set_loaded(&self.metrics, &self.certs);
            }
            Reread::Failed(e) => {
                tracing::warn!(error = %e, "serving certificate changed but cannot be used; still serving the previous one");
                Metrics::count(&self.metrics.tls_reloads, "result", "failed");
            }
        }
        r
    }
}

fn set_loaded(metrics: &Metrics, certs: &Certificates) {
    let secs = certs
        .loaded_at()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX));
    metrics.certificate_loaded.set(secs);
}

impl Probe for App {
    fn not_ready(&self) -> Vec<String> {
        Vec::new()
    }

    fn notes(&self) -> Vec<String> {
        self.certs
            .failing()
            .map(|why| format!("certificate files changed but cannot be used (the previous certificate is still served): {why}"))
            .into_iter()
            .collect()
    }

    fn metrics(&self) -> String {
        self.metrics.render()
    }
}

/// The router: `/mutate` and the probes.
pub fn router(app: Arc<App>) -> Router {
    Router::new()
        .route(MUTATE_PATH, post(mutate))
        .with_state(app.clone())
        .merge(topoalign_probes::router(app))
}

async fn mutate(State(app): State<Arc<App>>, req: Request) -> Response {
    let body = match topoalign_probes::read_body(
        req.into_body(),
        app.max_body_bytes,
        app.body_read_timeout,
    )
    .await
    {
        Ok(b) => b,
        Err(e) => {
            let (code, reason) = match &e {
                BodyError::TooLarge { .. } => (StatusCode::PAYLOAD_TOO_LARGE, "too_large"),
                BodyError::TimedOut(_) => (StatusCode::REQUEST_TIMEOUT, "body_timeout"),
                BodyError::Read(_) => (StatusCode::BAD_REQUEST, "body_read"),
            };
            return refuse(&app, code, reason, e.to_string());
        }
    };
    let t0 = Instant::now();
    let answer = {
        let feeds = app.feeds.read().unwrap_or_else(|p| p.into_inner());
        review(&body, &app.names, &feeds)
    };
    match answer {
        Ok(a) => {
            app.metrics.duration.observe(t0.elapsed().as_secs_f64());
            Metrics::count(&app.metrics.admissions, "outcome", a.outcome.as_str());
            if let Some(d) = &a.decision {
                app.metrics.warnings.inc_by(d.warnings.len() as u64);
                if !d.warnings.is_empty() {
                    tracing::info!(outcome = a.outcome.as_str(), warnings = ?d.warnings, "review answered with warnings");
                }
            }
            ([(header::CONTENT_TYPE, "application/json")], a.body).into_response()
        }
        Err(e) => {
            let reason = match e {
                NotAReview::Json(_) => "not_json",
                NotAReview::Shape(_) => "not_review",
            };
            refuse(&app, StatusCode::BAD_REQUEST, reason, e.to_string())
        }
    }
}

fn refuse(app: &App, code: StatusCode, reason: &str, message: String) -> Response {
    tracing::warn!(reason, %message, "request refused before a review was read");
    Metrics::count(&app.metrics.bad_requests, "reason", reason);
    (code, format!("{message}\n")).into_response()
}

/// The TLS handshake of each connection.
#[derive(Clone)]
struct Tls(tokio_rustls::TlsAcceptor);

impl Handshake for Tls {
    type Stream = tokio_rustls::server::TlsStream<TcpStream>;
    async fn handshake(&self, tcp: TcpStream) -> std::io::Result<Self::Stream> {
        self.0.accept(tcp).await
    }
    fn plain_refusal(&self) -> bool {
        false
    }
}

/// Serves `app` on `listener` until `shutdown` resolves, then for at most the limits'
/// shutdown grace; the certificate files are read again every `reread_every`.
pub async fn serve(
    listener: TcpListener,
    app: Arc<App>,
    limits: Limits,
    reread_every: Duration,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<Stopped, ServeError> {
    let tls = Tls(tokio_rustls::TlsAcceptor::from(Arc::new(
        app.certs.server_config()?,
    )));
    let rereader = {
        let app = app.clone();
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(reread_every);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            tick.tick().await;
            loop {
                tick.tick().await;
                let a = app.clone();
                let _ = tokio::task::spawn_blocking(move || a.reread_certificates()).await;
            }
        })
    };
    let conns = app.conns.clone();
    let stopped =
        topoalign_probes::serve_with_handshake(listener, router(app), limits, conns, tls, shutdown)
            .await
            .map_err(ServeError::Serve);
    rereader.abort();
    stopped
}

/// Loads the certificate, binds, calls `listening` with the bound address, and serves
/// until `shutdown` resolves.
pub async fn run(
    cfg: ServeConfig,
    shutdown: impl Future<Output = ()> + Send + 'static,
    listening: impl FnOnce(SocketAddr),
) -> Result<Stopped, ServeError> {
    let certs = Arc::new(Certificates::load(cfg.tls.clone())?);
    let listener = TcpListener::bind(cfg.listen)
        .await
        .map_err(|source| ServeError::Bind {
            addr: cfg.listen,
            source,
        })?;
    listening(listener.local_addr().unwrap_or(cfg.listen));
    let app = Arc::new(App::new(&cfg, certs));
    serve(listener, app, cfg.limits, cfg.reread_every, shutdown).await
}
