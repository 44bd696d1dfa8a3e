//! The topoalign node agent (`topoalign driver`), in the shape of the upstream DRA
//! helpers (`resourceslice.Controller` beside the kubelet plugin).
//!
//! * `args` (feature `clap`): `topoalign driver`'s flags, each defined once; read once at
//!   start into a [`Start`] (`start`: the configuration, the node's topology and facts,
//!   its MIG layout, its first inventory).
//! * `run`: the whole agent on a running runtime ([`run()`]): the follower, the slice
//!   controller, the kubelet plugin, the labelling task and the HTTP endpoints, with a
//!   graceful stop; the caller brings the runtime, the API client and the shutdown
//!   future from the process kit (`topoalign_probes`), as for the agent and the extender.
//! * `follower`: rediscovers the node and reads its NICs' neighbours again
//!   (`topoalign_node_facts::Follower`, the agent's policy too), and hands each new node
//!   over on watch channels: the pool to the slice controller, the inventory to the
//!   kubelet plugin, the domain facts to the labelling task.
//! * `slices`: the slice controller: publishes the pool as `resource.k8s.io/v1`
//!   ResourceSlices with server-side apply and keeps it published (`round`: apply and the
//!   readback of the counters pair devices rely on; `drift`: a watch that repairs
//!   deletions and edits; `diff`: the generation rules; `removal`: every slice removed
//!   on shutdown), retrying with backoff while the API server is away.
//! * `inventory`: the one way the driver builds an inventory (each NIC on its rail).
//! * `claims`: the kubelet plugin's claim source, reading ResourceClaims with kube-rs.
//! * [`dry_run`]: every object the driver would create, for `--dry-run`.
//! * `domain_labels`: the node's domain labels (`--write-domain-labels`, from
//!   `--fabric-from`, `--domains` and the NICs' neighbours, read by `topoalign_node_facts`
//!   as the device-plugin agent reads them), applied to the Node only for levels no
//!   other tool labels, again when the follower finds the NICs recabled.
//! * `http`: `/healthz`, `/readyz`, `/metrics`; `metrics`: the Prometheus metrics.
//!
//! `scripts/idle-rss.sh` measures the agent's memory while idle after publishing and
//! `scripts/hotplug-check.sh` checks rescans and generations, both against a real
//! kube-apiserver started with the e2e harness's `e2e/lib`.

#[cfg(feature = "clap")]
mod args;
mod claims;
mod domain_labels;
/// The objects `topoalign driver --dry-run` prints instead of publishing (`objects`, then
/// `list` or `table`): a separate sub-API of its own, named as a namespace by its callers.
pub mod dry_run;
mod error;
mod follower;
mod http;
mod inventory;
mod metrics;
mod run;
mod slices;
mod start;

#[cfg(feature = "clap")]
pub use args::{DriverArgs, DriverProcess};
pub use domain_labels::LABEL_MANAGER;
pub use error::DriverError;
pub use metrics::{Metrics, OpLabel};
pub use run::{THREADS, run};
pub use slices::{Memo, SyncPlan, Written, fingerprint, plan as sync_plan};
pub use start::{DriverConfig, Start};
