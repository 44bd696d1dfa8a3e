//! The topoalign node agent (`topoalign driver`).
//!
//! * `publisher`: publishes this node's pool of GPUs, NICs and GPU+NIC pairs as
//!   `resource.k8s.io/v1` ResourceSlices with server-side apply, keeps it published
//!   (rescans, a watch that repairs deletions and edits, retries with backoff) and
//!   removes it on shutdown; `diff` holds its generation rules, `readback` its
//!   check that the API server kept the counters pair devices rely on.
//! * `claims`: the kubelet plugin's claim source, reading ResourceClaims with kube-rs.
//! * [`dry_run`]: every object the driver would create, for `--dry-run`.
//! * `rails`: the node's rails (`--rails FILE`) on the inventory; `rewire`: the NICs'
//!   neighbours read again on every rediscovery, so the rails and the leaf follow a
//!   recabled NIC.
//! * `domain_labels`: the node's domain labels (`--write-domain-labels`, from
//!   `--fabric-from` and `--domains`, read by `topoalign_node_facts` as the device-plugin
//!   agent reads them), applied once to the Node only for levels no other tool labels.
//! * `http`: `/healthz`, `/readyz`, `/metrics`; `metrics`: the Prometheus metrics.
//! * `args` (feature `clap`): `topoalign driver`'s flags, each defined once.
//! * `runtime`: the whole agent: publisher, kubelet plugin and HTTP server, with
//!   graceful shutdown on SIGTERM/SIGINT, assembled from the process kit
//!   (`topoalign_probes`: client, signals, runtime, log format).
//!
//! `scripts/idle-rss.sh` measures the agent's memory while idle after publishing and
//! `scripts/hotplug-check.sh` checks rescans and generations, both against a real
//! kube-apiserver started with the e2e harness's `e2e/lib`.

#[cfg(feature = "clap")]
mod args;
mod claims;
mod diff;
mod domain_labels;
/// The objects `topoalign driver --dry-run` prints instead of publishing (`objects`, then
/// `list` or `table`): a separate sub-API of its own, named as a namespace by its callers.
pub mod dry_run;
mod error;
mod http;
mod metrics;
mod publisher;
mod rails;
mod readback;
mod rewire;
mod runtime;

#[cfg(feature = "clap")]
pub use args::{DriverArgs, StartInputs};
pub use diff::{Memo, SyncPlan, Written, fingerprint, plan as sync_plan};
pub use domain_labels::LABEL_MANAGER;
pub use error::DriverError;
pub use metrics::{Metrics, OpLabel};
pub use rails::Rails;
pub use runtime::{DriverConfig, run_blocking};
