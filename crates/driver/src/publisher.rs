//! Publishes this node's pool with kube-rs: server-side apply of the slices computed by
//! `topoalign-dra`, generation rules from [`crate::diff`], deletion of stale slices,
//! periodic rediscovery (hot-plug), a watch on its own slices that repairs deletions and
//! edits, retries with exponential backoff while the API server is away, and removal of
//! every slice on shutdown.
//!
//! Its slices are found with the field selector `spec.nodeName=<node>,spec.driver=<driver>`
//! (the two fields the API server indexes for ResourceSlices), so leftovers of any earlier
//! run are found too, labelled or not.

use std::sync::Arc;
use std::time::Duration;

use backon::{BackoffBuilder, ExponentialBuilder};
use futures::StreamExt;
use k8s_openapi::api::core::v1::Node;
use k8s_openapi::api::resource::v1::ResourceSlice;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::Client;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams};
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};
use tokio::sync::watch;
use tokio::time::Instant;
use topoalign_discover::Source;
use topoalign_dra::{DRIVER_NAME, PublishOptions};
use topoalign_topology::Topology;

use crate::diff::{self, Memo, SyncPlan, Written};
use crate::error::DriverError;
use crate::http::Health;
use crate::metrics::{Metrics, OpLabel};

/// How long a burst of watch events is collected before one sync.
const DEBOUNCE: Duration = Duration::from_millis(100);

/// What to publish, for which node, from which topology source.
#[derive(Debug, Clone)]
pub struct PublisherConfig {
    /// `spec.nodeName` and pool name.
    pub node_name: String,
    /// Where the topology is read from, at start and on every rescan.
    pub source: Source,
    /// Pair set and plain devices (the generation field is ignored: the publisher owns it).
    pub options: PublishOptions,
    /// How often the topology is rediscovered and the published pool checked.
    pub rescan_interval: Duration,
    /// How long shutdown keeps trying to delete the slices (the API server may be away).
    pub removal_timeout: Duration,
}

/// The field selector of this driver's slices for `node`.
pub fn field_selector(node: &str) -> String {
    format!("spec.nodeName={node},spec.driver={DRIVER_NAME}")
}

/// The node agent's publishing half.
pub struct Publisher {
    slices: Api<ResourceSlice>,
    nodes: Api<Node>,
    cfg: PublisherConfig,
    metrics: Arc<Metrics>,
    health: Arc<Health>,
    topology: Topology,
    desired_names: Vec<String>,
    memo: Memo,
    floor: i64,
    on_change: Option<TopologyHook>,
    /// The last published slices have no Node owner (the Node did not exist yet).
    owner_missing: bool,
}

/// How often a missing Node object is looked for (its slices get it as owner once it
/// exists).
const OWNER_CHECK: Duration = Duration::from_secs(5);

/// Called with the new topology when a rescan finds the node's devices changed.
pub type TopologyHook = Box<dyn Fn(&Topology) + Send + Sync>;

impl Publisher {
    /// A publisher for `topology` (already discovered from `cfg.source`).
    pub fn new(
        client: Client,
        cfg: PublisherConfig,
        topology: Topology,
        metrics: Arc<Metrics>,
        health: Arc<Health>,
    ) -> Self {
        Publisher {
            slices: Api::all(client.clone()),
            nodes: Api::all(client),
            cfg,
            metrics,
            health,
            topology,
            desired_names: Vec::new(),
            memo: Memo::new(),
            floor: 0,
            on_change: None,
            owner_missing: false,
        }
    }

    /// Calls `hook` with the new topology whenever a rescan finds a device added or
    /// removed, before the pool is republished (the kubelet plugin takes the new
    /// inventory through it, so it prepares what the slices now say).
    pub fn on_topology_change(mut self, hook: TopologyHook) -> Self {
        self.on_change = Some(hook);
        self
    }

    /// The slices this node should publish now (generation 0; owned by the Node object
    /// when it exists, so that deleting the node deletes them).
    async fn desired(&self) -> Result<Vec<ResourceSlice>, DriverError> {
        let mut slices =
            topoalign_dra::resource_slices(&self.topology, &self.cfg.node_name, &self.cfg.options)?;
        let node = self
            .nodes
            .get_opt(&self.cfg.node_name)
            .await
            .map_err(|e| DriverError::api(format!("reading Node {}", self.cfg.node_name), e))?;
        let owner = node.and_then(|n| n.metadata.uid).map(|uid| OwnerReference {
            api_version: "v1".into(),
            kind: "Node".into(),
            name: self.cfg.node_name.clone(),
            uid,
            controller: Some(true),
            block_owner_deletion: None,
        });
        for s in &mut slices {
            s.spec.pool.generation = 0;
            s.metadata.owner_references = owner.clone().map(|o| vec![o]);
        }
        Ok(slices)
    }

    /// One publishing round: read what the API server holds, write what differs.
    pub async fn sync(&mut self) -> Result<SyncPlan, DriverError> {
        let desired = self.desired().await?;
        self.owner_missing = lacks_owner(&desired);
        let params = ListParams::default().fields(&field_selector(&self.cfg.node_name));
        let existing = self
            .slices
            .list(&params)
            .await
            .map_err(|e| DriverError::api("listing this node's ResourceSlices", e))?
            .items;
        let plan = diff::plan(&desired, &existing, &self.memo, self.floor);
        self.desired_names = desired
            .iter()
            .filter_map(|s| s.metadata.name.clone())
            .collect();

        for name in &plan.delete_first {
            self.delete(name).await?;
        }
        let apply = PatchParams::apply(DRIVER_NAME).force();
        for (slice, want) in plan.apply.iter().zip(desired_for(&plan, &desired)) {
            let name = slice.metadata.name.clone().unwrap_or_default();
            let written = self
                .slices
                .patch(&name, &apply, &Patch::Apply(slice))
                .await
                .map_err(|e| DriverError::api(format!("applying ResourceSlice {name}"), e))?;
            self.metrics
                .slice_writes
                .get_or_create(&OpLabel { op: "apply" })
                .inc();
            if let Some(rv) = written.metadata.resource_version {
                self.memo.insert(
                    name,
                    Written {
                        resource_version: rv,
                        fingerprint: diff::fingerprint(want),
                    },
                );
            }
        }
        for name in &plan.delete {
            self.delete(name).await?;
        }

        self.floor = self.floor.max(plan.generation);
        if plan.bumped {
            self.metrics.publishes.inc();
            tracing::info!(
                node = %self.cfg.node_name,
                generation = plan.generation,
                slices = desired.len(),
                applied = plan.apply.len(),
                deleted = plan.delete.len() + plan.delete_first.len(),
                reasons = %plan.reasons.join("; "),
                "published the pool"
            );
        } else if !plan.is_noop() {
            tracing::info!(
                node = %self.cfg.node_name,
                generation = plan.generation,
                applied = plan.apply.len(),
                deleted = plan.delete.len(),
                "tidied the pool (same generation)"
            );
        } else {
            tracing::debug!(node = %self.cfg.node_name, generation = plan.generation, "pool in sync");
        }
        self.metrics.resourceslices.set(desired.len() as i64);
        self.metrics.devices.set(
            desired
                .iter()
                .map(|s| s.spec.devices.as_ref().map_or(0, Vec::len) as i64)
                .sum(),
        );
        self.metrics.pool_generation.set(plan.generation);
        Ok(plan)
    }

    async fn delete(&mut self, name: &str) -> Result<(), DriverError> {
        match self.slices.delete(name, &DeleteParams::default()).await {
            Ok(_) => {}
            Err(kube::Error::Api(s)) if s.code == 404 => {}
            Err(e) => {
                return Err(DriverError::api(
                    format!("deleting ResourceSlice {name}"),
                    e,
                ));
            }
        }
        self.memo.remove(name);
        self.metrics
            .slice_writes
            .get_or_create(&OpLabel { op: "delete" })
            .inc();
        Ok(())
    }

    /// Rediscovers the topology; true when it changed (a device came or went).
    async fn rediscover(&mut self) -> Result<bool, DriverError> {
        let source = self.cfg.source.clone();
        let found = tokio::task::spawn_blocking(move || topoalign_discover::load(&source))
            .await
            .map_err(|e| DriverError::Task {
                task: "discovery",
                why: e.to_string(),
            })??;
        if found.topology == self.topology {
            return Ok(false);
        }
        for w in &found.warnings {
            tracing::warn!(warning = %w, "discovery");
        }
        tracing::info!(node = %self.cfg.node_name, "the topology changed; republishing");
        self.topology = found.topology;
        if let Some(hook) = &self.on_change {
            hook(&self.topology);
        }
        Ok(true)
    }

    /// What a foreign event changed, in words (`None` for a resync).
    fn drift(event: &Event<ResourceSlice>) -> Option<String> {
        match event {
            Event::Apply(s) => Some(format!(
                "ResourceSlice {} changed by someone else",
                s.metadata.name.as_deref().unwrap_or_default()
            )),
            Event::Delete(s) => Some(format!(
                "ResourceSlice {} deleted",
                s.metadata.name.as_deref().unwrap_or_default()
            )),
            _ => None,
        }
    }

    /// Whether a watch event is someone else's doing (ours are in the memo).
    fn is_foreign(&self, event: &Event<ResourceSlice>) -> bool {
        match event {
            Event::Apply(s) => {
                let name = s.metadata.name.as_deref().unwrap_or_default();
                self.memo
                    .get(name)
                    .map(|w| Some(w.resource_version.as_str()))
                    != Some(s.metadata.resource_version.as_deref())
            }
            Event::Delete(s) => {
                let name = s.metadata.name.as_deref().unwrap_or_default();
                self.desired_names.iter().any(|n| n == name)
            }
            Event::InitDone => true,
            Event::Init | Event::InitApply(_) => false,
        }
    }

    /// Publishes, then keeps the pool published until `shutdown` turns true; then
    /// deletes every slice of this driver and node.
    pub async fn run(mut self, mut shutdown: watch::Receiver<bool>) -> Result<(), DriverError> {
        let config = watcher::Config::default().fields(&field_selector(&self.cfg.node_name));
        let mut events = watcher::watcher(self.slices.clone(), config)
            .default_backoff()
            .boxed();
        let mut rescan = tokio::time::interval(self.cfg.rescan_interval);
        rescan.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        rescan.tick().await;
        let mut backoff = retry_backoff();
        let mut next_sync: Option<Instant> = Some(Instant::now());
        let mut owner_check = tokio::time::interval(OWNER_CHECK);
        owner_check.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            let due = next_sync.unwrap_or_else(|| Instant::now() + Duration::from_secs(3600));
            tokio::select! {
                _ = shutdown.changed() => break,
                _ = rescan.tick() => {
                    if let Err(e) = self.rediscover().await {
                        self.metrics.error("discover");
                        tracing::error!(error = %e, "rescan failed; keeping the last topology");
                    }
                    next_sync.get_or_insert(Instant::now());
                }
                _ = owner_check.tick(), if self.owner_missing && next_sync.is_none() => {
                    match self.nodes.get_opt(&self.cfg.node_name).await {
                        Ok(Some(_)) => {
                            tracing::info!(node = %self.cfg.node_name, "the Node object exists now; making it the owner of this node's ResourceSlices");
                            next_sync = Some(Instant::now());
                        }
                        Ok(None) => {}
                        Err(e) => tracing::debug!(error = %e, "looking for the Node object"),
                    }
                }
                ev = events.next() => match ev {
                    Some(Ok(ev)) => {
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

    /// Deletes every slice of this driver and node, retrying until
    /// [`PublisherConfig::removal_timeout`] has passed (each try is cut off at that
    /// deadline too): it gives up at the deadline, not before.
    pub async fn remove_all(&mut self) -> Result<(), DriverError> {
        let timeout = self.cfg.removal_timeout;
        let deadline = Instant::now() + timeout;
        let mut backoff = retry_backoff();
        tracing::info!(node = %self.cfg.node_name, timeout_ms = timeout.as_millis() as u64, "removing this node's ResourceSlices");
        let mut tries = 0u32;
        loop {
            tries += 1;
            let left = deadline.saturating_duration_since(Instant::now());
            let outcome = match tokio::time::timeout(left, self.try_remove_all()).await {
                Ok(r) => r,
                Err(_) => Err(DriverError::Task {
                    task: "slice removal",
                    why: format!("no answer from the API server within {timeout:?}"),
                }),
            };
            match outcome {
                Ok(n) => {
                    tracing::info!(node = %self.cfg.node_name, deleted = n, "removed this node's ResourceSlices");
                    self.metrics.resourceslices.set(0);
                    self.metrics.devices.set(0);
                    return Ok(());
                }
                Err(e) => {
                    let left = deadline.saturating_duration_since(Instant::now());
                    if left.is_zero() {
                        tracing::error!(node = %self.cfg.node_name, tries, error = %e, "gave up removing this node's ResourceSlices");
                        return Err(DriverError::Removal {
                            after: timeout,
                            last: Box::new(e),
                        });
                    }
                    let wait = backoff.next().unwrap_or(Duration::from_secs(5)).min(left);
                    tracing::warn!(error = %e, retry_in_ms = wait.as_millis() as u64, left_ms = left.as_millis() as u64, "removing this node's ResourceSlices; retrying");
                    tokio::time::sleep(wait).await;
                }
            }
        }
    }

    async fn try_remove_all(&mut self) -> Result<usize, DriverError> {
        let params = ListParams::default().fields(&field_selector(&self.cfg.node_name));
        let names: Vec<String> = self
            .slices
            .list(&params)
            .await
            .map_err(|e| DriverError::api("listing this node's ResourceSlices", e))?
            .items
            .into_iter()
            .filter_map(|s| s.metadata.name)
            .collect();
        for name in &names {
            self.delete(name).await?;
        }
        Ok(names.len())
    }
}

/// Whether any slice lacks an owner (the Node object did not exist when it was made).
fn lacks_owner(slices: &[ResourceSlice]) -> bool {
    slices.iter().any(|s| {
        s.metadata
            .owner_references
            .as_ref()
            .is_none_or(Vec::is_empty)
    })
}

/// The desired slice behind each planned apply (same order, same names).
fn desired_for<'a>(plan: &SyncPlan, desired: &'a [ResourceSlice]) -> Vec<&'a ResourceSlice> {
    plan.apply
        .iter()
        .filter_map(|a| desired.iter().find(|d| d.metadata.name == a.metadata.name))
        .collect()
}

/// 200 ms doubling to 30 s, with jitter, without end.
fn retry_backoff() -> impl Iterator<Item = Duration> {
    ExponentialBuilder::default()
        .with_min_delay(Duration::from_millis(200))
        .with_max_delay(Duration::from_secs(30))
        .with_factor(2.0)
        .with_jitter()
        .without_max_times()
        .build()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    /// A client for an API server that is not there (a closed loopback port): every
    /// call fails at once with "connection refused".
    fn unreachable() -> Client {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let cfg = kube::Config::new(format!("http://127.0.0.1:{port}").parse().unwrap());
        Client::try_from(cfg).unwrap()
    }

    fn publisher(removal_timeout: Duration) -> Publisher {
        let topology = topoalign_profiles::get("mi300x-8").unwrap();
        Publisher::new(
            unreachable(),
            PublisherConfig {
                node_name: "n1".into(),
                source: Source::Profile("mi300x-8".into()),
                options: PublishOptions::default(),
                rescan_interval: Duration::from_secs(3600),
                removal_timeout,
            },
            topology,
            Arc::new(Metrics::new()),
            Arc::new(Health::new(false)),
        )
    }

    #[tokio::test]
    async fn removal_keeps_trying_until_its_deadline_and_no_longer() {
        let mut p = publisher(Duration::from_secs(3));
        let t0 = std::time::Instant::now();
        let e = p.remove_all().await.unwrap_err();
        let took = t0.elapsed();
        assert!(
            took >= Duration::from_millis(2_900),
            "gave up early: {took:?}"
        );
        assert!(took < Duration::from_millis(4_000), "overran: {took:?}");
        assert!(e.to_string().contains("within 3s"), "{e}");
    }

    #[test]
    fn slices_without_a_node_owner_are_noticed() {
        let mut s = ResourceSlice::default();
        assert!(lacks_owner(std::slice::from_ref(&s)));
        s.metadata.owner_references = Some(vec![OwnerReference {
            api_version: "v1".into(),
            kind: "Node".into(),
            name: "n1".into(),
            uid: "u".into(),
            ..OwnerReference::default()
        }]);
        assert!(!lacks_owner(std::slice::from_ref(&s)));
        assert!(!lacks_owner(&[]));
    }
}
