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
use axum::routing::post;
use tokio::net::TcpListener;
use topoalign_probes::Probe;

use crate::cache::Judged;
use crate::decide::{CacheStats, Decider, Seen, Verdict};
use crate::dra::{CapacityLevels, dra_score};
use crate::dra_state::{DraNode, DraShared, PodClaims};
use crate::metrics::{Metrics, label};
use crate::podreq::pod_request;
use crate::protocol::{FilterWriter, PriorityWriter, parse_args};
use crate::score::NEUTRAL_SCORE;
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
    /// The DRA path's state (pods with ResourceClaims of topoalign.dev).
    pub dra: Arc<DraShared>,
}

impl App {
    /// An app over a state.
    pub fn new(state: Arc<RwLock<ClusterState>>, decider: Decider) -> Self {
        App {
            state,
            decider,
            metrics: Metrics::new(),
            ready: AtomicBool::new(false),
            dra: Arc::new(DraShared::new()),
        }
    }

    /// Marks the state as synced (or not).
    pub fn set_ready(&self, ready: bool) {
        self.ready.store(ready, Ordering::SeqCst);
    }

    /// Judges the nodes changed since the last call for the recently used pod shapes
    /// (on watch events, so that scheduler calls find their verdicts cached); returns
    /// the verdicts computed.
    pub fn warm_changed(&self) -> usize {
        let changed = self
            .state
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .take_changed();
        if changed.is_empty() {
            return 0;
        }
        let state = self.state.read().unwrap_or_else(|p| p.into_inner());
        self.decider.warm(&state, &changed, SystemTime::now())
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
        drop(state);
        let dra = self.dra.read();
        for (what, n) in [
            ("nodes", dra.node_count()),
            ("claims", dra.claim_count()),
            ("held_devices", dra.held_count()),
        ] {
            self.metrics
                .dra_state
                .get_or_create(&label("what", what))
                .set(n as i64);
        }
    }
}

/// The router: `/filter` and `/prioritize`, and the probes (`topoalign_probes`).
pub fn router(app: Arc<App>) -> Router {
    Router::new()
        .route("/filter", post(filter))
        .route("/prioritize", post(prioritize))
        .with_state(app.clone())
        .merge(topoalign_probes::router(app))
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

impl Probe for App {
    fn not_ready(&self) -> Vec<String> {
        if self.ready.load(Ordering::SeqCst) && self.dra.is_ready() {
            Vec::new()
        } else {
            vec!["the node, NodeResourceTopology, pod and DRA (ResourceSlice, ResourceClaim, ResourceClaimTemplate, DeviceClass) watchers have not all listed yet".to_string()]
        }
    }

    fn metrics(&self) -> String {
        self.update_gauges(SystemTime::now());
        self.metrics.render()
    }
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

/// What one call saw, counted while the candidates are judged and written to the
/// metrics and logs once afterwards.
#[derive(Debug, Default)]
struct Tally {
    filtered: BTreeMap<&'static str, u64>,
    neutral: BTreeMap<&'static str, (u64, Vec<String>)>,
}

impl Tally {
    fn note(&mut self, verb: &str, pod: &str, name: &str, seen: &Seen<'_>) {
        if verb == "filter"
            && let Some(r) = seen.rejection()
        {
            *self.filtered.entry(r.kind.label()).or_default() += 1;
        }
        let Some(label) = seen.neutral_label() else {
            return;
        };
        let (count, sample) = self.neutral.entry(label).or_default();
        *count += 1;
        if sample.len() < 5 && label != "not_managed" {
            sample.push(name.to_string());
        }
        let why = match seen {
            Seen::Broken(w) => Some(*w),
            Seen::Judged(Judged {
                verdict: Verdict::Neutral(w),
                ..
            }) => Some(w.as_str()),
            _ => None,
        };
        if let Some(why) = why {
            tracing::debug!(verb, pod, node = %name, why, "node not judged");
        }
    }

    fn record(self, app: &App, verb: &str, pod: &str, stats: CacheStats) {
        app.metrics.cache_hits.inc_by(stats.hits);
        app.metrics.cache_misses.inc_by(stats.misses);
        for (reason, n) in self.filtered {
            app.metrics
                .filtered
                .get_or_create(&label("reason", reason))
                .inc_by(n);
        }
        for (reason, (count, sample)) in self.neutral {
            app.metrics
                .neutral
                .get_or_create(&label("reason", reason))
                .inc_by(count);
            if reason != "not_managed" {
                tracing::info!(verb, pod, reason, count, nodes = ?sample, "nodes passed with a neutral score");
            }
        }
    }
}

async fn filter(State(app): State<Arc<App>>, body: Bytes) -> Response {
    let t0 = Instant::now();
    let (pod, candidates) = match parse_args(&body) {
        Ok(x) => x,
        Err(e) => return bad_request(&app, "filter", e.to_string()),
    };
    let claims = app.dra.resolve(&pod);
    if !matches!(claims, PodClaims::NotOurs) {
        let mut w = FilterWriter::new(&candidates);
        dra_visit(
            &app,
            "filter",
            &pod,
            claims,
            candidates.names(),
            |i, name, v| match v {
                Some(DraNode::Reject(m)) => w.fail(name, m, false),
                _ => w.pass(i, name),
            },
        );
        return finish(&app, "filter", t0, w.finish());
    }
    let req = match pod_request(&pod, app.decider.resources()) {
        Ok(r) => r,
        Err(e) => return bad_request(&app, "filter", e.to_string()),
    };
    let mut w = FilterWriter::new(&candidates);
    let mut tally = Tally::default();
    let mut failed = 0usize;
    let stats = {
        let state = app.state.read().unwrap_or_else(|p| p.into_inner());
        app.decider.visit(
            &state,
            &req,
            candidates.names(),
            SystemTime::now(),
            |i, name, seen| {
                tally.note("filter", &req.key, name, &seen);
                match seen.rejection() {
                    Some(r) => {
                        failed += 1;
                        w.fail_json(name, r.message_json, r.unresolvable);
                    }
                    None => w.pass(i, name),
                }
            },
        )
    };
    tally.record(&app, "filter", &req.key, stats);
    if req.is_managed() {
        tracing::debug!(pod = %req.key, candidates = candidates.names().len(), failed, "filter");
    }
    finish(&app, "filter", t0, w.finish())
}

async fn prioritize(State(app): State<Arc<App>>, body: Bytes) -> Response {
    let t0 = Instant::now();
    let (pod, candidates) = match parse_args(&body) {
        Ok(x) => x,
        Err(e) => return bad_request(&app, "prioritize", e.to_string()),
    };
    let names = candidates.names();
    let claims = app.dra.resolve(&pod);
    if !matches!(claims, PodClaims::NotOurs) {
        // Judged first, scored against each other: the capacity a placement uses up
        // weighs by how many candidates can still hold as many pairs.
        let mut seen: Vec<(&str, Option<DraNode>)> = Vec::with_capacity(names.len());
        dra_visit(&app, "prioritize", &pod, claims, names, |i, _, v| {
            seen.push((names[i].as_ref(), v.cloned()));
        });
        let levels = CapacityLevels::of(seen.iter().filter_map(|(_, v)| match v {
            Some(DraNode::Fit(f)) => Some(f.capacity_before),
            _ => None,
        }));
        let weight = app.dra.read().capacity_weight;
        let mut w = PriorityWriter::new(names.len());
        for (name, v) in &seen {
            let score = match v {
                Some(DraNode::Fit(f)) => dra_score(f, &levels, weight),
                Some(DraNode::Reject(_)) => 0,
                _ => NEUTRAL_SCORE,
            };
            w.push(name, score);
        }
        return finish(&app, "prioritize", t0, w.finish());
    }
    let req = match pod_request(&pod, app.decider.resources()) {
        Ok(r) => r,
        Err(e) => return bad_request(&app, "prioritize", e.to_string()),
    };
    let mut w = PriorityWriter::new(names.len());
    let mut tally = Tally::default();
    let stats = {
        let state = app.state.read().unwrap_or_else(|p| p.into_inner());
        app.decider
            .visit(&state, &req, names, SystemTime::now(), |_, name, seen| {
                tally.note("prioritize", &req.key, name, &seen);
                w.push(name, seen.score());
            })
    };
    tally.record(&app, "prioritize", &req.key, stats);
    finish(&app, "prioritize", t0, w.finish())
}

/// The DRA path of one call: `f(index, name, verdict)` per candidate (`None`: not
/// judged, the pod's claims could not be read), then the metrics and logs.
fn dra_visit<N: AsRef<str>>(
    app: &App,
    verb: &str,
    pod: &serde_json::Value,
    claims: PodClaims,
    names: &[N],
    mut f: impl FnMut(usize, &str, Option<&DraNode>),
) {
    let text = |p: &str| {
        pod.pointer(p)
            .and_then(serde_json::Value::as_str)
            .unwrap_or("")
    };
    let key = format!("{}/{}", text("/metadata/namespace"), text("/metadata/name"));
    let mut outcomes: BTreeMap<&'static str, (u64, Vec<String>)> = BTreeMap::new();
    let mut note = |outcome: &'static str, name: &str| {
        let (n, sample) = outcomes.entry(outcome).or_default();
        *n += 1;
        if sample.len() < 5 {
            sample.push(name.to_string());
        }
    };
    match claims {
        PodClaims::Judge(r) => {
            if r.from_template > 0 {
                tracing::debug!(verb, pod = %key, claims = r.from_template, "generated claims not seen yet; judged on their templates");
            }
            app.dra.visit(&r, names, |i, name, v| {
                note(v.outcome(), name);
                if let DraNode::Neutral(n) = v {
                    tracing::debug!(verb, pod = %key, node = %name, why = n.why(), "node not judged");
                }
                f(i, name, Some(v));
            });
        }
        PodClaims::Unjudged(label, why) => {
            tracing::info!(verb, pod = %key, reason = label, %why, "pod's claims not judged; every node passes with a neutral score");
            for (i, n) in names.iter().enumerate() {
                note(label, n.as_ref());
                f(i, n.as_ref(), None);
            }
        }
        PodClaims::NotOurs => {}
    }
    for (outcome, (n, sample)) in outcomes {
        app.metrics
            .dra_verdicts
            .get_or_create(&vec![
                ("verb".to_string(), verb.to_string()),
                ("outcome".to_string(), outcome.to_string()),
            ])
            .inc_by(n);
        match outcome {
            "fit" => {}
            "reject" => {
                if verb == "filter" {
                    app.metrics
                        .filtered
                        .get_or_create(&label("reason", "dra_claim"))
                        .inc_by(n);
                }
            }
            neutral => {
                app.metrics
                    .neutral
                    .get_or_create(&label("reason", neutral))
                    .inc_by(n);
                tracing::info!(verb, pod = %key, reason = neutral, count = n, nodes = ?sample, "nodes passed with a neutral score");
            }
        }
    }
}

fn finish(app: &App, verb: &str, t0: Instant, body: Vec<u8>) -> Response {
    count(app, verb, StatusCode::OK);
    let resp = json(body);
    app.metrics
        .latency
        .get_or_create(&label("verb", verb))
        .observe(t0.elapsed().as_secs_f64());
    resp
}
