//! What a MIG run (`simulate --mig`) is asked ([`MigSimSpec`], its limits and the default
//! profile mix) and the two device orders it compares ([`MigPlacer`]). Read by the
//! simulation (`crate::mig_sim`), its report (`crate::mig_report`) and the flags.

use serde::Serialize;
use topoalign_mig::{Mix, Model, Shape};

use crate::error::FleetError;

/// At most this many nodes.
pub(crate) const MAX_NODES: usize = 100_000;
/// At most this many GPUs per node.
pub(crate) const MAX_GPUS: usize = 64;
/// At most this many pods in the stream.
pub(crate) const MAX_PODS: usize = 10_000_000;
/// Shortest and longest pod lifetime, in steps.
pub(crate) const LIFETIME: (u32, u32) = (1, 9);
/// Instances per pod: 1, 2 or 3, with these weights.
pub(crate) const COUNT_WEIGHTS: [u32; 3] = [60, 25, 15];

/// The default profile weights: `1g`-heavy, some `2g`, `3g`, `4g` and `7g`.
pub fn default_mix() -> Mix {
    let mut mix = Mix::default();
    mix[Shape::One] = 50;
    mix[Shape::Two] = 20;
    mix[Shape::Three] = 12;
    mix[Shape::Four] = 10;
    mix[Shape::Seven] = 8;
    mix
}

/// What to simulate.
#[derive(Debug, Clone)]
pub struct MigSimSpec {
    /// The GPU model of every GPU.
    pub model: &'static Model,
    /// Nodes in the fleet.
    pub nodes: usize,
    /// GPUs per node.
    pub gpus: usize,
    /// Pods in the stream.
    pub pods: usize,
    /// Seed of the stream.
    pub seed: u64,
    /// Profile weights of the instances pods ask for.
    pub mix: Mix,
    /// Offered load: memory slices asked per step × mean lifetime, as a share of the
    /// fleet's usable slices (7 per GPU).
    pub load: f64,
}

impl MigSimSpec {
    /// Checks every parameter; the error names the flag.
    pub fn check(&self) -> Result<(), FleetError> {
        if self.nodes == 0 || self.nodes > MAX_NODES {
            return Err(FleetError::invalid(
                "--nodes",
                self.nodes,
                format!("1 to {MAX_NODES} nodes"),
            ));
        }
        if self.gpus == 0 || self.gpus > MAX_GPUS {
            return Err(FleetError::invalid(
                "--gpus",
                self.gpus,
                format!("1 to {MAX_GPUS} GPUs per node"),
            ));
        }
        if self.pods == 0 || self.pods > MAX_PODS {
            return Err(FleetError::invalid(
                "--pods",
                self.pods,
                format!("1 to {MAX_PODS} pods"),
            ));
        }
        if !(self.load.is_finite() && self.load > 0.0 && self.load <= 10.0) {
            return Err(FleetError::invalid(
                "--load",
                self.load,
                "a share above 0 and at most 10",
            ));
        }
        if self.mix.is_empty() {
            return Err(FleetError::invalid(
                "--mig-mix",
                "",
                "at least one profile with a positive weight",
            ));
        }
        Ok(())
    }
}

/// How the node's devices are ordered for first fit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum MigPlacer {
    /// The NVIDIA DRA driver's order: GPU by GPU, starts ascending.
    Stock,
    /// topoalign's order: GPU by GPU, starts that keep big profiles reachable first.
    Topoalign,
}

impl MigPlacer {
    /// Both, in report order.
    pub const ALL: [MigPlacer; 2] = [MigPlacer::Stock, MigPlacer::Topoalign];

    /// The name in reports.
    pub fn as_str(self) -> &'static str {
        match self {
            MigPlacer::Stock => "stock",
            MigPlacer::Topoalign => "topoalign",
        }
    }

    /// The starts of `shape` on one GPU, in the order its devices are published.
    pub fn starts(self, shape: Shape) -> &'static [u8] {
        match self {
            MigPlacer::Stock => shape.starts(),
            MigPlacer::Topoalign => topoalign_mig::packing_starts(shape),
        }
    }
}
