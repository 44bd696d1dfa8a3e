//! Prepare, unprepare and startup reconciliation: the plugin's state, serialized behind one
//! lock by the caller, with every file written through `topoalign_atomic`.
//!
//! # Crash safety
//! * prepare: the checkpoint gains the claim (write-ahead: its devices are reserved from
//!   here on), then the CDI spec is written. A crash between the two leaves a checkpointed
//!   claim without a spec; [`Engine::open`] re-creates the spec.
//! * unprepare: the CDI spec is removed, then the checkpoint loses the claim. A crash
//!   between the two leaves a checkpointed claim without a spec; reconciliation re-creates
//!   it and the kubelet's retried unprepare completes.
//! * reconciliation deletes every CDI spec of ours whose claim the checkpoint does not
//!   hold (and temporary files of interrupted writes), and (re)writes every spec whose
//!   file is missing or differs.
//!
//! So after a crash anywhere, the CDI directory holds exactly the checkpointed claims'
//! specs: no orphan spec, no lost prepared claim.
//!
//! Dynamic MIG (`crate::mig_dynamic`): prepare first checkpoints the allocated
//! placements as being created (`creating`), then creates their instances, then writes
//! the claim with their IDs (clearing `creating`); any failure destroys what was made.
//! A crash before the claim is written leaves `creating`, and [`Engine::open`] destroys
//! whatever instance sits at those placements. Unprepare destroys the instances by their
//! checkpointed IDs before the claim leaves the checkpoint, so a restart between prepare
//! and unprepare loses nothing.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use topoalign_atomic::{WriteOptions, WriteStep};
use topoalign_dra::prepare::add_roce_net_devices;
use topoalign_dra::prepare::cdi_file_name;
use topoalign_dra::{
    prepare::{
        CdiPlan, Holdings, PreparedDevice, PreparedGpu, compose_cdi, prepare_allocation,
        vendor_gpu_ids, vendor_mig_ids,
    },
    publish::Inventory,
};
use topoalign_topology::GpuVendor;

use crate::checkpoint::{Checkpoint, PreparedClaim, PreparedRecord, json_bytes};
use crate::claims::ClaimAllocation;
use crate::config::PluginConfig;
use crate::error::{ClaimError, PluginError, UidError};
use crate::mig_dynamic::{CreatedMig, MigTool, create_all, pending, rollback_all};
use crate::vendor::{VendorCdiStatus, VendorScan};

/// A point where a test may inject a failure or a crash (by panicking in the hook).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FaultPoint {
    /// A step of the atomic checkpoint write.
    Checkpoint(WriteStep),
    /// A step of the atomic CDI spec write.
    Cdi(WriteStep),
    /// Right after a CDI spec was removed.
    CdiRemoved,
}

impl FaultPoint {
    /// Every point, in the order prepare then unprepare pass them.
    pub const ALL: [FaultPoint; 9] = [
        FaultPoint::Checkpoint(WriteStep::Created),
        FaultPoint::Checkpoint(WriteStep::Written),
        FaultPoint::Checkpoint(WriteStep::Synced),
        FaultPoint::Checkpoint(WriteStep::Renamed),
        FaultPoint::Cdi(WriteStep::Created),
        FaultPoint::Cdi(WriteStep::Written),
        FaultPoint::Cdi(WriteStep::Synced),
        FaultPoint::Cdi(WriteStep::Renamed),
        FaultPoint::CdiRemoved,
    ];

    /// Its name: `checkpoint-created` … `cdi-renamed`, `cdi-removed`.
    pub fn name(self) -> &'static str {
        use WriteStep::{Created, Renamed, Synced, Written};
        match self {
            FaultPoint::Checkpoint(Created) => "checkpoint-created",
            FaultPoint::Checkpoint(Written) => "checkpoint-written",
            FaultPoint::Checkpoint(Synced) => "checkpoint-synced",
            FaultPoint::Checkpoint(Renamed) => "checkpoint-renamed",
            FaultPoint::Cdi(Created) => "cdi-created",
            FaultPoint::Cdi(Written) => "cdi-written",
            FaultPoint::Cdi(Synced) => "cdi-synced",
            FaultPoint::Cdi(Renamed) => "cdi-renamed",
            FaultPoint::CdiRemoved => "cdi-removed",
        }
    }
}

impl std::fmt::Display for FaultPoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for FaultPoint {
    type Err = PluginError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        FaultPoint::ALL
            .into_iter()
            .find(|p| p.name() == s)
            .ok_or_else(|| PluginError::UnknownFaultPoint {
                given: s.to_string(),
                known: FaultPoint::ALL.map(FaultPoint::name).join(", "),
            })
    }
}

/// The fault hook: called at every [`FaultPoint`]; an error fails the operation there.
pub type FaultHook = Arc<dyn Fn(FaultPoint) -> io::Result<()> + Send + Sync>;

/// What startup reconciliation did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReconcileReport {
    /// CDI specs of ours without a checkpointed claim, deleted.
    pub removed_orphans: Vec<PathBuf>,
    /// Temporary files of interrupted writes, deleted.
    pub removed_temporaries: Vec<PathBuf>,
    /// Claims whose spec was missing or different, rewritten.
    pub rewritten: Vec<String>,
}

/// The plugin's prepared state.
pub struct Engine {
    config: PluginConfig,
    inventory: Arc<Inventory>,
    checkpoint: Checkpoint,
    holdings: Holdings,
    fault: Option<FaultHook>,
    vendor: VendorCdiStatus,
    mig_tool: MigTool,
}

impl std::fmt::Debug for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engine")
            .field("config", &self.config)
            .field("checkpoint", &self.checkpoint)
            .finish_non_exhaustive()
    }
}

/// Checks that a claim UID is safe in a file name (Kubernetes UIDs are UUIDs).
pub(crate) fn check_uid(uid: &str) -> Result<(), UidError> {
    if uid.is_empty() {
        return Err(UidError::Empty);
    }
    if uid.len() > 128 || !uid.chars().all(|c| c.is_ascii_alphanumeric() || c == '-') {
        return Err(UidError::NotUid(uid.to_string()));
    }
    Ok(())
}

fn holdings_of(cp: &Checkpoint) -> Holdings {
    let mut h = Holdings::default();
    for (uid, claim) in &cp.claims {
        for d in &claim.devices {
            if let Some(g) = d.gpu {
                h.gpus.insert(g, uid.clone());
            }
            if let Some(f) = d.nic_function {
                h.nic_functions.insert(f, uid.clone());
            }
            h.devices.insert(d.device.clone(), uid.clone());
        }
    }
    h
}

/// The base request name (`req` of `req/sub`): what the kubelet matches containers on.
fn base_request(request: &str) -> &str {
    request.split('/').next().unwrap_or(request)
}

impl Engine {
    /// Creates the directories, loads the checkpoint and reconciles the CDI directory.
    pub fn open(
        config: PluginConfig,
        inventory: Arc<Inventory>,
        fault: Option<FaultHook>,
    ) -> Result<(Self, ReconcileReport), PluginError> {
        for dir in [&config.cdi_dir, &config.state_dir] {
            std::fs::create_dir_all(dir).map_err(|source| PluginError::Io {
                op: "creating the directory",
                path: dir.clone(),
                source,
            })?;
        }
        let checkpoint = Checkpoint::load(&config.checkpoint_path())?;
        let holdings = holdings_of(&checkpoint);
        let vendor = VendorCdiStatus::of(&inventory, &VendorScan::read(&config.cdi_spec_dirs));
        vendor.log_change(None, &config.cdi_spec_dirs);
        let mig_tool = MigTool::new(config.nvidia_smi.as_deref(), &config.host_root);
        let mut engine = Self {
            mig_tool,
            config,
            inventory,
            checkpoint,
            holdings,
            fault,
            vendor,
        };
        engine.clear_pending();
        let report = engine.reconcile()?;
        Ok((engine, report))
    }

    /// The checkpoint as it is now.
    pub fn checkpoint(&self) -> &Checkpoint {
        &self.checkpoint
    }

    /// Whether the node's GPUs had their vendor's CDI spec at the last look (startup or
    /// the last prepare).
    pub fn vendor_cdi(&self) -> VendorCdiStatus {
        self.vendor
    }

    /// The node's inventory.
    pub fn inventory(&self) -> &Inventory {
        &self.inventory
    }

    /// Replaces the inventory after the node's devices changed (hot-plug). Claims
    /// prepared before keep their checkpoint records and CDI specs until unprepared; new
    /// prepares resolve device names against the new inventory.
    pub fn set_inventory(&mut self, inventory: Arc<Inventory>) {
        self.inventory = inventory;
    }

    /// The CDI spec file of a claim.
    pub fn cdi_path(&self, uid: &str) -> PathBuf {
        self.config.cdi_dir.join(cdi_file_name(uid))
    }

    /// A prepared claim's devices, if the claim is prepared (the fast idempotent path;
    /// it also repairs a missing spec).
    pub fn already_prepared(
        &mut self,
        uid: &str,
    ) -> Result<Option<Vec<PreparedRecord>>, ClaimError> {
        let Some(claim) = self.checkpoint.claims.get(uid).cloned() else {
            return Ok(None);
        };
        if let Some(spec) = &claim.spec {
            self.ensure_spec(uid, spec)?;
        }
        Ok(Some(claim.devices))
    }

    /// Prepares one claim: checks the allocation, reserves in the checkpoint, writes the
    /// CDI spec. Idempotent: a prepared claim returns what it returned the first time.
    pub fn prepare(&mut self, claim: &ClaimAllocation) -> Result<Vec<PreparedRecord>, ClaimError> {
        let uid = claim.uid.as_str();
        check_uid(uid).map_err(|source| ClaimError::BadUid { index: 0, source })?;
        if let Some(done) = self.already_prepared(uid)? {
            return Ok(done);
        }
        let pool = self.config.node_name.clone();
        let mut devices =
            prepare_allocation(&self.inventory, &pool, &claim.results, &self.holdings).map_err(
                |source| ClaimError::Allocation {
                    namespace: claim.namespace.clone(),
                    name: claim.name.clone(),
                    uid: uid.to_string(),
                    source: Box::new(source),
                },
            )?;
        // Dynamic MIG: the allocated placements become instances (destroyed again if
        // anything below fails: nothing of the claim is left). Write-ahead: the
        // placements are checkpointed first, so that a crash before the claim is
        // checkpointed leaves a record the next start clears.
        let intents = pending(&self.inventory, uid, &devices);
        if !intents.is_empty() {
            let mut next = self.checkpoint.clone();
            next.creating.extend(intents);
            self.save_checkpoint(uid, next)?;
        }
        let created = match create_all(&self.mig_tool, &self.inventory, &mut devices) {
            Ok(c) => c,
            Err(source) => {
                self.forget_pending(uid);
                return Err(ClaimError::Mig {
                    namespace: claim.namespace.clone(),
                    name: claim.name.clone(),
                    uid: uid.to_string(),
                    source: Box::new(source),
                });
            }
        };
        let (spec, ids) = match self.compose(claim, &devices) {
            Ok(c) => c,
            Err(e) => {
                rollback_all(&self.mig_tool, &created);
                self.forget_pending(uid);
                return Err(e);
            }
        };
        let records = devices
            .iter()
            .zip(ids)
            .zip(created.iter().cloned())
            .map(
                |((d, cdi_device_ids), mig): ((&PreparedDevice, _), Option<CreatedMig>)| {
                    PreparedRecord {
                        request: base_request(&d.request).to_string(),
                        pool: pool.clone(),
                        device: d.device.clone(),
                        gpu: d.gpu.as_ref().map(|g| g.bdf),
                        nic_function: d.nic_function.as_ref().map(|f| f.bdf),
                        cdi_device_ids,
                        mig,
                    }
                },
            )
            .collect::<Vec<_>>();
        let entry = PreparedClaim {
            namespace: claim.namespace.clone(),
            name: claim.name.clone(),
            devices: records.clone(),
            spec: spec.clone(),
        };

        // 1. Write-ahead: the checkpoint holds the claim.
        let mut next = self.checkpoint.clone();
        next.claims.insert(uid.to_string(), entry);
        next.creating.retain(|p| p.claim != uid);
        if let Err(e) = self.save_checkpoint(uid, next) {
            rollback_all(&self.mig_tool, &created);
            self.forget_pending(uid);
            return Err(e);
        }

        // 2. The CDI spec; on failure, take the claim back out (no partial state).
        if let Some(spec) = &spec
            && let Err(e) = self.write_spec(uid, spec)
        {
            self.rollback_prepare(uid);
            rollback_all(&self.mig_tool, &created);
            return Err(e);
        }
        Ok(records)
    }

    /// This driver's CDI spec of a claim and every device's CDI ids, composed with the
    /// vendors' specs as they are now (read from the runtime's CDI directories).
    #[allow(clippy::type_complexity)]
    fn compose(
        &mut self,
        claim: &ClaimAllocation,
        devices: &[PreparedDevice],
    ) -> Result<(Option<topoalign_dra::prepare::CdiSpec>, Vec<Vec<String>>), ClaimError> {
        if devices.is_empty() {
            return Ok((None, Vec::new()));
        }
        let scan = VendorScan::read(&self.config.cdi_spec_dirs);
        let status = VendorCdiStatus::of(&self.inventory, &scan);
        status.log_change(Some(&self.vendor), &self.config.cdi_spec_dirs);
        self.vendor = status;
        let vendor_err = |source: topoalign_dra::prepare::VendorCdiError| ClaimError::VendorCdi {
            namespace: claim.namespace.clone(),
            name: claim.name.clone(),
            uid: claim.uid.clone(),
            source: Box::new(source),
        };
        let gpus: Vec<&PreparedGpu> = devices.iter().filter_map(|d| d.gpu.as_ref()).collect();
        if let Some(e) = scan.malformed_for(&gpus) {
            return Err(vendor_err(e.clone()));
        }
        let vendor_ids =
            vendor_gpu_ids(&scan.specs, &self.inventory.gpus, &gpus).map_err(vendor_err)?;
        let migs: Vec<(&str, &topoalign_dra::prepare::PreparedMig)> = devices
            .iter()
            .filter_map(|d| d.mig.as_ref().map(|m| (d.device.as_str(), m)))
            .collect();
        let vendor_mig_ids = vendor_mig_ids(&scan.specs, &migs).map_err(vendor_err)?;
        let plan = CdiPlan {
            vendor_ids: &vendor_ids,
            vendor_mig_ids: &vendor_mig_ids,
            nvidia_node: self
                .inventory
                .gpus
                .iter()
                .any(|g| g.vendor == GpuVendor::Nvidia),
        };
        let mut composed = compose_cdi(&claim.uid, devices, &plan);
        if self.config.cdi_net_devices {
            add_roce_net_devices(&mut composed, &claim.uid, devices, &self.inventory);
        }
        Ok((composed.spec, composed.ids))
    }

    /// Drops a claim's pending placements from the checkpoint (their instances were
    /// destroyed or never made); a failed write is logged, the next start clears them.
    fn forget_pending(&mut self, uid: &str) {
        if !self.checkpoint.creating.iter().any(|p| p.claim == uid) {
            return;
        }
        let mut next = self.checkpoint.clone();
        next.creating.retain(|p| p.claim != uid);
        if let Err(e) = self.save_checkpoint(uid, next) {
            tracing::warn!(error = %e, "dropping pending MIG placements from the checkpoint");
        }
    }

    /// Destroys the instances of placements a crash left pending (created, or perhaps
    /// created, for a claim that never reached the checkpoint); those the tool cannot
    /// clear now stay pending and are logged.
    fn clear_pending(&mut self) {
        if self.checkpoint.creating.is_empty() {
            return;
        }
        let mut next = self.checkpoint.clone();
        next.creating.retain(|p| match self.mig_tool.clear_pending(p) {
            Ok(found) => {
                tracing::info!(claim = %p.claim, gpu = %p.gpu, profile = %p.profile, start = p.start, destroyed = found, "cleared a MIG placement an interrupted prepare left");
                false
            }
            Err(e) => {
                tracing::warn!(error = %e, "clearing a MIG placement an interrupted prepare left");
                true
            }
        });
        if let Err(e) = self.save_checkpoint("", next) {
            tracing::warn!(error = %e, "writing the checkpoint after clearing MIG placements");
        }
    }

    fn rollback_prepare(&mut self, uid: &str) {
        let path = self.cdi_path(uid);
        if let Err(e) = std::fs::remove_file(&path)
            && e.kind() != io::ErrorKind::NotFound
        {
            tracing::warn!(path = %path.display(), error = %e, "removing a failed CDI spec");
        }
        let mut back = self.checkpoint.clone();
        back.claims.remove(uid);
        if let Err(e) = self.save_checkpoint(uid, back) {
            // The claim stays checkpointed; the next prepare or restart completes it.
            tracing::warn!(error = %e, "rolling back the checkpoint after a failed CDI write");
        }
    }

    /// Unprepares one claim: removes its CDI spec, then forgets it. Idempotent: an unknown
    /// claim is already unprepared (a stray spec of it is still removed).
    pub fn unprepare(&mut self, uid: &str) -> Result<(), ClaimError> {
        check_uid(uid).map_err(|source| ClaimError::BadUid { index: 0, source })?;
        let path = self.cdi_path(uid);
        match std::fs::remove_file(&path) {
            Ok(()) => {
                sync_dir(&self.config.cdi_dir);
                self.fault(uid, FaultPoint::CdiRemoved)?;
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(source) => {
                return Err(ClaimError::Remove {
                    uid: uid.to_string(),
                    path,
                    source,
                });
            }
        }
        if let Some(claim) = self.checkpoint.claims.get(uid) {
            // Dynamic MIG: destroy what prepare created; on failure the claim stays
            // checkpointed and the kubelet's retry destroys the rest.
            for m in claim.devices.iter().filter_map(|d| d.mig.as_ref()) {
                self.mig_tool.destroy(m).map_err(|source| ClaimError::Mig {
                    namespace: claim.namespace.clone(),
                    name: claim.name.clone(),
                    uid: uid.to_string(),
                    source: Box::new(source),
                })?;
            }
            let mut next = self.checkpoint.clone();
            next.claims.remove(uid);
            self.save_checkpoint(uid, next)?;
        }
        Ok(())
    }

    /// Makes the CDI directory match the checkpoint (see the module docs).
    pub fn reconcile(&mut self) -> Result<ReconcileReport, PluginError> {
        let mut report = ReconcileReport::default();
        let probe = cdi_file_name("\u{0}");
        let (prefix, suffix) = probe.split_once('\u{0}').unwrap_or((probe.as_str(), ""));
        let temp_prefix = format!(".{prefix}");
        let dir = self.config.cdi_dir.clone();
        let entries = std::fs::read_dir(&dir).map_err(|source| PluginError::Io {
            op: "listing",
            path: dir.clone(),
            source,
        })?;
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            let path = entry.path();
            if name.starts_with(&temp_prefix) && name.ends_with(".tmp") {
                remove(&path)?;
                report.removed_temporaries.push(path);
            } else if let Some(uid) = name
                .strip_prefix(prefix)
                .and_then(|r| r.strip_suffix(suffix))
                && !self.checkpoint.claims.contains_key(uid)
            {
                remove(&path)?;
                report.removed_orphans.push(path);
            }
        }
        self.remove_checkpoint_temporaries(&mut report)?;
        let claims: Vec<(String, PreparedClaim)> = self
            .checkpoint
            .claims
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        for (uid, claim) in claims {
            if let Some(spec) = &claim.spec
                && self.ensure_spec(&uid, spec).map_err(|e| match e {
                    ClaimError::Write { source, .. } => PluginError::Write(source),
                    other => PluginError::Checkpoint {
                        path: self.config.checkpoint_path(),
                        what: other.to_string(),
                    },
                })?
            {
                report.rewritten.push(uid);
            }
        }
        if !report.removed_temporaries.is_empty() || !report.removed_orphans.is_empty() {
            sync_dir(&dir);
        }
        Ok(report)
    }

    fn remove_checkpoint_temporaries(
        &self,
        report: &mut ReconcileReport,
    ) -> Result<(), PluginError> {
        let cp = self.config.checkpoint_path();
        let Some(name) = cp.file_name().map(|n| format!(".{}.", n.to_string_lossy())) else {
            return Ok(());
        };
        let dir = self.config.state_dir.clone();
        let entries = std::fs::read_dir(&dir).map_err(|source| PluginError::Io {
            op: "listing",
            path: dir.clone(),
            source,
        })?;
        for entry in entries.flatten() {
            let n = entry.file_name().to_string_lossy().into_owned();
            if n.starts_with(&name) && n.ends_with(".tmp") {
                let path = entry.path();
                remove(&path)?;
                report.removed_temporaries.push(path);
            }
        }
        Ok(())
    }

    /// Writes the spec if the file is missing or differs; true when it wrote.
    fn ensure_spec(
        &mut self,
        uid: &str,
        spec: &topoalign_dra::prepare::CdiSpec,
    ) -> Result<bool, ClaimError> {
        let want = json_bytes(spec).map_err(|e| internal(uid, e))?;
        if std::fs::read(self.cdi_path(uid)).ok().as_deref() == Some(want.as_slice()) {
            return Ok(false);
        }
        self.write_spec(uid, spec)?;
        Ok(true)
    }

    fn write_spec(
        &self,
        uid: &str,
        spec: &topoalign_dra::prepare::CdiSpec,
    ) -> Result<(), ClaimError> {
        let bytes = json_bytes(spec).map_err(|e| internal(uid, e))?;
        let hook = |step: WriteStep, _: &Path| self.fault_io(FaultPoint::Cdi(step));
        topoalign_atomic::write_with(
            &self.cdi_path(uid),
            &bytes,
            WriteOptions {
                mode: Some(0o644),
                hook: Some(&hook),
            },
        )
        .map_err(|source| ClaimError::Write {
            uid: uid.to_string(),
            source,
        })
    }

    fn save_checkpoint(&mut self, uid: &str, next: Checkpoint) -> Result<(), ClaimError> {
        let bytes = next.to_bytes().map_err(|e| internal(uid, e))?;
        let hook = |step: WriteStep, _: &Path| self.fault_io(FaultPoint::Checkpoint(step));
        topoalign_atomic::write_with(
            &self.config.checkpoint_path(),
            &bytes,
            WriteOptions {
                mode: Some(0o600),
                hook: Some(&hook),
            },
        )
        .map_err(|source| ClaimError::Write {
            uid: uid.to_string(),
            source,
        })?;
        self.holdings = holdings_of(&next);
        self.checkpoint = next;
        Ok(())
    }

    fn fault_io(&self, point: FaultPoint) -> io::Result<()> {
        match &self.fault {
            Some(f) => f(point),
            None => Ok(()),
        }
    }

    fn fault(&self, uid: &str, point: FaultPoint) -> Result<(), ClaimError> {
        self.fault_io(point).map_err(|e| internal(uid, e))
    }
}

fn internal(uid: &str, e: impl std::fmt::Display) -> ClaimError {
    ClaimError::Internal {
        uid: uid.to_string(),
        what: e.to_string(),
    }
}

fn remove(path: &Path) -> Result<(), PluginError> {
    match std::fs::remove_file(path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(source) => Err(PluginError::Io {
            op: "removing",
            path: path.to_path_buf(),
            source,
        }),
    }
}

/// Makes removals in `dir` durable; a failure only weakens durability, so it is logged.
fn sync_dir(dir: &Path) {
    if let Err(e) = std::fs::File::open(dir).and_then(|d| d.sync_all()) {
        tracing::warn!(dir = %dir.display(), error = %e, "syncing the directory");
    }
}
