//! Topology hints, mirroring `topologymanager.TopologyHint` (topology_manager.go).

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};

use crate::bitmask::NumaMask;

/// One hint: a NUMA affinity (`None` = the kubelet's nil mask, "don't care") and whether
/// the provider prefers it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TopologyHint {
    /// `NUMANodeAffinity`; `None` is nil.
    pub affinity: Option<NumaMask>,
    /// `Preferred`.
    pub preferred: bool,
}

impl TopologyHint {
    /// A hint with a mask.
    pub fn new(mask: NumaMask, preferred: bool) -> Self {
        TopologyHint {
            affinity: Some(mask),
            preferred,
        }
    }

    /// A hint with a nil mask.
    pub fn any(preferred: bool) -> Self {
        TopologyHint {
            affinity: None,
            preferred,
        }
    }
    /// Marks preferred the hints whose mask has `size` NUMA nodes: the device manager's
    /// rule, where `size` is the fewest nodes that could ever hold the request
    /// (`minAffinitySize`).
    pub(crate) fn prefer_size(hints: &mut [TopologyHint], size: u32) {
        for h in hints {
            if h.affinity.map(NumaMask::count) == Some(size) {
                h.preferred = true;
            }
        }
    }
}

impl fmt::Display for TopologyHint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let p = if self.preferred { "T" } else { "F" };
        match self.affinity {
            Some(m) => write!(f, "{m}{p}"),
            None => write!(f, "nil{p}"),
        }
    }
}

/// What one hint provider answers for one container or pod: resource name → hints,
/// where `None` is a nil list (don't care) and `Some(vec![])` an empty one (impossible).
/// An empty map is "no resources" (`[{nil, true}]` after filtering).
///
/// The kubelet uses a Go map, iterated in random order; a `BTreeMap` iterates by name.
/// The merge's result does not depend on that order (see `merge` module docs).
pub type ProviderHints = BTreeMap<String, Option<Vec<TopologyHint>>>;
