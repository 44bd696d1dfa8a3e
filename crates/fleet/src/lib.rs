//! Fleet simulation: a seeded stream of pods placed under blind, Topology Manager, DRA
//! first-fit and topoalign policies.
//!
//! A fleet of nodes (one or more profiles) receives pod arrivals (Poisson) with
//! exponential lifetimes and a mix of 1+1, 2+2, 4+4, 8+8 GPU+NIC requests
//! (`workload`). The same stream runs under every [`Policy`], each on its own copy of
//! the fleet (`engine`): nodes are tried in a fixed order (topoalign takes the node
//! whose plan scores best, the scheduler-extender role), pods that fit nowhere wait in a
//! FIFO queue with a patience limit. Per policy the `metrics` count GPU↔NIC pairs by
//! class (each GPU with its best NIC of the pod, as NCCL pairs them), GPUDirect RDMA,
//! placed / rejected / timed-out / pending pods and GPU utilisation over time.
//!
//! On each node, `blind` and `tm-restricted` are decided by the kubelet model of
//! `topoalign_tm` (`kubelet`), `topoalign` by the planner of `topoalign_plan` (one per
//! node type), `dra-first-fit` by the one model of the DRA structured-parameters
//! allocator, `topoalign_dra::alloc::first_fit` (first full solution in pool/slice/device order,
//! backtracking, no scoring), on the node's devices as `dra` publishes them; `svg`
//! draws the report with `topoalign_render::chart`. Every random choice comes from
//! [`topoalign_rng::Rng`] (PCG-64) seeded by the user: same seed, same numbers.
//!
//! `gangs` (`simulate --gangs`) places multi-node gangs on NVLink racks and
//! rail-optimized leaves as topology-aware workload scheduling does, under `stock` (labels
//! and counts, first-fit devices) and `topoalign` (GDR pairs on one pinned rail set), per
//! pod through the same allocator model (`gang_node`), reported by `gang_report`.

#[cfg(feature = "clap")]
mod args;
mod demo;
mod dra;
mod engine;
mod error;
mod gang_node;
mod gang_report;
mod gang_spec;
mod gangs;
mod kubelet;
mod metrics;
mod mig_report;
mod mig_sim;
#[cfg(test)]
mod mig_sim_oracle_tests;
#[cfg(test)]
mod mig_sim_tests;
mod mig_spec;
mod node;
mod options;
mod placers;
mod policy;
mod svg;
#[cfg(test)]
mod testing;
mod text;
mod workload;

#[cfg(feature = "clap")]
pub use args::SimArgs;
pub use demo::{DemoOptions, story};
pub use dra::MatchOn;
pub use engine::{NodeGroup, SimConfig, SimReport, simulate, simulate_with_progress};
pub use error::FleetError;
pub use gang_node::RailRule;
pub use gang_report::{GangPolicy, GangPolicyReport, GangReport};
pub use gang_spec::{DomainLevel, DomainMode, GangConfig, GangSpec};
pub use gangs::simulate_gangs;
pub use metrics::{PolicyReport, SizeStats, UtilSample};
pub use mig_sim::simulate_mig;
pub use mig_spec::{MigPlacer, MigSimSpec, default_mix};
pub use node::{Assignment, NodeModel, NodeState, PairCounts};
pub use options::{SimOptions, parse_fleet};
pub use placers::{Attempt, NodeKind, PlaceOptions};
pub use policy::Policy;
pub use svg::report_svg;
pub use workload::{Mix, PodArrival, StreamLength, WorkloadSpec};
