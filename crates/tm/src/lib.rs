//! An exact simulator of the kubelet Topology Manager (hint providers, merge, policies,
//! scopes) and the device manager's allocation.
//!
//! Each module names the kubelet file and function it mirrors:
//! - `bitmask` mirrors `topologymanager/bitmask/bitmask.go`;
//! - `numa_info` mirrors `topologymanager/numa_info.go` (`Closest`, `Narrowest`);
//! - `merge` mirrors `topologymanager/policy.go` (`filterProvidersHints`, `mergePermutation`,
//!   `HintMerger`, `iterateAllProviderTopologyHints`);
//! - `policy` mirrors `policy_*.go` and `NewManager` (the settings' values are
//!   [`topoalign_kube_types::kubelet_settings`]);
//! - `providers` mirrors `devicemanager/topology_hints.go`, `cpumanager/policy_static.go`,
//!   `memorymanager/policy_static.go`;
//! - `admission` is the kubelet's admission of a pod on an empty node, as the lint asks
//!   for it;
//! - `allocate` mirrors `devicemanager/manager.go` (`devicesToAllocate`, `filterByAffinity`);
//! - [`simulate`] mirrors `scope_container.go`, `scope_pod.go`, `scope_none.go`;
//! - `merge_cases` evaluates JSON-lines merge cases for the differential test against
//!   the kubelet's Go code;
//! - [`LeanPod`] is the admission without its explanation, for callers judging one pod
//!   on many node states (equal to the full one's [`Brief`]);
//! - `matrix` mirrors seed 000's policy table, computed by simulation.

mod addresses;
mod admission;
mod allocate;
#[cfg(feature = "clap")]
mod args;
mod bitmask;
mod case;
mod error;
mod hint;
#[cfg(any(feature = "clap", test))]
mod input_files;
/// Why a `--case`, `--pod` or `--usage` file of `TmArgs` does not read.
#[cfg(any(feature = "clap", test))]
pub use input_files::InputFileError;
mod lean;
mod matrix;
mod matrix_run;
mod merge;
mod merge_cases;
mod node;
mod numa_info;
mod outcome;
mod pod;
mod policy;
mod prepared;
mod providers;
mod request;
mod resources;
mod simulate;
mod text;

pub use admission::admit_on_empty_node;
#[cfg(feature = "clap")]
pub use args::TmArgs;
pub use bitmask::NumaMask;
pub use bitmask::iterate_masks;
pub use error::InputError;
pub use hint::{ProviderHints, TopologyHint};
pub use lean::{Brief, LeanPod, LeanState};
pub use matrix::{MatrixSpec, gpu_resource, seed_matrix};
pub use matrix_run::run_matrix;
pub use merge::{filter_providers_hints, iterate_all_provider_topology_hints, merge_permutation};
pub use merge_cases::{MergeResult, run_cases};
pub use node::Usage;
pub use numa_info::NumaInfo;
pub use outcome::Outcome;
pub use pod::{Pod, QosClass};
pub use policy::TopologyManager;
pub use policy::merge_with_policy;
pub use prepared::Prepared;
pub use request::TmRequest;
pub use resources::{DeviceKind, PluginAllocator, ResourceMap};
pub use simulate::{Case, SimError, simulate};
pub use topoalign_kube_types::Quantity;
