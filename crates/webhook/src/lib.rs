//! `topoalign webhook`: a mutating admission webhook that rewrites a pod's device-plugin
//! requests into topoalign's extended resources (each backed by a DeviceClass with
//! `spec.extendedResourceName`, so the scheduler makes the claim), opt-in per namespace.
//!
//! The decision is pure (AdmissionReview in, response with a JSON Patch out):
//! - `names`: which device-plugin names mean GPUs, NICs, shared RDMA pools and MIG
//!   instances, and topoalign's names they become ([`Names`], built-in defaults from the
//!   plugins' sources; `config`: the `--config` file);
//! - `container`: one container's counts and what they become (N GPUs with N or kN NICs
//!   → N pairs and (k−1)N NICs; GPUs alone, NICs alone, shared pools, MIG profiles);
//! - `networks`: the pod's Multus networks that a device plugin fed (removed) or may have
//!   fed (a warning);
//! - `mutate`: the whole pod, all or nothing ([`mutate_pod`] → [`Decision`]), with the
//!   record annotation ([`Record`]);
//! - `review`: the AdmissionReview envelope ([`review`] → [`Answer`]);
//! - `patch`: RFC 6902 operations ([`PatchOp`]) and [`apply`];
//! - `offline`: one decision on a manifest, defaulted as the API server defaults it
//!   ([`review_manifest`], `topoalign webhook review`).
//!
//! At the edge: `tls` ([`Certificates`], re-read when the Secret's files change), `server`
//! (HTTPS on the probes kit: timeouts, connection cap, bounded shutdown, `/healthz`,
//! `/readyz`, `/metrics`) and `metrics`; `args` (feature `clap`) holds the command's flags.

#[cfg(feature = "clap")]
mod args;
mod config;
mod container;
mod error;
mod metrics;
mod mutate;
mod names;
mod networks;
mod offline;
mod patch;
mod pod;
mod record;
mod resource_name;
mod review;
mod server;
#[cfg(feature = "clap")]
mod table;
mod tls;

#[cfg(feature = "clap")]
pub use args::{ConfigArgs, NameArgs, ReviewArgs, WebhookArgs};
pub use config::read_names;
pub use container::{ContainerChange, ContainerKind};
pub use error::{ConfigError, NamesError, NotAReview, ServeError, TlsError};
pub use metrics::Metrics;
pub use mutate::{Decision, Outcome, WARNING_PREFIX, mutate_pod};
pub use names::{Names, Source, Targets};
pub use networks::NetworkFeeds;
pub use offline::{Offline, OfflineError, default_requests, review_manifest};
pub use patch::{PatchError, PatchOp, apply};
pub use record::{NetworksRecord, Record};
pub use review::{ADMISSION_V1, Answer, review};
pub use server::{App, MUTATE_PATH, ServeConfig, router, run, serve};
#[cfg(feature = "clap")]
pub use table::{decision_table, names_table};
pub use tls::{Certificates, Reread, TlsFiles, load as load_certificate};
