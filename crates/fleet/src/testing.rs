//! Helpers shared by the unit tests.

use std::sync::Arc;

use topoalign_topology::Topology;

use crate::node::NodeModel;
use crate::workload::PodArrival;

/// A built-in profile.
pub(crate) fn topology(name: &str) -> Arc<Topology> {
    Arc::new(topoalign_profiles::get(name).unwrap())
}

/// The node model of a built-in profile.
pub(crate) fn model(name: &str) -> NodeModel {
    NodeModel::new(topology(name)).unwrap()
}

/// A pod of `gpus` GPUs, as many NICs and 8 CPUs per GPU.
pub(crate) fn pod(gpus: u32) -> PodArrival {
    PodArrival::sized(gpus, 8)
}
