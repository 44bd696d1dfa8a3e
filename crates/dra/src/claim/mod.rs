//! What a pod asks for: ResourceClaims and templates topoalign writes ("N GPUs, each with
//! its own NIC", CPUs of the same NUMA node, MIG instances, mixed vendor drivers, ladders
//! of `firstAvailable` rungs), the clap flags that describe them, their printed forms, and
//! the ladder report of which rung each node can hold.

#[cfg(feature = "clap")]
mod args;
pub(crate) mod cpus;
mod ladder;
mod ladder_report;
mod mig;
mod mixed;
pub(crate) mod spec;
mod text;

#[cfg(feature = "clap")]
pub use args::{ClaimArgs, MaxClassError};
pub use cpus::{
    CPU_CAPACITY, CPU_CLASS, CPU_DRIVER, CpuClaim, CpuMode, CpuRelease, CpuShape, cpu_device_class,
    cpu_slices, pairs_fit_one_numa_node,
};
pub use ladder::{LadderSpec, Rung, ladder_claim};
pub use ladder_report::{
    LadderInput, LadderPair, NodeLadder, held_devices, held_shares, ladder_nodes, ladder_report,
    ladder_reports,
};
pub use mig::{MigClaimSpec, mig_claim_spec};
pub use mixed::{MixedClaim, MixedSpec, MixedStrategy, mixed_claim, stand_in_classes};
pub use spec::{ClaimShape, ClaimSpec, claim_spec, claim_template, resource_claim};
pub use text::{claim_object, claim_table};
