//! An exact simulator of the kubelet Topology Manager (hint providers, merge, policies,
//! scopes) and the device manager's allocation.
//!
//! Each module names the kubelet file and function it mirrors:
//! - [`bitmask`] mirrors `topologymanager/bitmask/bitmask.go`;
//! - [`numa_info`] mirrors `topologymanager/numa_info.go` (`Closest`, `Narrowest`);
//! - [`merge`] mirrors `topologymanager/policy.go` (`filterProvidersHints`, `mergePermutation`,
//!   `HintMerger`, `iterateAllProviderTopologyHints`);
//! - [`policy`] mirrors `policy_*.go` and `NewManager` (the settings' values are
//!   [`topoalign_kube_types::kubelet_settings`]);
//! - [`providers`] mirrors `devicemanager/topology_hints.go`, `cpumanager/policy_static.go`,
//!   `memorymanager/policy_static.go`;
//! - [`admission`] is the kubelet's admission of a pod on an empty node, as the lint asks
//!   for it;
//! - [`allocate`] mirrors `devicemanager/manager.go` (`devicesToAllocate`, `filterByAffinity`);
//! - [`simulate`] mirrors `scope_container.go`, `scope_pod.go`, `scope_none.go`;
//! - [`merge_cases`] evaluates JSON-lines merge cases for the differential test against
//!   the kubelet's Go code;
//! - [`matrix`] mirrors seed 000's policy table, computed by simulation.

pub mod admission;
pub mod allocate;
#[cfg(feature = "clap")]
pub mod args;
pub mod bitmask;
pub mod case;
pub mod error;
pub mod hint;
pub mod input_files;
pub mod matrix;
pub mod matrix_run;
pub mod merge;
pub mod merge_cases;
pub mod node;
pub mod numa_info;
pub mod outcome;
pub mod pod;
pub mod policy;
pub mod prepared;
pub mod providers;
pub mod request;
pub mod resources;
pub mod simulate;
pub mod text;

pub use admission::admit_on_empty_node;
pub use bitmask::NumaMask;
pub use error::InputError;
pub use hint::{ProviderHints, TopologyHint};
pub use node::Usage;
pub use outcome::Outcome;
pub use pod::{Pod, QosClass};
pub use policy::TopologyManager;
pub use prepared::Prepared;
pub use request::TmRequest;
pub use resources::{DeviceKind, PluginAllocator, ResourceMap};
pub use simulate::{Case, SimError, simulate};
/// Kubernetes resource quantities, shared with the other crates (re-exported for API
/// stability: `topoalign_tm::quantity::{Quantity, QuantityError}`).
pub use topoalign_kube_types::quantity;
pub use topoalign_kube_types::quantity::Quantity;
