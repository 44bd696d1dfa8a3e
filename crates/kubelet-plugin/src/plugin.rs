//! [`Plugin`]: the kubelet plugin as one value: state, claim source, health, metrics, and
//! the per-claim prepare/unprepare logic behind the gRPC services.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use tokio::sync::watch;
use tonic::Status;
use topoalign_dra::publish::Inventory;

use crate::checkpoint::PreparedRecord;
use crate::claims::ClaimSource;
use crate::config::PluginConfig;
use crate::engine::{Engine, FaultHook, ReconcileReport, check_uid};
use crate::error::{ClaimError, PluginError};
use crate::health::{DeviceHealthEntry, Health, HealthBoard};
use crate::metrics::Metrics;
use crate::pb::dra_v1 as dra;
use crate::vendor::VendorCdiStatus;

/// What the kubelet said in `NotifyRegistrationStatus`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RegistrationStatus {
    /// Whether the kubelet registered the plugin.
    pub registered: bool,
    /// The kubelet's error, if any.
    pub error: String,
}

/// A claim as the kubelet names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClaimRef {
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
    /// UID.
    pub uid: String,
}

pub(crate) struct Inner {
    pub(crate) config: PluginConfig,
    pub(crate) engine: Arc<Mutex<Engine>>,
    pub(crate) claims: Arc<dyn ClaimSource>,
    pub(crate) metrics: Metrics,
    pub(crate) health: Mutex<HealthBoard>,
    pub(crate) registration: watch::Sender<Option<RegistrationStatus>>,
    /// Set when `serve` is shutting down: ends the health streams.
    pub(crate) stopping: watch::Sender<bool>,
}

/// The kubelet plugin. Cheap to clone; clones share everything.
#[derive(Clone)]
pub struct Plugin {
    pub(crate) inner: Arc<Inner>,
}

impl std::fmt::Debug for Plugin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Plugin")
            .field("config", &self.inner.config)
            .finish_non_exhaustive()
    }
}

impl Plugin {
    /// Opens the plugin's state: creates the CDI and state directories, loads the
    /// checkpoint and reconciles the CDI directory with it.
    pub fn new(
        config: PluginConfig,
        inventory: impl Into<Arc<Inventory>>,
        claims: Arc<dyn ClaimSource>,
    ) -> Result<Self, PluginError> {
        Self::with_fault_hook(config, inventory, claims, None)
    }

    /// [`Plugin::new`] with a fault hook called at every write step (crash tests).
    pub fn with_fault_hook(
        config: PluginConfig,
        inventory: impl Into<Arc<Inventory>>,
        claims: Arc<dyn ClaimSource>,
        fault: Option<FaultHook>,
    ) -> Result<Self, PluginError> {
        let inventory = inventory.into();
        let (engine, report) = Engine::open(config.clone(), inventory.clone(), fault)?;
        log_report(&report);
        let health = HealthBoard::new(&config.node_name, &inventory);
        let metrics = Metrics::default();
        metrics
            .nvidia_cdi_spec_missing
            .set(i64::from(engine.vendor_cdi().nvidia_missing()));
        Ok(Self {
            inner: Arc::new(Inner {
                config,
                engine: Arc::new(Mutex::new(engine)),
                claims,
                metrics,
                health: Mutex::new(health),
                registration: watch::channel(None).0,
                stopping: watch::channel(false).0,
            }),
        })
    }

    /// The configuration.
    pub fn config(&self) -> &PluginConfig {
        &self.inner.config
    }

    /// The metrics (register them with [`Metrics::register`]).
    pub fn metrics(&self) -> &Metrics {
        &self.inner.metrics
    }

    /// Whether the node's GPUs had their vendor's CDI spec at the last look (startup or
    /// the last prepare): [`VendorCdiStatus::nvidia_missing`] is what `/readyz` and the
    /// `topoalign_plugin_nvidia_cdi_spec_missing` gauge report.
    pub fn vendor_cdi(&self) -> VendorCdiStatus {
        self.inner
            .engine
            .lock()
            .map(|e| e.vendor_cdi())
            .unwrap_or_default()
    }

    /// The kubelet's registration verdicts, `None` until the first.
    pub fn registration_status(&self) -> watch::Receiver<Option<RegistrationStatus>> {
        self.inner.registration.subscribe()
    }

    /// Sets the health of a GPU or physical NIC by its device name; false if unknown.
    pub fn set_health(&self, hardware: &str, health: Health) -> bool {
        match self.inner.health.lock() {
            Ok(mut h) => h.set(hardware, health),
            Err(_) => false,
        }
    }

    /// Takes a new inventory after the node's devices changed (a rescan found a device
    /// added or removed, or a NIC recabled): later prepares resolve against it and the
    /// health list follows it. Prepared claims are untouched.
    pub fn set_inventory(&self, inventory: impl Into<Arc<Inventory>>) {
        let inventory = inventory.into();
        if let Ok(mut e) = self.inner.engine.lock() {
            e.set_inventory(inventory.clone());
        }
        if let Ok(mut h) = self.inner.health.lock() {
            h.set_inventory(&inventory);
        }
    }

    /// Takes every inventory published on `inventories` ([`Plugin::set_inventory`]): the
    /// driver's follower sends one each time a rescan finds a device added or removed or
    /// a NIC recabled. Returns when the sender is gone.
    pub async fn follow(self, mut inventories: watch::Receiver<Arc<Inventory>>) {
        while inventories.changed().await.is_ok() {
            let inventory = inventories.borrow_and_update().clone();
            self.set_inventory(inventory);
        }
    }

    /// The device health list, current value first, then every change.
    pub fn health(&self) -> Option<watch::Receiver<Vec<DeviceHealthEntry>>> {
        self.inner.health.lock().ok().map(|h| h.subscribe())
    }

    /// The UIDs of the claims prepared now.
    pub fn prepared_claims(&self) -> Vec<String> {
        self.inner
            .engine
            .lock()
            .map(|e| e.checkpoint().claims.keys().cloned().collect())
            .unwrap_or_default()
    }

    async fn blocking<T: Send + 'static>(
        &self,
        uid: &str,
        f: impl FnOnce(&mut Engine) -> Result<T, ClaimError> + Send + 'static,
    ) -> Result<T, ClaimError> {
        let engine = self.inner.engine.clone();
        let u = uid.to_string();
        tokio::task::spawn_blocking(move || {
            let mut e = engine.lock().map_err(|_| ClaimError::Internal {
                uid: u.clone(),
                what: "the state lock is poisoned (an earlier operation panicked)".into(),
            })?;
            f(&mut e)
        })
        .await
        .map_err(|e| ClaimError::Internal {
            uid: uid.to_string(),
            what: e.to_string(),
        })?
    }

    /// Prepares one claim (see the crate docs for the checks).
    pub async fn prepare_claim(
        &self,
        index: usize,
        claim: &ClaimRef,
    ) -> Result<Vec<PreparedRecord>, ClaimError> {
        validate(index, claim)?;
        let uid = claim.uid.clone();
        if let Some(done) = self
            .blocking(&claim.uid, move |e| e.already_prepared(&uid))
            .await?
        {
            return Ok(done);
        }
        let alloc = self
            .inner
            .claims
            .get(&claim.namespace, &claim.name, &claim.uid)
            .await
            .map_err(|source| ClaimError::Source {
                namespace: claim.namespace.clone(),
                name: claim.name.clone(),
                uid: claim.uid.clone(),
                source,
            })?;
        let (result, missing) = self
            .blocking(&claim.uid, move |e| {
                let r = e.prepare(&alloc);
                Ok((r, e.vendor_cdi().nvidia_missing()))
            })
            .await?;
        self.inner
            .metrics
            .nvidia_cdi_spec_missing
            .set(i64::from(missing));
        result
    }

    /// Unprepares one claim.
    pub async fn unprepare_claim(&self, index: usize, claim: &ClaimRef) -> Result<(), ClaimError> {
        check_uid(&claim.uid).map_err(|source| ClaimError::BadUid { index, source })?;
        let uid = claim.uid.clone();
        self.blocking(&claim.uid, move |e| e.unprepare(&uid)).await
    }

    /// The DRA `NodePrepareResources` logic. Per-claim failures go into the response;
    /// when every claim failed, the call fails with the first failure's status code and
    /// a message naming every failure (the kubelet ignores the response then anyway).
    pub async fn node_prepare(
        &self,
        claims: Vec<dra::Claim>,
    ) -> Result<dra::NodePrepareResourcesResponse, Status> {
        let mut out = HashMap::new();
        let mut failures = Vec::new();
        for (i, c) in claims.iter().enumerate() {
            let claim = to_ref(c);
            let started = Instant::now();
            let result = self.prepare_claim(i, &claim).await;
            let m = &self.inner.metrics;
            m.prepare_seconds.observe(started.elapsed().as_secs_f64());
            let entry = match result {
                Ok(records) => {
                    m.prepares.inc();
                    dra::NodePrepareResourceResponse {
                        devices: records.iter().map(to_device).collect(),
                        error: String::new(),
                    }
                }
                Err(e) => {
                    m.errors.inc();
                    tracing::warn!(claim = %claim.uid, error = %e, "prepare failed");
                    let entry = dra::NodePrepareResourceResponse {
                        devices: Vec::new(),
                        error: e.to_string(),
                    };
                    failures.push(e);
                    entry
                }
            };
            out.insert(c.uid.clone(), entry);
        }
        all_failed(claims.len(), failures)?;
        Ok(dra::NodePrepareResourcesResponse { claims: out })
    }

    /// The DRA `NodeUnprepareResources` logic (same error rules as [`Plugin::node_prepare`]).
    pub async fn node_unprepare(
        &self,
        claims: Vec<dra::Claim>,
    ) -> Result<dra::NodeUnprepareResourcesResponse, Status> {
        let mut out = HashMap::new();
        let mut failures = Vec::new();
        for (i, c) in claims.iter().enumerate() {
            let started = Instant::now();
            let result = self.unprepare_claim(i, &to_ref(c)).await;
            let m = &self.inner.metrics;
            m.unprepare_seconds.observe(started.elapsed().as_secs_f64());
            let error = match result {
                Ok(()) => {
                    m.unprepares.inc();
                    String::new()
                }
                Err(e) => {
                    m.errors.inc();
                    tracing::warn!(claim = %c.uid, error = %e, "unprepare failed");
                    let s = e.to_string();
                    failures.push(e);
                    s
                }
            };
            out.insert(c.uid.clone(), dra::NodeUnprepareResourceResponse { error });
        }
        all_failed(claims.len(), failures)?;
        Ok(dra::NodeUnprepareResourcesResponse { claims: out })
    }
}

fn all_failed(total: usize, failures: Vec<ClaimError>) -> Result<(), Status> {
    if total == 0 || failures.len() < total {
        return Ok(());
    }
    let code = failures[0].code();
    let msg = failures
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("; ");
    Err(Status::new(code, msg))
}

fn validate(index: usize, c: &ClaimRef) -> Result<(), ClaimError> {
    let bad = |what: String| ClaimError::BadRequest { index, what };
    if c.namespace.is_empty() {
        return Err(bad(format!(
            "claim uid {:?}: the namespace is empty",
            c.uid
        )));
    }
    if c.name.is_empty() {
        return Err(bad(format!("claim uid {:?}: the name is empty", c.uid)));
    }
    check_uid(&c.uid).map_err(|source| ClaimError::BadUid { index, source })
}

fn to_ref(c: &dra::Claim) -> ClaimRef {
    ClaimRef {
        namespace: c.namespace.clone(),
        name: c.name.clone(),
        uid: c.uid.clone(),
    }
}

fn to_device(r: &PreparedRecord) -> dra::Device {
    dra::Device {
        request_names: vec![r.request.clone()],
        pool_name: r.pool.clone(),
        device_name: r.device.clone(),
        cdi_device_ids: r.cdi_device_ids.clone(),
    }
}

fn log_report(r: &ReconcileReport) {
    for p in &r.removed_orphans {
        tracing::info!(path = %p.display(), "removed a CDI spec of an unprepared claim");
    }
    for p in &r.removed_temporaries {
        tracing::info!(path = %p.display(), "removed a temporary file of an interrupted write");
    }
    for uid in &r.rewritten {
        tracing::info!(claim = %uid, "rewrote the CDI spec of a prepared claim");
    }
}
