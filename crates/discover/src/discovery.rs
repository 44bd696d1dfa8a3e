//! The result of discovering a topology, whatever the source.

use topoalign_topology::Topology;

/// A discovered topology and what was odd on the way.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Discovery {
    /// The topology.
    pub topology: Topology,
    /// Things that were missing or odd and were worked around (never fatal).
    pub warnings: Vec<String>,
}

impl Discovery {
    /// A discovery with no warnings.
    pub fn clean(topology: Topology) -> Self {
        Discovery {
            topology,
            warnings: Vec::new(),
        }
    }
}
