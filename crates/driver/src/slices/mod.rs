//! Publishes this node's pool with kube-rs: server-side apply of the slices computed by
//! `topoalign-dra`, generation rules from [`crate::diff`], deletion of stale slices,
//! periodic rediscovery (hot-plug), a watch on its own slices that repairs deletions and
//! edits, retries with exponential backoff while the API server is away, and removal of
//! every slice on shutdown.
//!
//! Its slices are found with the field selector `spec.nodeName=<node>,spec.driver=<driver>`
//! (the two fields the API server indexes for ResourceSlices), so leftovers of any earlier
//! run are found too, labelled or not.
//!
//! Every round reads the slices back as the API server stored them (the apply responses,
//! else the listed copies) and checks that the counters survived ([`crate::readback`]).
//! Counter slices are written and checked before any device slice, so pair devices are
//! never written after their counters were seen dropped: the pool falls back to plain
//! GPUs and NICs ([`PairMode::PlainOnly`]), and later rounds re-apply the counters as a
//! probe until they survive (the gate turned on), when the pairs come back.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
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
use topoalign_dra::{DRIVER_NAME, Inventory, PublishOptions};
use topoalign_topology::Topology;

use crate::diff::{self, Memo, SyncPlan, Written};
use crate::error::DriverError;
use crate::http::Health;
use crate::metrics::{Metrics, OpLabel};
use crate::readback::{self, Loss, PairMode};
use crate::rewire::Rewire;
use topoalign_node_facts::{REREAD_COMPONENT, Reread, reread};

/// How long a burst of watch events is collected before one sync.
const DEBOUNCE: Duration = Duration::from_millis(100);

/// What to publish, for which node, from which topology source.
#[derive(Debug, Clone)]
pub(crate) struct PublisherConfig {
    /// `spec.nodeName` and pool name.
    pub node_name: String,
    /// Where the topology is read from, at start and on every rescan.
    pub source: Source,
    /// The node's rail source, resolved again on every rediscovered topology, and the
    /// NICs' last good neighbours (followed by [`Publisher::following`]).
    pub rails: Option<crate::Rails>,
    /// Pair set and plain devices (the generation field is ignored: the publisher owns it).
    pub options: PublishOptions,
    /// How often the topology is rediscovered and the published pool checked.
    pub rescan_interval: Duration,
    /// How long shutdown keeps trying to delete the slices (the API server may be away).
    pub removal_timeout: Duration,
}

/// The field selector of this driver's slices for `node`.
pub(crate) fn field_selector(node: &str) -> String {
    format!("spec.nodeName={node},spec.driver={DRIVER_NAME}")
}

/// The node agent's publishing half.
pub(crate) struct Publisher {
    client: Client,
    slices: Api<ResourceSlice>,
    nodes: Api<Node>,
    cfg: PublisherConfig,
    metrics: Arc<Metrics>,
    health: Arc<Health>,
    topology: Topology,
    /// The device inventory of `topology` under `cfg.options`, built once per discovery
    /// and shared with the kubelet plugin.
    inventory: Arc<Inventory>,
    /// The inventory without pair devices, built when the mode first needs it (reset by
    /// a rediscovery).
    plain: Option<Arc<Inventory>>,
    desired_names: Vec<String>,
    memo: Memo,
    floor: i64,
    on_change: Option<TopologyHook>,
    /// The last published slices have no Node owner (the Node did not exist yet).
    owner_missing: bool,
    /// The neighbour sources read again on every rediscovery, when given.
    rewire: Option<Rewire>,
    /// Whether pair devices are published now.
    mode: PairMode,
    /// The mode the last completed round confirmed (logged when it changes).
    confirmed: Option<PairMode>,
    /// `resourceVersion`s this process wrote lately: a slice written twice in one publish
    /// (a counters probe, then the pool in the new mode) sends its watch event for the
    /// first write after the memo moved on; it is ours, not drift.
    recent_writes: VecDeque<String>,
}

/// How many of this process's latest writes [`Publisher::recent_writes`] remembers.
const RECENT_WRITES: usize = 64;

/// How the pool's mode changed within one round.
enum Round {
    /// The round completed in the current mode.
    Done(SyncPlan),
    /// The readback switched the mode; the pool is rebuilt at once.
    Switched,
}

/// How often a missing Node object is looked for (its slices get it as owner once it
/// exists).
const OWNER_CHECK: Duration = Duration::from_secs(5);

/// Called with the new inventory (the same one the publisher publishes) when a rescan
/// finds the node's devices or its NICs' neighbours changed.
pub(crate) type TopologyHook = Box<dyn Fn(&Arc<Inventory>) + Send + Sync>;

impl Publisher {
    /// A publisher for `topology` (already discovered from `cfg.source`) and its
    /// `inventory` under `cfg.options` (shared with the kubelet plugin).
    pub(crate) fn new(
        client: Client,
        cfg: PublisherConfig,
        topology: Topology,
        inventory: Arc<Inventory>,
        metrics: Arc<Metrics>,
        health: Arc<Health>,
    ) -> Self {
        Publisher {
            slices: Api::all(client.clone()),
            nodes: Api::all(client.clone()),
            client,
            cfg,
            metrics,
            health,
            topology,
            inventory,
            plain: None,
            desired_names: Vec::new(),
            memo: Memo::new(),
            floor: 0,
            on_change: None,
            owner_missing: false,
            rewire: None,
            mode: PairMode::Pairs,
            confirmed: None,
            recent_writes: VecDeque::new(),
        }
    }

    /// Logs the API server's version as a hint and starts with plain devices on servers
    /// older than the first with `DRAPartitionableDevices` on by default (the readback
    /// still decides: the gate may be on there, or off on a newer one).
    pub(crate) async fn check_version(&mut self) {
        let info = match self.client.apiserver_version().await {
            Ok(info) => info,
            Err(e) => {
                tracing::debug!(error = %e, "reading the API server's version (a hint only)");
                return;
            }
        };
        let (want_major, want_minor) = readback::FIRST_PARTITIONABLE_BY_DEFAULT;
        match readback::version(&info) {
            Some(v) if !readback::partitionable_by_default(v) => {
                tracing::info!(
                    version = %info.git_version,
                    "the API server is older than {want_major}.{want_minor}, where DRAPartitionableDevices is off unless enabled: publishing plain devices until the ResourceSlice counters are seen to survive"
                );
                self.mode = PairMode::PlainOnly;
            }
            Some(_) => tracing::info!(
                version = %info.git_version,
                "the API server has DRAPartitionableDevices on by default; checking that the ResourceSlice counters survive"
            ),
            None => tracing::debug!(version = ?info, "unreadable API server version"),
        }
    }

    /// Calls `hook` with the new inventory whenever a rescan finds a device added or
    /// removed or a NIC recabled, before the pool is republished (the kubelet plugin
    /// takes it, so it prepares what the slices now say).
    pub(crate) fn on_topology_change(mut self, hook: TopologyHook) -> Self {
        self.on_change = Some(hook);
        self
    }

    /// Reads the NICs' neighbours again on every rediscovery (`rewire`), so that the
    /// rails and the leaf follow a recabled NIC.
    pub(crate) fn following(mut self, rewire: Option<Rewire>) -> Self {
        self.rewire = rewire;
        self
    }

    /// The slices this node should publish now (generation 0; owned by the Node object
    /// when it exists, so that deleting the node deletes them).
    async fn desired(&mut self) -> Result<Vec<ResourceSlice>, DriverError> {
        let inventory = self.inventory_now()?;
        let mut slices = topoalign_dra::slices_for(
            &inventory,
            &self.cfg.node_name,
            self.cfg.options.generation,
        )?;
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

    /// The inventory of the current mode: the shared one, or, while pair devices are
    /// off ([`PairMode::PlainOnly`]) and the options ask for them, one without pairs.
    fn inventory_now(&mut self) -> Result<Arc<Inventory>, DriverError> {
        if self.mode.pairs() || !self.cfg.options.pair_devices {
            return Ok(self.inventory.clone());
        }
        if let Some(plain) = &self.plain {
            return Ok(plain.clone());
        }
        let plain = PublishOptions {
            pair_devices: false,
            ..self.cfg.options.clone()
        };
        let plain = Arc::new(crate::rails::inventory(
            &self.topology,
            &plain,
            self.cfg.rails.as_ref(),
        )?);
        self.plain = Some(plain.clone());
        Ok(plain)
    }

    /// One publishing round: read what the API server holds, write what differs, read
    /// the counters back. A mode switch rebuilds the pool at once (at most one switch back
    /// to pairs per call, so contradictory readbacks cannot loop).
    pub(crate) async fn sync(&mut self) -> Result<SyncPlan, DriverError> {
        let mut upgrades = 1;
        loop {
            match self.round(upgrades > 0).await? {
                Round::Done(plan) => return Ok(plan),
                Round::Switched if self.mode.pairs() => upgrades -= 1,
                Round::Switched => {}
            }
        }
    }

    async fn round(&mut self, may_upgrade: bool) -> Result<Round, DriverError> {
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
        // The slices as the API server holds them, updated with every apply's answer.
        let mut stored: BTreeMap<String, ResourceSlice> = existing
            .into_iter()
            .filter_map(|s| Some((s.metadata.name.clone()?, s)))
            .collect();

        for name in &plan.delete_first {
            self.delete(name).await?;
            stored.remove(name);
        }
        // Counter slices first: their readback decides before any pair is written.
        let (counter_applies, device_applies): (Vec<_>, Vec<_>) = plan
            .apply
            .iter()
            .zip(desired_for(&plan, &desired))
            .partition(|(slice, _)| slice.spec.shared_counters.is_some());
        for (slice, want) in counter_applies {
            let written = self.apply(slice, want).await?;
            stored.insert(written.metadata.name.clone().unwrap_or_default(), written);
        }
        if self.mode.pairs() {
            let counters = desired.iter().filter(|d| d.spec.shared_counters.is_some());
            let loss = readback::pool_loss(counters, &stored);
            if let Some(to) = readback::next_mode(self.mode, &loss, true, false) {
                self.switch(to, &loss);
                return Ok(Round::Switched);
            }
        }
        for (slice, want) in device_applies {
            let written = self.apply(slice, want).await?;
            stored.insert(written.metadata.name.clone().unwrap_or_default(), written);
        }
        if !self.mode.pairs() {
            // Probe: re-apply what is stored without its counters. A no-op while the API
            // server drops them; once it keeps them (the gate turned on) they are back.
            let applied: BTreeSet<&str> = plan
                .apply
                .iter()
                .filter_map(|s| s.metadata.name.as_deref())
                .collect();
            for d in &desired {
                let name = d.metadata.name.as_deref().unwrap_or_default();
                let lost = stored
                    .get(name)
                    .is_some_and(|s| !readback::slice_loss(d, s).is_empty());
                if applied.contains(name) || !lost {
                    continue;
                }
                let mut probe = d.clone();
                probe.spec.pool.generation = plan.generation;
                let written = self.apply(&probe, d).await?;
                stored.insert(name.to_string(), written);
            }
        }
        let loss = readback::pool_loss(&desired, &stored);
        let counted = desired.iter().any(readback::has_counters);
        if let Some(to) = readback::next_mode(self.mode, &loss, counted, may_upgrade) {
            self.switch(to, &loss);
            return Ok(Round::Switched);
        }
        for name in &plan.delete {
            self.delete(name).await?;
        }
        self.confirm(&loss);

        self.floor = self.floor.max(plan.generation);
        if plan.bumped {
            self.metrics.publishes.inc();
            tracing::info!(
                node = %self.cfg.node_name,
                generation = plan.generation,
                slices = desired.len(),
                applied = plan.apply.len(),
                deleted = plan.delete.len() + plan.delete_first.len(),
                mode = %self.mode,
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
        Ok(Round::Done(plan))
    }

    /// Applies one slice; the API server's answer is the slice as stored.
    async fn apply(
        &mut self,
        slice: &ResourceSlice,
        want: &ResourceSlice,
    ) -> Result<ResourceSlice, DriverError> {
        let name = slice.metadata.name.clone().unwrap_or_default();
        let written = self
            .slices
            .patch(
                &name,
                &PatchParams::apply(DRIVER_NAME).force(),
                &Patch::Apply(slice),
            )
            .await
            .map_err(|e| DriverError::api(format!("applying ResourceSlice {name}"), e))?;
        self.metrics
            .slice_writes
            .get_or_create(&OpLabel { op: "apply" })
            .inc();
        if let Some(rv) = written.metadata.resource_version.clone() {
            if self.recent_writes.len() == RECENT_WRITES {
                self.recent_writes.pop_front();
            }
            self.recent_writes.push_back(rv.clone());
            self.memo.insert(
                name,
                Written {
                    resource_version: rv,
                    fingerprint: diff::fingerprint(want),
                },
            );
        }
        Ok(written)
    }

    /// Switches the mode mid-round (the next round rebuilds the pool).
    fn switch(&mut self, to: PairMode, loss: &Loss) {
        tracing::debug!(node = %self.cfg.node_name, from = %self.mode, to = %to, readback = %loss, "switching the publishing mode");
        self.mode = to;
        self.metrics.pair_devices_enabled.set(0);
    }

    /// A round completed in the current mode: readiness, the gauge, and one log line when
    /// the mode differs from the last one confirmed.
    fn confirm(&mut self, loss: &Loss) {
        let note = match self.mode {
            PairMode::Pairs => {
                "publishing mode pairs: ResourceSlice counters survive on the API server"
                    .to_string()
            }
            PairMode::PlainOnly if !loss.is_empty() => {
                format!("publishing mode plain-only: {}", readback::DROPPED_WARNING)
            }
            PairMode::PlainOnly => "publishing mode plain-only: pair devices wait until the ResourceSlice counters are seen to survive".to_string(),
        };
        self.health.set_mode(note);
        self.metrics
            .pair_devices_enabled
            .set(i64::from(self.mode.pairs()));
        if self.confirmed == Some(self.mode) {
            return;
        }
        self.confirmed = Some(self.mode);
        match self.mode {
            PairMode::Pairs => tracing::info!(
                node = %self.cfg.node_name,
                "ResourceSlice counters survive on the API server: publishing pair devices beside plain GPUs and NICs"
            ),
            PairMode::PlainOnly if !loss.is_empty() => tracing::warn!(
                node = %self.cfg.node_name,
                readback = %loss,
                "{}",
                readback::DROPPED_WARNING
            ),
            PairMode::PlainOnly => tracing::warn!(
                node = %self.cfg.node_name,
                "publishing plain GPU and NIC devices only until the ResourceSlice counters are seen to survive"
            ),
        }
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

    /// Rediscovers the topology and reads the NICs' neighbours again; true when either
    /// changed (a device came or went, a NIC was recabled).
    async fn rediscover(&mut self) -> Result<bool, DriverError> {
        let source = self.cfg.source.clone();
        let reader = self.rewire.as_ref().map(Rewire::reader);
        let (found, read) = tokio::task::spawn_blocking(move || {
            topoalign_discover::load(&source).map(|found| {
                let read = reader.map(|r| r(&found.topology));
                (found, read)
            })
        })
        .await
        .map_err(|e| DriverError::Task {
            task: "discovery",
            why: e.to_string(),
        })??;
        let news = match (&self.rewire, read) {
            (Some(rw), Some(read)) => match reread(read, Some(rw.last())) {
                Reread::Changed(w) => Some(w),
                Reread::Same => None,
                Reread::Failed => {
                    self.metrics.error(REREAD_COMPONENT);
                    None
                }
            },
            _ => None,
        };
        let moved = found.topology != self.topology;
        if !moved && news.is_none() {
            return Ok(false);
        }
        if moved {
            for w in &found.warnings {
                tracing::warn!(warning = %w, "discovery");
            }
            tracing::info!(node = %self.cfg.node_name, "the topology changed; republishing");
        }
        if let Some(w) = &news {
            for warning in &w.warnings {
                tracing::warn!(warning = %warning, "NIC neighbours");
            }
            tracing::info!(node = %self.cfg.node_name, "the NICs' neighbours changed; republishing");
        }
        // The rails (and the domain facts) are resolved on the new topology and neighbours
        // before anything is replaced: a rail source that no longer fits keeps the last
        // good pool and fails the round.
        let rails = self.cfg.rails.as_ref().map(|r| crate::Rails {
            source: r.source.clone(),
            neighbours: news
                .as_ref()
                .map_or_else(|| r.neighbours.clone(), |w| w.neighbours.clone()),
        });
        let inventory =
            crate::rails::inventory(&found.topology, &self.cfg.options, rails.as_ref())?;
        let facts = match &self.rewire {
            Some(rw) => rw.facts(
                &found.topology,
                news.as_ref(),
                rails.as_ref().map(|r| &r.source),
            )?,
            None => None,
        };
        self.topology = found.topology;
        self.inventory = Arc::new(inventory);
        self.plain = None;
        self.cfg.rails = rails;
        if let Some(rw) = &mut self.rewire {
            rw.commit(news, facts);
        }
        if let Some(hook) = &self.on_change {
            hook(&self.inventory);
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
                let rv = s.metadata.resource_version.as_deref();
                let ours = self
                    .memo
                    .get(name)
                    .is_some_and(|w| Some(w.resource_version.as_str()) == rv)
                    || rv.is_some_and(|rv| self.recent_writes.iter().any(|r| r == rv));
                !ours
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
    pub(crate) async fn run(
        mut self,
        mut shutdown: watch::Receiver<bool>,
    ) -> Result<(), DriverError> {
        self.check_version().await;
        let config = watcher::Config::default().fields(&field_selector(&self.cfg.node_name));
        let watch = |slices: Api<ResourceSlice>, config: watcher::Config| {
            watcher::watcher(slices, config).default_backoff().boxed()
        };
        let mut events = watch(self.slices.clone(), config.clone());
        // Whether the watch's last word was an error: its backoff grows to 30 s while the
        // API server is away, so once a publishing round proves the server is back the
        // watch is started afresh instead of waiting that out (readiness follows it).
        let mut watch_broken = false;
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

    /// Deletes every slice of this driver and node, retrying until
    /// [`PublisherConfig::removal_timeout`] has passed (each try is cut off at that
    /// deadline too): it gives up at the deadline, not before.
    pub(crate) async fn remove_all(&mut self) -> Result<(), DriverError> {
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
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    /// A client for an API server that is not there (a closed loopback port): every
    /// call fails at once with "connection refused".
    pub(super) fn unreachable() -> Client {
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
        let inventory = Arc::new(Inventory::new(&topology, &PublishOptions::default()));
        Publisher::new(
            unreachable(),
            PublisherConfig {
                node_name: "n1".into(),
                source: Source::Profile("mi300x-8".into()),
                rails: None,
                options: PublishOptions::default(),
                rescan_interval: Duration::from_secs(3600),
                removal_timeout,
            },
            topology,
            inventory,
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

    #[tokio::test]
    async fn events_of_this_process_s_earlier_writes_are_not_drift() {
        let mut p = publisher(Duration::from_secs(1));
        let slice = |rv: &str| {
            let mut s = ResourceSlice::default();
            s.metadata.name = Some("n1-topoalign-dev-counters-0".into());
            s.metadata.resource_version = Some(rv.into());
            s
        };
        // Written twice in one publish (probe at 10, then the pool at 11).
        for rv in ["10", "11"] {
            p.recent_writes.push_back(rv.into());
        }
        p.memo.insert(
            "n1-topoalign-dev-counters-0".into(),
            Written {
                resource_version: "11".into(),
                fingerprint: 0,
            },
        );
        assert!(!p.is_foreign(&Event::Apply(slice("11"))));
        assert!(!p.is_foreign(&Event::Apply(slice("10"))));
        // Someone else's edit.
        assert!(p.is_foreign(&Event::Apply(slice("12"))));
        let mut unversioned = slice("");
        unversioned.metadata.resource_version = None;
        assert!(p.is_foreign(&Event::Apply(unversioned)));
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

#[cfg(test)]
#[path = "publisher_rewire_tests.rs"]
mod rewire_tests;
