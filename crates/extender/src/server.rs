//! The HTTP server: `POST /filter`, `POST /prioritize` (the extender verbs), `GET /healthz`,
//! `GET /readyz`, `GET /metrics`, on the server kit of `topoalign_probes` (timeouts,
//! connection cap, bounded shutdown).
//!
//! A scheduler call is let in by the [`crate::gate`] (calls and body bytes in flight),
//! its body read within the size and time limits, then judged on a blocking thread
//! (never on the async workers that answer `/healthz`), with no lock held while a node
//! is judged, for at most the call's work budget: nodes not judged by then pass with a
//! neutral score (reason `budget`), well inside the scheduler's `httpTimeout`.

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant, SystemTime};

use axum::Router;
use axum::extract::{Request, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use tokio::net::TcpListener;
use topoalign_probes::{BodyError, ConnStats, Probe};

use crate::cache::Judged;
use crate::decide::{CacheStats, Decider, Fresh, Seen, Verdict};
use crate::dra_state::{DraNode, DraShared, PodClaims, priorities};
use crate::gate::{CallLimits, Gate};
use crate::metrics::{Metrics, label};
use crate::podreq::pod_request;
use crate::protocol::{FilterWriter, PriorityWriter, parse_args};
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
    /// Limits of the scheduler calls and of the server.
    pub limits: CallLimits,
    /// Calls and body bytes in flight.
    gate: Gate,
    /// The server kit's connection counters.
    pub conns: Arc<ConnStats>,
    /// Wakes the background warmer ([`App::note_changed`]).
    warm_signal: tokio::sync::Notify,
}

/// How long one background warming round may judge.
pub const WARM_ROUND: Duration = Duration::from_millis(250);

/// Shapes costlier than this per node (nanoseconds) are not warmed in the background:
/// their own calls judge the nodes they need, within their budget.
pub const WARM_MAX_COST_NS: u64 = 1_000_000;

impl App {
    /// An app over a state.
    pub fn new(state: Arc<RwLock<ClusterState>>, decider: Decider) -> Self {
        App::with_limits(state, decider, CallLimits::default())
    }

    /// An app over a state, with call and server limits.
    pub fn with_limits(
        state: Arc<RwLock<ClusterState>>,
        decider: Decider,
        limits: CallLimits,
    ) -> Self {
        App {
            state,
            decider,
            metrics: Metrics::new(),
            ready: AtomicBool::new(false),
            dra: Arc::new(DraShared::new()),
            limits,
            gate: Gate::new(&limits),
            conns: Arc::new(ConnStats::default()),
            warm_signal: tokio::sync::Notify::new(),
        }
    }

    /// Tells the background warmer that nodes changed (cheap: the watchers call it on
    /// every event and go on at once).
    pub fn note_changed(&self) {
        self.warm_signal.notify_one();
    }

    /// The background warmer: on [`App::note_changed`], re-judges the changed nodes for
    /// the recently used shapes on a blocking thread ([`App::warm_changed`]); runs until
    /// dropped.
    pub async fn warmer(self: Arc<Self>) {
        loop {
            self.warm_signal.notified().await;
            let app = self.clone();
            let _ = tokio::task::spawn_blocking(move || app.warm_changed()).await;
        }
    }

    /// Marks the state as synced (or not).
    pub fn set_ready(&self, ready: bool) {
        self.ready.store(ready, Ordering::SeqCst);
    }

    /// Judges the nodes changed since the last round for the recently used pod shapes
    /// (so that scheduler calls find their verdicts cached), for at most [`WARM_ROUND`],
    /// skipping shapes costlier than [`WARM_MAX_COST_NS`] a node; no lock is held while
    /// judging. Returns the verdicts computed.
    pub fn warm_changed(&self) -> usize {
        let changed = self
            .state
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .take_changed();
        if changed.is_empty() {
            return 0;
        }
        let deadline = Instant::now() + WARM_ROUND;
        let now = SystemTime::now();
        let plan = {
            let state = self.state.read().unwrap_or_else(|p| p.into_inner());
            self.decider
                .warm_plan(&state, &changed, now, WARM_MAX_COST_NS)
        };
        let mut judged = 0;
        for (req, pending) in plan {
            if Instant::now() >= deadline {
                break;
            }
            let fresh = self.decider.judge_pending(&req, &pending, Some(deadline));
            judged += fresh.len();
            let state = self.state.read().unwrap_or_else(|p| p.into_inner());
            self.decider.record(&state, &req, &fresh);
        }
        self.metrics.warmed.inc_by(judged as u64);
        judged
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

/// Serves until `shutdown` resolves, then lets the calls in flight finish for at most
/// the server's shutdown grace period (`app.limits.server`).
pub async fn serve(
    listener: TcpListener,
    app: Arc<App>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let limits = app.limits.server;
    let conns = app.conns.clone();
    topoalign_probes::serve_with(listener, router(app), limits, conns, shutdown)
        .await
        .map(|_| ())
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

async fn filter(State(app): State<Arc<App>>, req: Request) -> Response {
    call(app, "filter", req).await
}

async fn prioritize(State(app): State<Arc<App>>, req: Request) -> Response {
    call(app, "prioritize", req).await
}

/// Refuses a call before judging it (413, 408, 503 …) with `message`, counted by reason.
fn refuse(app: &App, verb: &str, code: StatusCode, reason: &str, message: String) -> Response {
    tracing::warn!(verb, reason, %message, "extender call refused");
    count(app, verb, code);
    app.metrics
        .refused
        .get_or_create(&label("reason", reason))
        .inc();
    (code, format!("{message}\n")).into_response()
}

/// One scheduler call: through the gate, body read within its limits, judged on a
/// blocking thread within the work budget.
async fn call(app: Arc<App>, verb: &'static str, req: Request) -> Response {
    let t0 = Instant::now();
    let limits = app.limits;
    let declared = req
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<usize>().ok());
    if declared.is_some_and(|n| n > limits.max_body_bytes) {
        return refuse(
            &app,
            verb,
            StatusCode::PAYLOAD_TOO_LARGE,
            "body_too_large",
            limits.too_large_message(),
        );
    }
    let Some(pass) = app.gate.enter(declared, &limits).await else {
        return refuse(
            &app,
            verb,
            StatusCode::SERVICE_UNAVAILABLE,
            "busy",
            limits.busy_message(),
        );
    };
    app.metrics.in_flight.inc();
    let _in_flight = InFlightGauge(&app);
    let body = match topoalign_probes::read_body(
        req.into_body(),
        limits.max_body_bytes,
        limits.server.body_read_timeout,
    )
    .await
    {
        Ok(b) => b,
        Err(BodyError::TooLarge { .. }) => {
            return refuse(
                &app,
                verb,
                StatusCode::PAYLOAD_TOO_LARGE,
                "body_too_large",
                limits.too_large_message(),
            );
        }
        Err(e @ BodyError::TimedOut(_)) => {
            return refuse(
                &app,
                verb,
                StatusCode::REQUEST_TIMEOUT,
                "body_timeout",
                e.to_string(),
            );
        }
        Err(e) => {
            return refuse(
                &app,
                verb,
                StatusCode::BAD_REQUEST,
                "body_read",
                e.to_string(),
            );
        }
    };
    let deadline = t0 + limits.budget;
    let judge = app.clone();
    let answered = tokio::task::spawn_blocking(move || {
        let _pass = pass;
        match verb {
            "filter" => filter_call(&judge, &body, t0, deadline),
            _ => prioritize_call(&judge, &body, t0, deadline),
        }
    })
    .await;
    match answered {
        Ok(r) => r,
        Err(e) => {
            tracing::error!(verb, error = %e, "judging the call failed");
            count(&app, verb, StatusCode::INTERNAL_SERVER_ERROR);
            (
                StatusCode::INTERNAL_SERVER_ERROR,
                "judging the call failed\n",
            )
                .into_response()
        }
    }
}

/// Decrements the in-flight gauge when the call ends (answered or cancelled).
struct InFlightGauge<'a>(&'a App);

impl Drop for InFlightGauge<'_> {
    fn drop(&mut self) {
        self.0.metrics.in_flight.dec();
    }
}

/// Judges the candidates a call has to: under the state's read lock only to find and
/// share them, then with no lock held until `deadline`. Logs and counts a budget spent.
fn judge_within(
    app: &App,
    verb: &str,
    req: &crate::PodRequest,
    names: &[crate::protocol::Name<'_>],
    now: SystemTime,
    deadline: Instant,
) -> Fresh {
    let pending = {
        let state = app.state.read().unwrap_or_else(|p| p.into_inner());
        app.decider.pending(&state, req, names, now)
    };
    let fresh = app.decider.judge_pending(req, &pending, Some(deadline));
    if fresh.skipped > 0 {
        app.metrics
            .budget_spent
            .get_or_create(&label("verb", verb))
            .inc();
        tracing::warn!(
            verb,
            pod = %req.key,
            judged = fresh.len(),
            not_judged = fresh.skipped,
            budget_ms = app.limits.budget.as_millis() as u64,
            "work budget spent: the node states not judged pass with a neutral score (their verdicts are cached for the next calls as they are judged)"
        );
    }
    fresh
}

fn filter_call(app: &App, body: &[u8], t0: Instant, deadline: Instant) -> Response {
    let (pod, candidates) = match parse_args(body) {
        Ok(x) => x,
        Err(e) => return bad_request(app, "filter", e.to_string()),
    };
    let claims = app.dra.resolve(&pod);
    if !matches!(claims, PodClaims::NotOurs) {
        let mut w = FilterWriter::new(&candidates);
        dra_visit(
            app,
            "filter",
            &pod,
            claims,
            candidates.names(),
            deadline,
            |i, name, v| match v {
                Some(DraNode::Reject(m)) => w.fail(name, m, false),
                _ => w.pass(i, name),
            },
        );
        return finish(app, "filter", t0, w.finish());
    }
    let req = match pod_request(&pod, app.decider.resources()) {
        Ok(r) => r,
        Err(e) => return bad_request(app, "filter", e.to_string()),
    };
    let now = SystemTime::now();
    let fresh = judge_within(app, "filter", &req, candidates.names(), now, deadline);
    let mut w = FilterWriter::new(&candidates);
    let mut tally = Tally::default();
    let mut failed = 0usize;
    let stats = {
        let state = app.state.read().unwrap_or_else(|p| p.into_inner());
        app.decider.visit_judged(
            &state,
            &req,
            candidates.names(),
            now,
            &fresh,
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
    tally.record(app, "filter", &req.key, stats);
    if req.is_managed() {
        tracing::debug!(pod = %req.key, candidates = candidates.names().len(), failed, "filter");
    }
    finish(app, "filter", t0, w.finish())
}

fn prioritize_call(app: &App, body: &[u8], t0: Instant, deadline: Instant) -> Response {
    let (pod, candidates) = match parse_args(body) {
        Ok(x) => x,
        Err(e) => return bad_request(app, "prioritize", e.to_string()),
    };
    let names = candidates.names();
    let claims = app.dra.resolve(&pod);
    if !matches!(claims, PodClaims::NotOurs) {
        // Judged first, scored against each other: the capacity a placement uses up
        // weighs by how many candidates can still hold as many pairs. Claims of other
        // drivers score by the class the stock allocator gives first.
        let foreign = matches!(&claims, PodClaims::Judge(r) if r.foreign);
        let mut seen: Vec<(&str, Option<DraNode>)> = Vec::with_capacity(names.len());
        dra_visit(
            app,
            "prioritize",
            &pod,
            claims,
            names,
            deadline,
            |i, _, v| {
                seen.push((names[i].as_ref(), v.cloned()));
            },
        );
        let weight = app.dra.read().capacity_weight;
        let verdicts: Vec<Option<&DraNode>> = seen.iter().map(|(_, v)| v.as_ref()).collect();
        let mut w = PriorityWriter::new(names.len());
        for ((name, _), score) in seen.iter().zip(priorities(&verdicts, foreign, weight)) {
            w.push(name, score);
        }
        return finish(app, "prioritize", t0, w.finish());
    }
    let req = match pod_request(&pod, app.decider.resources()) {
        Ok(r) => r,
        Err(e) => return bad_request(app, "prioritize", e.to_string()),
    };
    let now = SystemTime::now();
    let fresh = judge_within(app, "prioritize", &req, names, now, deadline);
    let mut w = PriorityWriter::new(names.len());
    let mut tally = Tally::default();
    let stats = {
        let state = app.state.read().unwrap_or_else(|p| p.into_inner());
        app.decider
            .visit_judged(&state, &req, names, now, &fresh, |_, name, seen| {
                tally.note("prioritize", &req.key, name, &seen);
                w.push(name, seen.score());
            })
    };
    tally.record(app, "prioritize", &req.key, stats);
    finish(app, "prioritize", t0, w.finish())
}

/// The DRA path of one call: `f(index, name, verdict)` per candidate (`None`: not
/// judged, the pod's claims could not be read), then the metrics and logs.
fn dra_visit<N: AsRef<str>>(
    app: &App,
    verb: &str,
    pod: &serde_json::Value,
    claims: PodClaims,
    names: &[N],
    deadline: Instant,
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
            app.dra.visit(&r, names, Some(deadline), |i, name, v| {
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
