//! MIG geometry for NVIDIA GPUs: the profile table of each model, the placement rules,
//! and a planner that turns a request mix into explicit per-GPU placements.
//!
//! Pure: no I/O. Facts from `../shared/REFERENCE.md` §11 (8 memory slices, 7 SM slices,
//! the start slots and GI profile IDs of each profile shape, the profile names of each
//! model).
//!
//! - `model`: [`Shape`]s and [`Model`]s ([`lookup`]).
//! - `geometry`: [`validate`] a GPU's instances by the rules.
//! - `mix`: a [`Mix`] of instances and the `PROFILE=COUNT,…` form ([`parse_mix`]).
//! - `capacity`: whether a mix fits on N GPUs, exactly, in constant time.
//! - `configs`: every valid single-GPU layout and the planner's menu.
//! - `planner`: [`plan`] a request (one node or a fleet).
//! - `pods`: the pod form, each pod's mix on one node ([`plan_pods`]).
//! - `device_plugin`: a node's MIG devices from GFD labels and allocatable resources,
//!   a pod's MIG set, whether it fits now or ever ([`NodeMig`]).
//! - `export`: `nvidia-smi mig` commands and mig-parted configs; `table`: a plan as
//!   `topoalign mig plan` prints it ([`GeometryPlan::table`]); `args`: that command's
//!   flags (the `clap` feature).
//! - `nrt_source`: a node's MIG state from its Node and its NodeResourceTopology
//!   ([`node_mig_with_nrt`]).
//! - `read_state`: a host's MIG state from saved `nvidia-smi` output (`read_list`,
//!   `read_lgi`, `read_lci`, `read_lgipp`; errors in `read_table`).
//! - `read_create`: what `nvidia-smi mig -cgi ID:START -C` created ([`read_created`]) and
//!   one GPU's MIG UUIDs in `-L` (dynamic MIG's readback).
//! - `synth`: a MIG state without hardware, from placements or a plan.
//! - `clique`: the node's NVLink clique from `nvidia-smi -q` ([`node_clique`]), the
//!   value GPU feature discovery labels `nvidia.com/gpu.clique`.
//! - `order`: topoalign's dynamic-MIG device order ([`packing_starts`]), shared by the
//!   DRA driver and `simulate --mig`.

#[cfg(feature = "clap")]
mod args;
mod capacity;
mod clique;
mod configs;
mod device_plugin;
mod export;
mod geometry;
mod mix;
mod model;
mod nrt_source;
mod order;
mod planner;
mod pods;
mod read_create;
mod read_lci;
mod read_lgi;
mod read_lgipp;
mod read_list;
mod read_query;
mod read_state;
mod read_table;
mod synth;
mod table;

#[cfg(test)]
mod brute;
#[cfg(test)]
mod exhaustive;
#[cfg(test)]
mod read_state_tests;

#[cfg(feature = "clap")]
pub use args::{MigFormat, PlanArgs, PlanArgsError};
pub use clique::{NodeClique, node_clique};
pub use device_plugin::{
    DevicePluginError, Ever, MigRequest, NodeMig, Strategy, profile_of_resource,
};
pub use export::{mig_parted, node_groups, nvidia_smi_commands, ranges};
pub use geometry::{GeometryError, Placement, validate, validate_shapes};
pub use mix::{Mix, MixError, ProfileCounts, parse_mix};
pub use model::{MEMORY_SLICES, SHAPES, SM_SLICES, known_models};
pub use model::{MODELS, Model, ModelError, Shape, lookup};
pub use nrt_source::{NrtAmount, node_mig_with_nrt, nrt_mig_counts};
pub use order::{DYNAMIC_SHAPES, dynamic_placements, packing_starts};
pub use planner::{GeometryPlan, GeometryPlanError, GeometryRequest, GpuPlan, PodPlacement, plan};
pub use pods::{Pod, PodError, PodsFile, plan_pods, resolve_pods};
pub use read_create::{CreatedInstance, created_gpu_instance, listed_mig_uuids, read_created};
pub use read_list::MigDevice;
pub use read_query::{MigMode, QueryGpu, read_query};
pub use read_state::{
    ComputeInstance, GpuInstance, MigGpu, MigOutputs, MigState, model_for_name, read_state,
};
pub use read_table::{ReadError, SavedOutput};
pub use synth::{state_from_placements, state_from_plan};
