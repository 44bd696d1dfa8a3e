//! A node's place in the fabric, as pure functions (no I/O): which rail each NIC is on,
//! which leaf the node hangs off, and the node labels that name its NVLink domain, leaf,
//! spine and core. The node agents (`topoalign agent`, `topoalign driver`) read the
//! inputs and apply the answers; the gang model builds jobs on the domain levels.
//!
//! - `rail_file`: the operator's rail file ([`parse_rail_source`]): an operator map, the
//!   rule "the NIC nearest GPU i is rail i", or rules over what each NIC is cabled to;
//!   checked as far as the file alone allows.
//! - `nic_rails`: the rail file resolved on a node's
//!   [`Topology`](topoalign_topology::Topology) ([`nic_rails`], [`nic_rails_with`] with
//!   the NICs' neighbours), through `neighbour_rules` (`switch`, `ib-subnet`) and
//!   `neighbour_switch` (the switch a NIC is cabled to, [`neighbour_switch`]).
//! - `leaf`: the node's leaf (tier-0) label value from its NICs' neighbours: one switch,
//!   or the set of rail leaves (the scalable unit) ([`derive_leaf`]).
//! - `domain_keys`: the node label keys that name NVLink domains, leaves, spines and cores
//!   (Topograph v1 and older, GPU Feature Discovery), by domain [`Level`].
//! - `domain_labels`: the operator's domain file ([`parse_domain_file`]) and a node's
//!   domain labels where nobody wrote them ([`domain_labels_with`]).
//! - `rails_report`: what `topoalign rails` reports for a node ([`RailsReport`]).
//! - `document`: the files above (and the gang crate's job descriptions) read as YAML or
//!   JSON with the path of the first bad field ([`parse_document`]).

mod document;
mod domain_keys;
mod domain_labels;
mod error;
mod leaf;
mod neighbour_rules;
mod neighbour_switch;
mod nic_rails;
mod rail_file;
mod rails_report;

pub use document::{DocumentError, field_path, parse_document};
pub use domain_keys::{KeyError, Level, LevelError};
pub use domain_labels::{DerivedLabel, DomainFile, DomainInputs, DomainLabels};
pub use domain_labels::{domain_labels, domain_labels_with, parse_domain_file};
pub use error::FabricError;
pub use leaf::{LeafDecision, derive_leaf};
pub use neighbour_switch::{SwitchUnknown, neighbour_switch};
pub use nic_rails::{NicRails, nic_rails, nic_rails_with};
pub use rail_file::{NicKey, RailKind, RailSource, parse_rail_source};
pub use rails_report::{NicRow, RailsReport};
