//! topoalign's kube-scheduler extender: send each GPU+NIC pod to the node that can align it.
//!
//! - [`protocol`]: the extender wire types, exactly as `k8s.io/kube-scheduler/extender/v1`
//!   serializes them;
//! - [`podreq`]: what a pod asks (devices, `topoalign.dev/min-pair-class`);
//! - [`state`]: the in-memory [`state::ClusterState`] (topology, Topology Manager
//!   settings, used devices, assumed allocations per node);
//! - [`decide`]: the pure filter/prioritize core over that state, with a verdict cache;
//! - [`score`]: plan → priority (achievable alignment minus fragmentation caused);
//! - [`nodeinfo`]: how API objects (NodeResourceTopology, node labels) become node data
//!   (the label, annotation and NRT names are `topoalign_kube_types::{labels, nrt}`);
//! - [`server`]: the axum HTTP server (on `topoalign_probes`' server kit), [`gate`]: the
//!   limits of the scheduler calls (bodies, calls in flight, work budget); [`watch`]: the kube-rs watchers that fill the state;
//!   [`runtime`]: the serving process (client, watchers, server, graceful shutdown);
//! - [`cache`]: the verdict cache; [`dra`]: the DRA path's judgement (slices and claims),
//!   [`dra_pairs`]: a node's pair devices, counters and pair capacity,
//!   [`dra_foreign`]: claims of other drivers (NVIDIA's GPU driver, dranet) judged on the
//!   stock allocator's choice and the devices' NUMA/PCI attributes,
//!   [`dra_state`]: the slices, claims, templates and classes it judges on (pods with
//!   ResourceClaims of known DeviceClasses take this path), [`dra_watch`]: their watchers;
//! - [`offline`] and [`synth`]: decisions on Node manifests, synthetic nodes.

#[cfg(feature = "clap")]
pub mod args;
pub mod cache;
pub mod decide;
pub mod dra;
pub mod dra_foreign;
pub mod dra_pairs;
pub mod dra_state;
pub mod dra_watch;
pub mod gate;
pub mod metrics;
pub mod nodeinfo;
pub mod offline;
pub mod podreq;
pub mod protocol;
pub mod runtime;
pub mod score;
pub mod server;
pub mod state;
pub mod synth;
pub mod watch;

pub use decide::{Decider, Decision, NeutralReason, RejectKind, Seen, Verdict};
pub use podreq::{PodRequest, pod_request};
pub use state::{ClusterState, NodeEntry, NodeInfo, NodeTopology, Source};
