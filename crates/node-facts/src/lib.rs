//! A node's place in the fabric, as a node agent reads it at start, and the domain labels
//! it writes on its own Node. The one home of this I/O for both edge processes that label
//! nodes: the device-plugin agent (`topoalign agent`) and the DRA driver
//! (`topoalign driver --write-domain-labels`); neither imports the other.
//!
//! * `facts`: the NVLink clique from `nvidia-smi -q`, run or saved (`--fabric-from`),
//!   the NICs' neighbours (`--lldp-from`, `--ib-sysfs`, `--ibnetdiscover`) and the leaf
//!   derived from them, the operator's domain file (`--domains`) and each NIC's rail
//!   (`--rails`), read with errors that name the flag, the file and the field
//!   ([`read_facts`]); [`NodeFacts::labels`] turns them into the labels to write through
//!   the pure rule [`topoalign_fabric::domain_labels_with`].
//! * `mig_source`: the node's MIG instances ([`MigSource`]): saved `nvidia-smi` output,
//!   the live tool (`mig_live`), a planned mix, dynamic MIG on the GPUs in MIG mode
//!   (`mig_modes`, which also warns of pending mode changes), or a built-in profile's
//!   geometry; joined to the topology, with each instance's `/dev/nvidia-caps` nodes
//!   ([`attach_caps`]); `mig_view`: the flags that pick one for the commands that draw
//!   a topology, and the overlay they draw ([`MigViewFlags`]).
//! * `follow`: what both agents follow after start ([`Follower`]): the NICs' neighbours
//!   read again and the rails resolved again on them, one policy.
//! * `node`: the node's labels now and the keys a field manager owns (from
//!   `managedFields`), and the server-side apply of a manager's labels.

mod facts;
mod follow;
mod mig_live;
mod mig_modes;
mod mig_source;
mod mig_view;
mod node;

pub use facts::{
    FactSources, FactsError, NodeFacts, RUN_LLDPCTL, RUN_TOOL, Wiring, WiringFlags, read_clique,
    read_domains, read_facts, read_rail_source, read_rails, read_wiring, resolve_rails,
};
pub use follow::{Follower, REREAD_COMPONENT, Reread};
pub use mig_live::LiveError;
pub use mig_modes::{ModeError, ModeSource};
pub use mig_source::{MigSource, MigSourceError, attach_caps};
pub use mig_view::MigViewFlags;
pub use node::{ManagedLabels, apply_labels, label_patch, owned_labels, read_node_labels};
