//! Multi-node jobs (gangs) placed right by the engines that already place gangs: pure
//! functions, no I/O. A node's place in the fabric (its rails, its leaf, the domain label
//! keys) is `topoalign_fabric`'s; here it is used.
//!
//! - `job`: the job description (pods × pairs, class, rails, domain
//!   [`Level`](topoalign_fabric::Level)) and its checks, including a gang larger than
//!   every domain.
//! - `fleet`: a fleet as its nodes' labels ([`FleetNode`]), which size the domains.
//! - [`manifests`]: the job as objects to apply in one of four [`Dialect`]s, every pod's
//!   ResourceClaimTemplate pinning the job's rails (`claim`); the dialects are
//!   `kube`, `kueue`, `volcano` and `kai`.

mod claim;
mod error;
mod files;
mod fleet;
mod job;
mod kai;
mod kube;
mod kueue;
mod manifest;
mod manifest_parts;
mod volcano;

pub use claim::gang_claim_template;
pub use error::GangError;
pub use files::read_job;
pub use fleet::{FleetNode, parse_nodes};
pub use job::{DEFAULT_IMAGE, check_fits};
pub use job::{Job, Mode, fit_fleet, parse_job};
pub use manifest::{Dialect, Manifests, Summary, manifests, summary_table};
