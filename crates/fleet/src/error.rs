//! Errors of the fleet simulator: every one names the parameter and what was expected.

use thiserror::Error;

/// A simulation parameter that cannot be used.
#[derive(Debug, Error)]
pub enum FleetError {
    /// A parameter outside its domain (`--nodes 0`, a negative rate, ...).
    #[error("invalid {param} `{value}`: {expected}")]
    InvalidParam {
        /// The parameter's name as the user typed it (`--nodes`).
        param: &'static str,
        /// The offending value.
        value: String,
        /// What would have been accepted.
        expected: String,
    },
    /// A profile name that is not a built-in profile.
    #[error("unknown profile `{name}`: expected one of {known}")]
    UnknownProfile {
        /// The name given.
        name: String,
        /// The known names.
        known: String,
    },
    /// A policy name that is not one of the four.
    #[error("unknown policy `{0}`: expected one of blind, tm-restricted, dra-first-fit, topoalign")]
    UnknownPolicy(String),
    /// A fleet with no node, or a node type without a GPU or a usable NIC.
    #[error("node type `{profile}` cannot host pods: {reason}")]
    UnusableNode {
        /// The profile/topology name.
        profile: String,
        /// Why.
        reason: String,
    },
    /// The kubelet model refused its input (a bug in how the fleet drives it).
    #[error("kubelet model: {0}")]
    Kubelet(String),
    /// The planner refused its input (a bug in how the fleet drives it).
    #[error("planner: {0}")]
    Planner(String),
    /// The DRA model refused the slices or a claim the `dra-first-fit` policy wrote (a
    /// claim of more devices than the allocator hands out, or a bug in how the fleet
    /// drives it).
    #[error("DRA allocator model: {0}")]
    Dra(#[from] topoalign_dra::DraError),
    /// The gang model refused the gang (`simulate --gangs`): a gang larger than every
    /// domain.
    #[error(transparent)]
    Gang(#[from] topoalign_gang::GangError),
    /// A node type's rails do not resolve (`simulate --gangs`): a rail source that does
    /// not fit it.
    #[error(transparent)]
    Rails(#[from] topoalign_fabric::FabricError),
    /// `--mig-model` names no GPU model with a MIG profile table (`simulate --mig`).
    #[error("--mig-model: {0}")]
    MigModel(#[from] topoalign_mig::ModelError),
    /// `--mig-mix` is not `PROFILE=WEIGHT,…` with the model's profiles.
    #[error("--mig-mix: {0}")]
    MigMix(#[from] topoalign_mig::MixError),
}

impl FleetError {
    /// Shorthand for [`FleetError::InvalidParam`].
    pub fn invalid(param: &'static str, value: impl ToString, expected: impl ToString) -> Self {
        FleetError::InvalidParam {
            param,
            value: value.to_string(),
            expected: expected.to_string(),
        }
    }
}
