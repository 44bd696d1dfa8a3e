//! The device-plugin wing: pods asking `amd.com/gpu`/`nvidia.com/gpu` and NICs through
//! device plugins, judged on each node's NodeResourceTopology or labels by predicting
//! what its kubelet's Topology Manager would admit and allocate.
//!
//! One-way dependencies: [`state`] is data; [`decide`] is the pure judgement over it;
//! [`cache`] memoises verdicts; [`decider`] puts judgement and cache together for calls.
//!
//! - [`podreq`]: what a pod asks (devices, `topoalign.dev/min-pair-class`);
//! - [`state`]: the in-memory [`state::ClusterState`] (topology, Topology Manager
//!   settings, used devices, assumed allocations per node);
//! - [`nodeinfo`]: how API objects (NodeResourceTopology, node labels) become node data
//!   (the label, annotation and NRT names are `topoalign_kube_types::{labels, nrt}`);
//! - [`synth`]: synthetic labelled nodes;
//! - [`watch`]: the kube-rs watchers that fill the state, through a [`watch::NodeFeed`].

pub(crate) mod cache;
pub(crate) mod decide;
pub(crate) mod decider;
pub(crate) mod effective;
pub(crate) mod keys;
pub(crate) mod node;
pub(crate) mod nodeinfo;
pub(crate) mod podreq;
pub(crate) mod state;
pub(crate) mod synth;
pub(crate) mod watch;
