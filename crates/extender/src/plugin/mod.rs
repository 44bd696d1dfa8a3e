//! The device-plugin wing: pods asking `amd.com/gpu`/`nvidia.com/gpu` and NICs through
//! device plugins, judged on each node's NodeResourceTopology or labels by predicting
//! what its kubelet's Topology Manager would admit and allocate.
//!
//! The same file roles as the DRA wing (`state`, `watch`, `judge`, `shared`): [`node`] →
//! [`effective`] → [`state`] are data; [`judge`] is the pure judgement over it; [`cache`]
//! memoises verdicts; [`shared`] puts judgement and cache together for the calls. No two
//! modules import each other.
//!
//! - [`podreq`]: what a pod asks (devices, `topoalign.dev/min-pair-class`);
//! - [`node`]: what the watchers know about one node, and assumed allocations;
//! - [`effective`]: a node with its assumed allocations applied, and its state key;
//! - [`state`]: the in-memory [`state::ClusterState`] (topology, Topology Manager
//!   settings, used devices, assumed allocations per node);
//! - [`keys`]: maps keyed by 64-bit hashes;
//! - [`judge`]: one pod judged on one node (Topology Manager prediction, planner);
//! - [`cache`]: the verdict cache; [`shared`]: the decisions for calls;
//! - [`nodeinfo`]: how API objects (NodeResourceTopology, node labels) become node data
//!   (the label, annotation and NRT names are `topoalign_kube_types::{labels, nrt}`);
//! - [`synth`]: synthetic labelled nodes;
//! - [`watch`]: the kube-rs watchers that fill the state through a narrow
//!   [`watch::NodeFeed`] (no server, no metrics: a refresh callback).

pub(crate) mod cache;
pub(crate) mod effective;
pub(crate) mod judge;
pub(crate) mod keys;
pub(crate) mod node;
pub(crate) mod nodeinfo;
pub(crate) mod podreq;
pub(crate) mod shared;
pub(crate) mod state;
pub(crate) mod synth;
pub(crate) mod watch;
