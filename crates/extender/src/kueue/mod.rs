//! The Kueue wing: an AdmissionCheck controller (`spec.controllerName`
//! [`GANG_ADMISSION_CONTROLLER`](topoalign_kube_types::kueue::GANG_ADMISSION_CONTROLLER))
//! that lets Kueue admit a gang only into a domain whose nodes can give every pod its
//! claims (the pinned GPU+NIC pair claims `topoalign gang` writes), judged on the DRA
//! wing's state. Kueue's topology-aware scheduling (TAS) counts node allocatable only:
//! DRA devices are invisible to it, so without this check it admits gangs onto nodes
//! that have the GPUs but not the NICs.
//!
//! How the check steers TAS (Kueue v0.17.0 source):
//! - TAS picks the nodes when the scheduler reserves quota
//!   (`pkg/scheduler/flavorassigner/tas_flavorassigner.go`, `WorkloadsTopologyRequests`),
//!   before admission checks are consulted; it delays that only for MultiKueue and
//!   ProvisioningRequest checks (`podSetTopologyRequest`: `HasMultiKueueAdmissionCheck`,
//!   `HasProvRequestAdmissionCheck` set `DelayedTopologyRequest`), never for another
//!   controller's check.
//! - But the TAS request merges the `podSetUpdates` of every check already `Ready`
//!   (same function: `ac.State == CheckStateReady` → `PodSetUpdates`), and
//!   `findTopologyAssignment` (`pkg/cache/scheduler/tas_flavor_snapshot.go`) filters the
//!   nodes by their node selector. Kueue lists a ClusterQueue's checks on a workload as
//!   `Pending` before any reservation (`reconcileSyncAdmissionChecks` in
//!   `pkg/controller/core/workload_controller.go` runs for every workload of a known
//!   ClusterQueue). So before the reservation this check sets `Ready` with a node
//!   selector on the chosen domain (`podSetUpdates[].nodeSelector {key: domain}`):
//!   TAS then places the gang inside that domain, and the job's pods get the selector
//!   (`pkg/controller/jobframework/reconciler.go` applies the updates of `Ready` checks).
//!   A `Ready` state's updates are immutable (`validateImmutablePodSetUpdates`,
//!   `pkg/webhooks/workload_webhook.go`), so a pin that goes stale goes through `Retry`.
//! - When the scheduler reserved quota first (it does not wait for checks:
//!   `prepareWorkload` in `pkg/scheduler/scheduler.go`), the check judges the nodes TAS
//!   assigned (`status.admission.podSetAssignments[].topologyAssignment`): `Ready` when
//!   they hold the gang, else `Retry`. `Retry` makes Kueue evict the workload, release its
//!   quota and reset every check to `Pending` without its updates
//!   (`reconcileCheckBasedEviction`, `workload.Evict`, `resetChecksOnEviction` in
//!   `pkg/workload/admissionchecks.go`), then requeue it at once unless a `Retry` check
//!   set `requeueAfterSeconds` (`NeedsRequeueAtUpdate` sets `requeueState.requeueAt`; the
//!   workload controller waits for it before it evicts or requeues). So while the
//!   workload is `Evicted` with its quota still reserved, the check says `Retry` again,
//!   with `requeueAfterSeconds` ([`RETRY_AFTER_S`](decide::RETRY_AFTER_S)): the requeue
//!   waits, and once the quota is released the check pins the domain (`Retry` → `Ready`).
//! - Before any reservation, `Retry` holds the workload back: the scheduler skips
//!   workloads with a `Retry` or `Rejected` check (`pkg/scheduler/scheduler.go`,
//!   "The workload has failed admission checks"); no eviction happens without quota. So
//!   when no domain holds the gang the check says `Retry` with why per domain, and pins
//!   as soon as one does. `Rejected` is never used: it deactivates the workload
//!   (`SetDeactivationTarget`), which a full cluster does not deserve.
//!
//! - [`workload`]: what the check reads of a Workload and the check state it writes;
//! - [`judge`]: which domain holds the gang, and the check's next state (pure);
//! - [`controller`]: the watchers and the status patches.

pub(crate) mod controller;
pub(crate) mod judge;
pub(crate) mod workload;
