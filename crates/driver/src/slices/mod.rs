//! The slice controller, in the shape of the upstream `resourceslice.Controller`: it
//! publishes this node's pool with kube-rs and keeps it published. It takes each new
//! pool the follower sends (`crate::follower`: a device added or removed, a NIC
//! recabled), applies what differs by server-side apply with the generation rules of
//! `diff`, repairs what someone else deleted or edited (a watch on its own slices:
//! `drift`), retries with exponential backoff while the API server is away, checks every
//! round what the API server kept (`readback`, the mode the pool is published in:
//! `round`), and removes every slice on shutdown (`removal`).
//!
//! Its slices are found with the field selector `spec.nodeName=<node>,spec.driver=<driver>`
//! (the two fields the API server indexes for ResourceSlices), so leftovers of any earlier
//! run are found too, labelled or not.
//!
//! Every round reads the slices back as the API server stored them (the apply responses,
//! else the listed copies) and checks that the counters survived (`readback`).
//! Counter slices are written and checked before any device slice, so pair devices are
//! never written after their counters were seen dropped: the pool falls back to plain
//! GPUs and NICs (`PairMode::PlainOnly`), and later rounds re-apply the counters as a
//! probe until they survive (the gate turned on), when the pairs come back.

mod diff;
mod drift;
mod readback;
mod removal;
mod round;

pub use diff::{Memo, SyncPlan, Written, fingerprint, plan};

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use backon::{BackoffBuilder, ExponentialBuilder};
use futures::StreamExt;
use k8s_openapi::api::core::v1::Node;
use k8s_openapi::api::resource::v1::ResourceSlice;
use kube::Client;
use kube::api::Api;
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};
use tokio::sync::watch;
use tokio::time::Instant;
use topoalign_dra::DRIVER_NAME;

use crate::error::DriverError;
use crate::http::Health;
use crate::inventory::NodePool;
use crate::metrics::Metrics;
use readback::PairMode;

/// How long a burst of watch events is collected before one sync.
const DEBOUNCE: Duration = Duration::from_millis(100);

/// How many of this process's latest writes [`SliceController::recent_writes`]
/// remembers.
const RECENT_WRITES: usize = 64;

/// How often a missing Node object is looked for (its slices get it as owner once it
/// exists).
const OWNER_CHECK: Duration = Duration::from_secs(5);

/// The field selector of this driver's slices for `node`.
pub(crate) fn field_selector(node: &str) -> String {
    format!("spec.nodeName={node},spec.driver={DRIVER_NAME}")
}

/// The node's ResourceSlices, kept as the follower's pools say.
pub(crate) struct SliceController {
    client: Client,
    slices: Api<ResourceSlice>,
    nodes: Api<Node>,
    /// `spec.nodeName` and pool name.
    node_name: String,
    /// The follower's pools: one per change of the node.
    pools: watch::Receiver<Arc<NodePool>>,
    /// The pool published now.
    pool: Arc<NodePool>,
    /// How often the published pool is checked without a change.
    resync: Duration,
    /// How long shutdown keeps trying to delete the slices (the API server may be away).
    removal_timeout: Duration,
    metrics: Arc<Metrics>,
    health: Arc<Health>,
    desired_names: Vec<String>,
    memo: Memo,
    floor: i64,
    /// The last published slices have no Node owner (the Node did not exist yet).
    owner_missing: bool,
    /// Whether pair devices are published now.
    mode: PairMode,
    /// The mode the last completed round confirmed (logged when it changes).
    confirmed: Option<PairMode>,
    /// `resourceVersion`s this process wrote lately: a slice written twice in one publish
    /// (a counters probe, then the pool in the new mode) sends its watch event for the
    /// first write after the memo moved on; it is ours, not drift.
    recent_writes: VecDeque<String>,
}

impl SliceController {
    /// A controller for node `node_name`'s slices, publishing the pools `pools` carries
    /// (the current one first), checking them every `resync` and giving up their
    /// removal at shutdown after `removal_timeout`.
    pub(crate) fn new(
        client: Client,
        node_name: String,
        mut pools: watch::Receiver<Arc<NodePool>>,
        resync: Duration,
        removal_timeout: Duration,
        metrics: Arc<Metrics>,
        health: Arc<Health>,
    ) -> Self {
        let pool = pools.borrow_and_update().clone();
        SliceController {
            slices: Api::all(client.clone()),
            nodes: Api::all(client.clone()),
            client,
            node_name,
            pools,
            pool,
            resync,
            removal_timeout,
            metrics,
            health,
            desired_names: Vec::new(),
            memo: Memo::new(),
            floor: 0,
            owner_missing: false,
            mode: PairMode::Pairs,
            confirmed: None,
            recent_writes: VecDeque::new(),
        }
    }

    /// Publishes, then keeps the pool published (every new pool of the follower, every
    /// `resync`, every change of its slices by someone else) until `shutdown` turns
    /// true; then deletes every slice of this driver and node.
    pub(crate) async fn run(
        mut self,
        mut shutdown: watch::Receiver<bool>,
    ) -> Result<(), DriverError> {
        self.check_version().await;
        let config = watcher::Config::default().fields(&field_selector(&self.node_name));
        let watch = |slices: Api<ResourceSlice>, config: watcher::Config| {
            watcher::watcher(slices, config).default_backoff().boxed()
        };
        let mut events = watch(self.slices.clone(), config.clone());
        // Whether the watch's last word was an error: its backoff grows to 30 s while the
        // API server is away, so once a publishing round proves the server is back the
        // watch is started afresh instead of waiting that out (readiness follows it).
        let mut watch_broken = false;
        let mut resync = tokio::time::interval(self.resync);
        resync.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        resync.tick().await;
        // Whether the follower still sends pools (it stops with the process).
        let mut following = true;
        let mut backoff = retry_backoff();
        let mut next_sync: Option<Instant> = Some(Instant::now());
        let mut owner_check = tokio::time::interval(OWNER_CHECK);
        owner_check.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            let due = next_sync.unwrap_or_else(|| Instant::now() + Duration::from_secs(3600));
            tokio::select! {
                _ = shutdown.changed() => break,
                _ = resync.tick() => {
                    next_sync.get_or_insert(Instant::now());
                }
                changed = self.pools.changed(), if following => match changed {
                    Ok(()) => {
                        self.pool = self.pools.borrow_and_update().clone();
                        next_sync.get_or_insert(Instant::now());
                    }
                    Err(_) => following = false,
                },
                _ = owner_check.tick(), if self.owner_missing && next_sync.is_none() => {
                    match self.nodes.get_opt(&self.node_name).await {
                        Ok(Some(_)) => {
                            tracing::info!(node = %self.node_name, "the Node object exists now; making it the owner of this node's ResourceSlices");
                            next_sync = Some(Instant::now());
                        }
                        Ok(None) => {}
                        Err(e) => tracing::debug!(error = %e, "looking for the Node object"),
                    }
                }
                ev = events.next() => match ev {
                    Some(Ok(ev)) => {
                        watch_broken = false;
                        self.health.set_watch_error(None);
                        let soon = Instant::now() + DEBOUNCE;
                        if matches!(ev, Event::InitDone) {
                            // The watch (re)connected: the API server is back, so a
                            // publishing round waiting out its backoff goes now.
                            next_sync = Some(next_sync.map_or(soon, |t| t.min(soon)));
                        } else if self.is_foreign(&ev) {
                            if let Some(what) = Self::drift(&ev) {
                                self.health.set_drift(what);
                            }
                            next_sync.get_or_insert(soon);
                        }
                    }
                    Some(Err(e)) => {
                        self.metrics.error("watch");
                        tracing::warn!(error = %e, "watching this node's ResourceSlices");
                        self.health.set_watch_error(Some(e.to_string()));
                        watch_broken = true;
                    }
                    None => {
                        return Err(DriverError::Task { task: "slice watch", why: "stream ended".into() });
                    }
                },
                _ = tokio::time::sleep_until(due), if next_sync.is_some() => {
                    match self.sync().await {
                        Ok(_) => {
                            next_sync = None;
                            backoff = retry_backoff();
                            self.health.set_published();
                            if watch_broken {
                                tracing::info!("the API server answers again: restarting the slice watch");
                                events = watch(self.slices.clone(), config.clone());
                                watch_broken = false;
                            }
                        }
                        Err(e) => {
                            let wait = backoff.next().unwrap_or(Duration::from_secs(30));
                            self.metrics.publish_errors.inc();
                            self.metrics.error("publish");
                            tracing::warn!(error = %e, retry_in_ms = wait.as_millis() as u64, "publishing failed");
                            self.health.set_publish_failed(e.to_string());
                            next_sync = Some(Instant::now() + wait);
                        }
                    }
                }
            }
        }
        drop(events);
        self.remove_all().await
    }
}

/// 200 ms doubling to 30 s, with jitter, without end.
pub(crate) fn retry_backoff() -> impl Iterator<Item = Duration> {
    ExponentialBuilder::default()
        .with_min_delay(Duration::from_millis(200))
        .with_max_delay(Duration::from_secs(30))
        .with_factor(2.0)
        .with_jitter()
        .without_max_times()
        .build()
}

#[cfg(test)]
pub(crate) mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;
    use topoalign_dra::publish::PublishOptions;

    /// A client for an API server that is not there (a closed loopback port): every
    /// call fails at once with "connection refused".
    pub(crate) fn unreachable() -> Client {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let cfg = kube::Config::new(format!("http://127.0.0.1:{port}").parse().unwrap());
        Client::try_from(cfg).unwrap()
    }

    /// A controller of mi300x-8's pool on node `n1`, against no API server.
    pub(crate) fn controller(removal_timeout: Duration) -> SliceController {
        let topology = topoalign_profiles::get("mi300x-8").unwrap();
        let pool = NodePool::new(topology, PublishOptions::default(), None);
        let (_tx, rx) = watch::channel(Arc::new(pool));
        SliceController::new(
            unreachable(),
            "n1".into(),
            rx,
            Duration::from_secs(3600),
            removal_timeout,
            Arc::new(Metrics::new()),
            Arc::new(Health::new(false)),
        )
    }
}
