//! Multi-node jobs (gangs) placed right by the engines that already place gangs: pure
//! functions, no I/O.
//!
//! - `rails`: each NIC's rail from a rail source the operator states (an operator map
//!   or the rule "the NIC nearest GPU i is rail i"), checked against the node's
//!   [`Topology`](topoalign_topology::Topology); the DRA driver publishes the result as
//!   the `rail` attribute ([`topoalign_dra::attr::RAIL`]).
//! - `labels`: the node label keys that name NVLink domains, leaves, spines and cores
//!   (Topograph v1 and older, GPU Feature Discovery), and the lookup by precedence.
//! - `job`: the job description (pods × pairs, class, rails, domain level) and its checks,
//!   including a gang larger than every domain.
//! - `node_domains`: a node's domain labels where nobody wrote them (the clique the GPUs
//!   report, an operator's domain file, a derived leaf), for the node agent and the
//!   driver to apply.
//! - `leaf`: the node's leaf (tier-0) label value from its NICs' neighbours: one switch,
//!   or the set of rail leaves (the scalable unit).
//! - `rail_rules`: the rail rules that read each NIC's neighbour (`switch`, `ib-subnet`).
//! - [`manifests`]: the job as objects to apply in one of four [`Dialect`]s, every pod's
//!   ResourceClaimTemplate pinning the job's rails (`claim`); the dialects are
//!   `kube`, `kueue`, `volcano` and `kai`.

mod claim;
mod error;
mod fleet;
mod input;
mod job;
mod kai;
mod kube;
mod kueue;
mod labels;
mod leaf;
mod manifest;
mod manifest_parts;
mod node_domains;
mod rail_rules;
mod rails;
mod volcano;

pub use claim::gang_claim_template;
pub use error::GangError;
pub use fleet::{NodeLabels, parse_nodes};
pub use job::{DEFAULT_IMAGE, check_fits};
pub use job::{Job, Mode, fit_fleet, parse_job};
pub use labels::{KeyError, Level};
pub use leaf::{LeafDecision, derive_leaf};
pub use manifest::{Dialect, Manifests, Summary, manifests, summary_table};
pub use node_domains::{DerivedLabel, domain_labels_with};
pub use node_domains::{DomainFile, DomainInputs, DomainLabels, domain_labels, parse_domain_file};
pub use rail_rules::neighbour_switch;
pub use rails::{NicKey, RailKind};
pub use rails::{NicRails, RailSource, nic_rails, nic_rails_with, parse_rail_source};
