//! The HTTP server: `POST /filter`, `POST /prioritize` (the extender verbs), `GET /healthz`,
//! `GET /readyz`, `GET /metrics`; graceful shutdown.

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};
use std::time::{Instant, SystemTime};

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use tokio::net::TcpListener;

use crate::decide::{Decider, NeutralReason};
use crate::metrics::{Metrics, label};
use crate::podreq::pod_request;
use crate::protocol::{Candidates, filter_result, parse_args};
use crate::state::{ClusterState, NodeView};

/// Everything the handlers share.
#[derive(Debug)]
pub struct App {
    /// The cluster state (written by the watchers).
    pub state: Arc<RwLock<ClusterState>>,
    /// The decision core.
    pub decider: Decider,
    /// Metrics.
    pub metrics: Metrics,
    /// Whether the watchers have listed everything once.
    pub ready: AtomicBool,
}

impl App {
    /// An app over a state.
    pub fn new(state: Arc<RwLock<ClusterState>>, decider: Decider) -> Self {
        App {
            state,
            decider,
            metrics: Metrics::new(),
            ready: AtomicBool::new(false),
        }
    }

    /// Marks the state as synced (or not).
    pub fn set_ready(&self, ready: bool) {
        self.ready.store(ready, Ordering::SeqCst);
    }

    /// Refreshes the state gauges.
    pub fn update_gauges(&self, now: SystemTime) {
        let state = self.state.read().unwrap_or_else(|p| p.into_inner());
        let (mut known, mut broken, mut stale) = (0i64, 0i64, 0i64);
        for (_, v) in state.nodes() {
            match v {
                NodeView::Known(e) if state.is_stale(e, now) => stale += 1,
                NodeView::Known(_) => known += 1,
                NodeView::Broken(_) => broken += 1,
            }
        }
        self.metrics
            .nodes
            .get_or_create(&label("status", "known"))
            .set(known);
        self.metrics
            .nodes
            .get_or_create(&label("status", "broken"))
            .set(broken);
        self.metrics
            .nodes
            .get_or_create(&label("status", "stale"))
            .set(stale);
        self.metrics.assumed.set(state.assumed_count() as i64);
    }
}

/// The router.
pub fn router(app: Arc<App>) -> Router {
    Router::new()
        .route("/filter", post(filter))
        .route("/prioritize", post(prioritize))
        .route("/healthz", get(|| async { "ok" }))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics))
        .with_state(app)
}

/// Serves until `shutdown` resolves, then finishes the calls in flight.
pub async fn serve(
    listener: TcpListener,
    app: Arc<App>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    axum::serve(listener, router(app))
        .with_graceful_shutdown(shutdown)
        .await
}

async fn readyz(State(app): State<Arc<App>>) -> Response {
    if app.ready.load(Ordering::SeqCst) {
        (StatusCode::OK, "ready").into_response()
    } else {
        (
            StatusCode::SERVICE_UNAVAILABLE,
            "not ready: the node, NodeResourceTopology and pod watchers have not listed yet",
        )
            .into_response()
    }
}

async fn metrics(State(app): State<Arc<App>>) -> Response {
    app.update_gauges(SystemTime::now());
    (
        [(
            header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        app.metrics.render(),
    )
        .into_response()
}

fn bad_request(app: &App, verb: &str, message: String) -> Response {
    tracing::warn!(verb, %message, "bad extender request");
    count(app, verb, StatusCode::BAD_REQUEST);
    (StatusCode::BAD_REQUEST, format!("{message}\n")).into_response()
}

fn count(app: &App, verb: &str, code: StatusCode) {
    app.metrics
        .requests
        .get_or_create(&vec![
            ("verb".to_string(), verb.to_string()),
            ("code".to_string(), code.as_u16().to_string()),
        ])
        .inc();
}

fn json(body: Vec<u8>) -> Response {
    ([(header::CONTENT_TYPE, "application/json")], body).into_response()
}

fn note_neutral(app: &App, verb: &str, pod: &str, neutral: &[(String, NeutralReason)]) {
    if neutral.is_empty() {
        return;
    }
    let mut by: BTreeMap<&'static str, Vec<&str>> = BTreeMap::new();
    for (node, why) in neutral {
        app.metrics
            .neutral
            .get_or_create(&label("reason", why.label()))
            .inc();
        by.entry(why.label()).or_default().push(node);
        if let NeutralReason::Broken(w) | NeutralReason::Undecided(w) = why {
            tracing::debug!(verb, pod, node = %node, why = %w, "node not judged");
        }
    }
    for (reason, nodes) in by {
        if reason == "not_managed" {
            continue;
        }
        let sample: Vec<&str> = nodes.iter().take(5).copied().collect();
        tracing::info!(verb, pod, reason, count = nodes.len(), nodes = ?sample, "nodes passed with a neutral score");
    }
}

async fn filter(State(app): State<Arc<App>>, body: Bytes) -> Response {
    let t0 = Instant::now();
    let (pod, candidates) = match parse_args(&body) {
        Ok(x) => x,
        Err(e) => return bad_request(&app, "filter", e.to_string()),
    };
    let req = match pod_request(&pod, app.decider.resources()) {
        Ok(r) => r,
        Err(e) => return bad_request(&app, "filter", e.to_string()),
    };
    let (out, stats) = {
        let state = app.state.read().unwrap_or_else(|p| p.into_inner());
        app.decider
            .filter(&state, &req, candidates.names(), SystemTime::now())
    };
    app.metrics.cache_hits.inc_by(stats.hits);
    app.metrics.cache_misses.inc_by(stats.misses);
    for m in out.failed.values().chain(out.unresolvable.values()) {
        let reason = if m.starts_with("Topology Manager") {
            "topology_manager"
        } else if m.contains("pair class") {
            "pair_class"
        } else {
            "placement"
        };
        app.metrics
            .filtered
            .get_or_create(&label("reason", reason))
            .inc();
    }
    note_neutral(&app, "filter", &req.key, &out.neutral);
    let result = filter_result(&candidates, &out.passed, out.failed, out.unresolvable);
    if req.is_managed() {
        tracing::debug!(pod = %req.key, candidates = candidates.names().len(),
            failed = result.failed_nodes.as_ref().map_or(0, |m| m.len())
                + result.failed_and_unresolvable_nodes.as_ref().map_or(0, |m| m.len()),
            "filter");
    }
    finish(&app, "filter", t0, serde_json::to_vec(&result))
}

async fn prioritize(State(app): State<Arc<App>>, body: Bytes) -> Response {
    let t0 = Instant::now();
    let (pod, candidates) = match parse_args(&body) {
        Ok(x) => x,
        Err(e) => return bad_request(&app, "prioritize", e.to_string()),
    };
    let req = match pod_request(&pod, app.decider.resources()) {
        Ok(r) => r,
        Err(e) => return bad_request(&app, "prioritize", e.to_string()),
    };
    let names: &[String] = match &candidates {
        Candidates::Names(n) | Candidates::Nodes(n, _) => n,
    };
    let (out, stats) = {
        let state = app.state.read().unwrap_or_else(|p| p.into_inner());
        app.decider
            .prioritize(&state, &req, names, SystemTime::now())
    };
    app.metrics.cache_hits.inc_by(stats.hits);
    app.metrics.cache_misses.inc_by(stats.misses);
    note_neutral(&app, "prioritize", &req.key, &out.neutral);
    finish(&app, "prioritize", t0, serde_json::to_vec(&out.scores))
}

fn finish(app: &App, verb: &str, t0: Instant, body: serde_json::Result<Vec<u8>>) -> Response {
    let resp = match body {
        Ok(b) => {
            count(app, verb, StatusCode::OK);
            json(b)
        }
        Err(e) => {
            count(app, verb, StatusCode::INTERNAL_SERVER_ERROR);
            (
                StatusCode::INTERNAL_SERVER_ERROR,
                format!("encoding the answer: {e}\n"),
            )
                .into_response()
        }
    };
    app.metrics
        .latency
        .get_or_create(&label("verb", verb))
        .observe(t0.elapsed().as_secs_f64());
    resp
}
