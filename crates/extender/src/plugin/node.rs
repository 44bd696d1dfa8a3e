//! What the watchers know about one node: its topology (shared by the nodes that report
//! the same), Topology Manager settings, used devices and where the data came from; and
//! the allocations assumed for pods bound to it.

use std::collections::BTreeSet;
use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};
use std::sync::Arc;
use std::time::SystemTime;

use topoalign_kube_types::kubelet_settings::Settings;
use topoalign_plan::Request;
use topoalign_tm::Pod;
use topoalign_topology::{NodeUsage, Topology};

/// A topology shared by every node that reports it.
#[derive(Debug)]
pub struct NodeTopology {
    /// Where it came from: `profile:<name>` or `nrt:<hash>`.
    pub key: String,
    /// A hash of `key`, used in cache keys.
    pub id: u64,
    /// The model.
    pub topology: Topology,
}

impl NodeTopology {
    /// Wraps a topology under a source key.
    pub fn new(key: String, topology: Topology) -> Self {
        NodeTopology {
            id: hash_of(&key),
            key,
            topology,
        }
    }
}

/// Where a node's data came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Source {
    /// Node labels and annotations (`topoalign.dev/profile`, `topoalign.dev/used`):
    /// declared, never stale, used when neither NRT nor slices exist.
    Labels,
    /// The node agent's NodeResourceTopology object.
    Nrt,
}

impl Source {
    /// A short name for logs and metrics.
    pub fn as_str(self) -> &'static str {
        match self {
            Source::Labels => "labels",
            Source::Nrt => "nrt",
        }
    }
}

/// What the watchers know about one node.
#[derive(Debug, Clone)]
pub struct NodeInfo {
    /// Its topology.
    pub topology: Arc<NodeTopology>,
    /// The kubelet Topology Manager settings (policy, scope, options).
    pub settings: Arc<Settings>,
    /// Devices in use as reported.
    pub used: NodeUsage,
    /// Where the data came from.
    pub source: Source,
    /// When the agent last reported (`None`: declared data that cannot go stale).
    pub reported_at: Option<SystemTime>,
    /// Pods (`namespace/name`) the report already accounts for.
    pub reported_pods: BTreeSet<String>,
}

/// A node as the decisions see it.
#[derive(Debug, Clone)]
pub enum NodeEntry {
    /// Usable data.
    Known(NodeInfo),
    /// Data exists but cannot be used (malformed, unknown profile …): the reason.
    Broken(String),
}

/// An allocation assumed for a pod bound to a node but not yet in the node's report.
#[derive(Debug, Clone)]
pub(crate) struct Assumed {
    /// The node it is bound to.
    pub node: String,
    /// What it asks for.
    pub request: Request,
    /// The pod as the kubelet's resource managers see it: with it the assumed devices
    /// are the ones the kubelet's Topology Manager and device manager would give (the
    /// `tm` simulation); without it, the planner's choice.
    pub pod: Option<Pod>,
    /// When the binding was first seen.
    pub bound_at: SystemTime,
}

/// A stable 64-bit hash of a string.
pub(crate) fn hash_of(s: &str) -> u64 {
    let mut h = DefaultHasher::new();
    s.hash(&mut h);
    h.finish()
}
