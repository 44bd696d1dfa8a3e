//! Why a claim landed where it did: the stock allocator's pick beside the planner's optimum
//! for one claim ([`explain`]), for a pod's claims on its node ([`explain_pod`]), for a
//! mixed-driver claim on a node simulated from its slices ([`explain_mixed`]), for every
//! allocated pod of a cluster ([`explain_all`]), and the CPUs shared with them; each in
//! words or as the tables `topoalign explain` prints; and `topoalign claims` as one call
//! (`claims_output`, the `clap` feature), the claim with its explanation.
//!
//! [`explain`]: crate::explain::explain
//! [`explain_pod`]: crate::explain::explain_pod
//! [`explain_mixed`]: crate::explain::explain_mixed
//! [`explain_all`]: crate::explain::explain_all

mod all;
mod claim;
mod claims;
#[cfg(feature = "clap")]
mod command;
mod cpus;
mod node;
mod pod;
mod tables;
mod text;

pub use all::{
    AlignmentSummary, ClusterAlignment, ClusterInput, PodAlignment, alignment_of_claims,
    explain_all,
};
pub use claim::{Explanation, explain, mark_usage, resolve_with};
pub use claims::{ClaimExtra, ClaimsOutput};
#[cfg(feature = "clap")]
pub use command::{ClaimReads, ClaimsError, ClaimsOptions, ReadFailure, claims_output};
pub use cpus::CpuShare;
pub use node::{ExplainError, SimulatedNode, explain_mixed, own_request};
pub use pod::{
    ClaimReport, Kind, PairReport, Pairs, PodExplanation, PodInput, claim_refs, explain_pod,
};
pub use tables::{agent_node_facts, parse_pod_key};
