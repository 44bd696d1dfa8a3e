//! What the driver runs with, read once at start (`DriverArgs::start`, the `clap`
//! feature): its configuration, the node as discovered, and the node's facts (the rails
//! of `--rails` resolved on the NICs' neighbours, the leaf, the clique and the
//! operator's labels) with how they are followed. Bad input (unknown profile,
//! unreadable sysfs, a rail file that does not fit, an invalid node name) fails here,
//! before any connection is made.

use std::net::SocketAddr;
use std::time::Duration;

use topoalign_discover::Source;
use topoalign_dra::publish::{Inventory, PublishOptions};
use topoalign_kubelet_plugin::{FaultPoint, PluginConfig};
use topoalign_node_facts::{Follower, NodeFacts};
use topoalign_topology::Topology;

/// Everything `topoalign driver` was told.
#[derive(Debug, Clone)]
pub struct DriverConfig {
    /// This node's name (`spec.nodeName` and pool name).
    pub node_name: String,
    /// Where the topology is read from, at start and on every rescan.
    pub source: Source,
    /// Which devices are published (the node's MIG layout among them).
    pub options: PublishOptions,
    /// Whether the node's domain labels are written (`--write-domain-labels`).
    pub write_domain_labels: bool,
    /// How often the node is rediscovered and the published pool checked.
    pub rescan_interval: Duration,
    /// How long shutdown keeps trying to delete this node's slices.
    pub removal_timeout: Duration,
    /// The kubelet plugin's sockets and directories; `None` runs the slice controller
    /// only.
    pub plugin: Option<PluginConfig>,
    /// Where `/healthz`, `/readyz` and `/metrics` are served.
    pub listen: SocketAddr,
    /// Fault testing: abort the process when the kubelet plugin reaches this write step
    /// (the e2e suite's "driver killed mid-prepare"). `None` in production.
    pub crash_at: Option<FaultPoint>,
}

/// The driver as read at start: its configuration, the node's topology and facts, and
/// how the facts are followed.
#[derive(Debug, Clone)]
pub struct Start {
    /// The configuration.
    pub config: DriverConfig,
    /// The node's topology.
    pub topology: Topology,
    /// The node's facts: each NIC's rail and its neighbours, the leaf, and with
    /// `--write-domain-labels` the clique and the operator's labels.
    pub facts: NodeFacts,
    /// Where the neighbours are read again, and the rail source resolved again.
    pub follower: Follower,
    /// What the caller should say on stderr (a MIG mode change waiting for a reset, an
    /// instance without its `/dev/nvidia-caps` nodes).
    pub warnings: Vec<String>,
}

impl Start {
    /// The inventory the node publishes first (the slice controller's and the kubelet
    /// plugin's), each NIC on its rail.
    pub fn inventory(&self) -> Inventory {
        crate::inventory::inventory(
            &self.topology,
            &self.config.options,
            self.facts.rails.as_ref(),
        )
    }

    /// Checks that the node's slices can be built (the node name, the API limits), as
    /// every publishing round builds them; how many there are.
    #[cfg(feature = "clap")]
    pub(crate) fn check(&self) -> Result<usize, crate::error::DriverError> {
        let slices = topoalign_dra::publish::slices_for(
            &self.inventory(),
            &self.config.node_name,
            self.config.options.generation,
        )?;
        Ok(slices.len())
    }
}
