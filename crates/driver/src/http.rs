//! The driver's probe endpoints (`topoalign_probes`): `/healthz` (the process serves),
//! `/readyz` (the pool is published and in sync, and the kubelet plugin serves) and
//! `/metrics` (OpenMetrics text). Anything else is 404; methods other than GET are 405.

use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use tokio::net::TcpListener;
use topoalign_probes::Probe;

use crate::error::DriverError;
use crate::metrics::Metrics;

/// What `/readyz` reports on, updated by the slice controller and the plugin.
#[derive(Debug)]
pub(crate) struct Health {
    published: AtomicBool,
    plugin_serving: AtomicBool,
    plugin_required: bool,
    last_publish_error: Mutex<Option<String>>,
    /// The watch on this node's slices is failing (the API server is away …): why.
    watch_error: Mutex<Option<String>>,
    /// The published pool differs from the desired one (a slice deleted or edited by
    /// someone else) and is not repaired yet: what differs.
    drift: Mutex<Option<String>>,
    /// The publishing mode (pairs or plain-only) and why, once a round confirmed it.
    mode: Mutex<Option<String>>,
}

impl Health {
    /// A driver that is not ready yet; `plugin_required` is false with `--no-plugin`.
    pub(crate) fn new(plugin_required: bool) -> Self {
        Health {
            published: AtomicBool::new(false),
            plugin_serving: AtomicBool::new(false),
            plugin_required,
            last_publish_error: Mutex::new(None),
            watch_error: Mutex::new(None),
            drift: Mutex::new(None),
            mode: Mutex::new(None),
        }
    }

    /// The publishing mode the last completed round confirmed, in words (`/readyz` names
    /// it whether ready or not).
    pub(crate) fn set_mode(&self, note: String) {
        set(&self.mode, Some(note));
    }

    /// What `/readyz` says beside its verdict: the publishing mode, once known.
    pub(crate) fn notes(&self) -> Vec<String> {
        get(&self.mode).into_iter().collect()
    }

    /// The last publishing round succeeded: the API server holds the desired pool
    /// (any drift seen before it is repaired).
    pub(crate) fn set_published(&self) {
        self.published.store(true, Ordering::SeqCst);
        set(&self.last_publish_error, None);
        set(&self.drift, None);
    }

    /// The watch on this node's slices failed with `why` (the pool may have changed
    /// unseen), or works again (`None`).
    pub(crate) fn set_watch_error(&self, why: Option<String>) {
        set(&self.watch_error, why);
    }

    /// The published pool was changed by someone else (`what`); cleared by the next
    /// successful publishing round.
    pub(crate) fn set_drift(&self, what: String) {
        set(&self.drift, Some(what));
    }

    /// The last publishing round failed with `why`.
    pub(crate) fn set_publish_failed(&self, why: String) {
        self.published.store(false, Ordering::SeqCst);
        if let Ok(mut e) = self.last_publish_error.lock() {
            *e = Some(why);
        }
    }

    /// The kubelet plugin's sockets serve (or stopped serving).
    pub(crate) fn set_plugin_serving(&self, serving: bool) {
        self.plugin_serving.store(serving, Ordering::SeqCst);
    }

    /// Why the driver is not ready; empty when it is.
    pub(crate) fn not_ready_reasons(&self) -> Vec<String> {
        let mut why = Vec::new();
        if !self.published.load(Ordering::SeqCst) {
            let last = get(&self.last_publish_error);
            why.push(match last {
                Some(e) => format!("ResourceSlices not published: {e}"),
                None => "ResourceSlices not published yet".to_string(),
            });
        }
        if let Some(d) = get(&self.drift) {
            why.push(format!("ResourceSlices out of date, repair pending: {d}"));
        }
        if let Some(e) = get(&self.watch_error) {
            why.push(format!(
                "watching this node's ResourceSlices failed (changes may go unseen): {e}"
            ));
        }
        if self.plugin_required && !self.plugin_serving.load(Ordering::SeqCst) {
            why.push("kubelet plugin not serving yet".to_string());
        }
        why
    }
}

fn set(m: &Mutex<Option<String>>, v: Option<String>) {
    *m.lock().unwrap_or_else(|p| p.into_inner()) = v;
}

fn get(m: &Mutex<Option<String>>) -> Option<String> {
    m.lock().unwrap_or_else(|p| p.into_inner()).clone()
}

/// What the handlers share.
#[derive(Debug, Clone)]
pub(crate) struct AppState {
    /// Readiness.
    pub health: Arc<Health>,
    /// Metrics.
    pub metrics: Arc<Metrics>,
}

impl Probe for AppState {
    fn not_ready(&self) -> Vec<String> {
        self.health.not_ready_reasons()
    }

    fn notes(&self) -> Vec<String> {
        self.health.notes()
    }

    fn metrics(&self) -> String {
        self.metrics.encode()
    }
}

/// Serves the endpoints on `listener` until `shutdown` completes.
pub(crate) async fn serve(
    listener: TcpListener,
    state: AppState,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), DriverError> {
    topoalign_probes::serve(listener, Arc::new(state), shutdown)
        .await
        .map_err(DriverError::Serve)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    // The HTTP side (routes, status codes, content type) is topoalign_probes' and tested
    // there; here, what the driver tells its probes.
    #[test]
    fn readiness_names_what_is_missing_and_metrics_count() {
        let health = Arc::new(Health::new(true));
        let metrics = Arc::new(Metrics::new());
        let state = AppState {
            health: health.clone(),
            metrics: metrics.clone(),
        };
        let why = Probe::not_ready(&state).join("; ");
        assert!(
            why.contains("ResourceSlices not published yet") && why.contains("plugin"),
            "{why}"
        );
        health.set_publish_failed("connection refused".into());
        assert!(Probe::not_ready(&state)[0].contains("connection refused"));
        health.set_published();
        health.set_plugin_serving(true);
        assert!(Probe::not_ready(&state).is_empty());
        metrics.publishes.inc();
        let m = Probe::metrics(&state);
        assert!(m.contains("topoalign_driver_publishes_total 1"), "{m}");
    }

    #[test]
    fn a_published_pool_is_not_ready_while_it_drifts_or_goes_unwatched() {
        let h = Health::new(false);
        h.set_published();
        assert!(h.not_ready_reasons().is_empty());
        // The API server went away: the watch fails.
        h.set_watch_error(Some("connection refused".into()));
        let why = h.not_ready_reasons().join("; ");
        assert!(
            why.contains("watching this node's ResourceSlices failed")
                && why.contains("connection refused"),
            "{why}"
        );
        // Its slices were deleted meanwhile: named until repaired.
        h.set_drift("ResourceSlice n-gpu-0 deleted".into());
        assert_eq!(h.not_ready_reasons().len(), 2);
        h.set_watch_error(None);
        let why = h.not_ready_reasons().join("; ");
        assert!(
            why.contains("repair pending: ResourceSlice n-gpu-0 deleted"),
            "{why}"
        );
        // The repair succeeds.
        h.set_published();
        assert!(h.not_ready_reasons().is_empty());
    }

    #[test]
    fn the_publishing_mode_is_a_note_of_a_ready_driver() {
        let health = Arc::new(Health::new(false));
        let state = AppState {
            health: health.clone(),
            metrics: Arc::new(Metrics::new()),
        };
        assert!(Probe::notes(&state).is_empty(), "unknown before a round");
        health.set_published();
        health.set_mode("publishing mode plain-only: counters dropped".into());
        assert!(Probe::not_ready(&state).is_empty());
        assert_eq!(
            Probe::notes(&state),
            vec!["publishing mode plain-only: counters dropped".to_string()]
        );
        health.set_mode("publishing mode pairs".into());
        assert_eq!(
            Probe::notes(&state),
            vec!["publishing mode pairs".to_string()]
        );
    }

    #[test]
    fn plugin_is_not_required_with_no_plugin() {
        let h = Health::new(false);
        h.set_published();
        assert!(h.not_ready_reasons().is_empty());
    }
}
