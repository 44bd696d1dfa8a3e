//! topoalign's node agent for device-plugin clusters.
//!
//! Every interval it reads the kubelet's pod-resources API (`podresources`:
//! `GetAllocatableResources` and `List` over the unix socket), maps the devices in use
//! onto the node's topology (`report`), and publishes a NodeResourceTopology object
//! (`nrt`) plus debounced node labels (`labels`) by server-side apply (`publish`).
//! `--once` ([`run::once`]) prints what it would publish and exits. The node's place in
//! the fabric (its NVLink clique, the operator's domain file, each NIC's rail: read by
//! `topoalign_node_facts`, shared with the DRA driver) is read at start; the NICs'
//! neighbours are read again every `--rescan-interval` (`rescan`, by the follower both
//! node agents share), and a recabled NIC's
//! rail and the leaf derived from the neighbours follow without a restart. Domain labels
//! are written only where no other tool wrote the level, rails go into the
//! NodeResourceTopology object.

mod daemon;
mod labels;
mod metrics;
mod nrt;
mod podresources;
mod publish;
mod report;
mod rescan;
mod run;
pub use daemon::run_serving;
pub use metrics::{Component, Kind, Metrics};
pub use nrt::nrt_object;
/// The kubelet pod-resources gRPC API (generated from its proto), a namespace of its own:
/// the messages and the lister client and server.
pub use podresources::v1 as pod_resources_api;
pub use podresources::{Devices, KubeletView, PodDevices};
pub use report::build as build_report;
#[cfg(feature = "clap")]
pub use run::{AgentArgs, AgentArgsError, AgentProcess};
pub use run::{Config, once as run_once};
pub use topoalign_node_facts::{FactsError, NodeFacts};
