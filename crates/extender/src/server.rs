//! The HTTP server: `POST /filter`, `POST /prioritize` (the extender verbs), `GET /healthz`,
//! `GET /readyz`, `GET /metrics`, on the server kit of `topoalign_probes` (timeouts,
//! connection cap, bounded shutdown).
//!
//! A scheduler call is let in by the [`crate::gate`] (calls and body bytes in flight),
//! its body read within the size and time limits, then judged on a blocking thread
//! (never on the async workers that answer `/healthz`), with no lock held while a node
//! is judged, for at most the call's work budget: nodes not judged by then pass with a
//! neutral score (reason `budget`), well inside the scheduler's `httpTimeout`.

use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant, SystemTime};

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use tokio::net::TcpListener;
use topoalign_probes::{BodyError, ConnStats, Probe};

use crate::dra::shared::DraShared;
use crate::gate::{CallLimits, Gate};
use crate::judge::{Judges, Verb, judge_all};
use crate::metrics::{Gauges, Metrics, label};
use crate::plugin::shared::Decider;
use crate::plugin::state::ClusterState;
use crate::plugin::watch::{NodeFeed, Refresh};
use crate::protocol::{FilterWriter, PriorityWriter, parse_args};
use crate::turns::Turns;

/// Everything the handlers share.
#[derive(Debug)]
pub struct App {
    /// The cluster state (written by the watchers).
    pub state: Arc<RwLock<ClusterState>>,
    /// The decision core.
    pub decider: Decider,
    /// Metrics.
    pub metrics: Arc<Metrics>,
    /// Whether the watchers have listed everything once.
    pub ready: Arc<AtomicBool>,
    /// The DRA path's state (pods with ResourceClaims of topoalign.dev).
    pub dra: Arc<DraShared>,
    /// Limits of the scheduler calls and of the server.
    pub limits: CallLimits,
    /// Calls and body bytes in flight.
    gate: Gate,
    /// The server kit's connection counters.
    pub conns: Arc<ConnStats>,
    /// Wakes the background warmer ([`App::note_changed`]).
    warm_signal: Arc<tokio::sync::Notify>,
    /// Turns at judging node states the cache lacks (calls and the warmer).
    turns: Turns,
}

/// How long one background warming round may judge.
pub const WARM_ROUND: Duration = Duration::from_millis(250);

/// Shapes costlier than this per node (nanoseconds) are not warmed in the background:
/// their own calls judge the nodes they need, within their budget.
pub(crate) const WARM_MAX_COST_NS: u64 = 1_000_000;

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
            metrics: Arc::new(Metrics::new()),
            ready: Arc::new(AtomicBool::new(false)),
            dra: Arc::new(DraShared::new()),
            limits,
            gate: Gate::new(&limits),
            conns: Arc::new(ConnStats::default()),
            warm_signal: Arc::new(tokio::sync::Notify::new()),
            turns: Turns::for_cores(),
        }
    }

    /// What the calls judge with ([`judge_all`]).
    pub fn judges(&self) -> Judges<'_> {
        Judges {
            state: &self.state,
            decider: &self.decider,
            dra: Some(&self.dra),
            metrics: Some(&self.metrics),
            budget: self.limits.budget,
            turns: Some(&self.turns),
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
    /// skipping shapes costlier than `WARM_MAX_COST_NS` a node; no lock is held while
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
        // The warmer judges in a turn too, after the calls already waiting.
        let Some(_turn) = (!plan.is_empty())
            .then(|| self.turns.take(Some(deadline)))
            .flatten()
        else {
            return 0;
        };
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
        self.gauges().update(now);
    }

    fn gauges(&self) -> Gauges {
        Gauges {
            metrics: self.metrics.clone(),
            state: self.state.clone(),
            dra: self.dra.clone(),
        }
    }

    /// The narrow handle the device-plugin watchers update the state through.
    pub fn feed(&self) -> NodeFeed {
        NodeFeed {
            state: self.state.clone(),
            resources: self.decider.resources().clone(),
            ready: self.ready.clone(),
            changed: self.warm_signal.clone(),
            refresh: {
                let gauges = self.gauges();
                Refresh(Arc::new(move |now| gauges.update(now)))
            },
        }
    }
}

/// The router: `/filter` and `/prioritize`, and the probes (`topoalign_probes`).
pub(crate) fn router(app: Arc<App>) -> Router {
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

/// The filter verb: every candidate's verdict from [`judge_all`], written as the
/// scheduler reads it.
fn filter_call(app: &App, body: &[u8], t0: Instant, deadline: Instant) -> Response {
    let (pod, candidates) = match parse_args(body) {
        Ok(x) => x,
        Err(e) => return bad_request(app, "filter", e.to_string()),
    };
    let mut w = FilterWriter::new(&candidates);
    let judged = judge_all(
        &app.judges(),
        Verb::Filter,
        &pod,
        candidates.names(),
        Some(deadline),
        |v| match v.ruling.refusal() {
            Some(r) => match r.message_json {
                Some(json) => w.fail_json(v.name, json, r.unresolvable),
                None => w.fail(v.name, r.message, r.unresolvable),
            },
            None => w.pass(v.index, v.name),
        },
    );
    match judged {
        Ok(_) => finish(app, "filter", t0, w.finish_parts()),
        Err(e) => bad_request(app, "filter", e.to_string()),
    }
}

/// The prioritize verb: every candidate's priority from [`judge_all`].
fn prioritize_call(app: &App, body: &[u8], t0: Instant, deadline: Instant) -> Response {
    let (pod, candidates) = match parse_args(body) {
        Ok(x) => x,
        Err(e) => return bad_request(app, "prioritize", e.to_string()),
    };
    let names = candidates.names();
    let mut w = PriorityWriter::new(names);
    let judged = judge_all(
        &app.judges(),
        Verb::Prioritize,
        &pod,
        names,
        Some(deadline),
        |v| w.push(v.name, v.score),
    );
    match judged {
        Ok(_) => finish(app, "prioritize", t0, vec![w.finish().into()]),
        Err(e) => bad_request(app, "prioritize", e.to_string()),
    }
}

fn finish(app: &App, verb: &str, t0: Instant, parts: Vec<Bytes>) -> Response {
    count(app, verb, StatusCode::OK);
    let resp = json_parts(parts);
    app.metrics
        .latency
        .get_or_create(&label("verb", verb))
        .observe(t0.elapsed().as_secs_f64());
    resp
}

/// A JSON answer sent from its parts in order, with its length (hyper writes them as they
/// come, no part copied into another).
fn json_parts(parts: Vec<Bytes>) -> Response {
    let length: usize = parts.iter().map(Bytes::len).sum();
    let stream = futures::stream::iter(parts.into_iter().map(Ok::<_, std::convert::Infallible>));
    (
        [
            (
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/json"),
            ),
            (header::CONTENT_LENGTH, HeaderValue::from(length)),
        ],
        Body::from_stream(stream),
    )
        .into_response()
}
