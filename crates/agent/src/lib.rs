//! topoalign's node agent for device-plugin clusters.
//!
//! Every interval it reads the kubelet's pod-resources API ([`podresources`]:
//! `GetAllocatableResources` and `List` over the unix socket), maps the devices in use
//! onto the node's topology ([`report`]), and publishes a NodeResourceTopology object
//! ([`nrt`]) plus debounced node labels ([`labels`]) by server-side apply ([`publish`]).
//! `--once` ([`run::once`]) prints what it would publish and exits.

pub mod labels;
pub mod metrics;
pub mod nrt;
pub mod podresources;
pub mod publish;
pub mod report;
pub mod run;
