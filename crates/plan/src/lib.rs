//! The joint GPU+NIC+CPU allocator: exact, explained, fast.
//!
//! [`Planner::new`] precomputes a topology's GPU×NIC path table, fabric links, NUMA
//! facts, fragmentation groups and device equivalence classes once; [`Planner::plan`]
//! then answers a [`Request`] against the node's current [`Usage`] with a [`Plan`] —
//! GPUs, NICs, a GPU↔NIC pairing, CPUs and memory — or a [`PlanError`] naming the bound
//! that cannot be met and the best plan without it.
//!
//! # Optimality
//!
//! A plan is optimal under this lexicographic order (earlier criteria dominate):
//!
//! 1. It meets every hard bound: GPU and NIC counts (total M spread ⌊M/N⌋/⌈M/N⌉ over
//!    the GPUs, or K per GPU), the device filters, free devices only, enough free CPUs
//!    and memory, every pair at most `max_pair`, every GPU pair NVLink/xGMI-linked when
//!    `gpu_link` is `Nvlink`.
//! 2. Most GPU↔NIC pairs with GPUDirect RDMA (NCCL's default rule:
//!    [`topoalign_topology::GpuNicPath::gdr`]).
//! 3. The smallest worst pair class, then the smallest sum of pair class ranks
//!    (PIX 0, PXB 1, PHB 2, NODE 3, SYS 4).
//! 4. The fewest NUMA nodes spanned by GPUs, NICs, CPUs and memory, then the smallest sum
//!    of SLIT distances over unordered pairs of spanned nodes. CPUs and memory come
//!    from the devices' nodes first (GPUs' nodes, then NICs'), then from the fewest,
//!    closest extra nodes.
//! 5. The largest GPU interconnect: the sum over chosen GPU pairs of their NVLink count
//!    (the 18 of NV18) or xGMI link count; PCIe-only pairs add 0.
//! 6. The least fragmentation: the number of PCIe switches, NUMA nodes and NVLink/xGMI
//!    islands (of two or more GPUs) that are *partially* used after the allocation — some
//!    but not all of their GPU and NIC functions taken (already used or planned).
//!    Filling a switch, node or island completely, or leaving it untouched, costs 0.
//! 7. Deterministic tie-break: the lexicographically smallest sorted GPU address list,
//!    then NIC address list.
//!
//! # Search
//!
//! Devices are grouped into exact equivalence classes (see `model`), and a
//! branch-and-bound searches over how many devices to take from each class, solving the
//! NIC assignment of each candidate as a min-cost flow. The GPU search bounds the NUMA
//! span by where the GPUs still to place can fit; for each GPU choice one flow over every
//! usable NIC gives the best pair cost P*, and NIC choices whose capacity-aware pair
//! bound (see `bound`) cannot reach P* are cut, since a choice that does dominates them.
//! It is exact: a property test compares it with `brute::brute_force` (feature `brute`,
//! on for this crate's tests and benchmark) on random topologies.

#[cfg(feature = "clap")]
mod args;
mod bound;
/// Public as a sub-API of the oracle: the exhaustive search the property tests and the
/// benchmark compare the planner with (feature `brute`, on for this crate's own tests).
#[cfg(any(test, feature = "brute"))]
pub mod brute;
mod error;
mod flow;
mod model;
#[cfg(any(test, feature = "brute"))]
mod oracle;
mod planner;
mod problem;
mod report;
mod request;
mod score;
mod search;
mod text;
mod timing;
mod types;
#[cfg(feature = "clap")]
mod usage_file;
mod words;

#[cfg(feature = "clap")]
pub use args::RequestArgs;
pub use error::{Bound, PlanError};
#[cfg(any(test, feature = "brute"))]
pub use oracle::evaluate;
pub use planner::{Planner, Reading};
pub use report::{PlanReport, Refusal};
pub use request::{GpuLinkBound, NicCount, NicRole, Request, Usage};
pub use score::{DeviceScore, device_score};
pub use timing::{CallTimes, PlanTiming, time_plan};
pub use types::{CostKey, NodeMemory, Pairing, Plan, Score};
#[cfg(feature = "clap")]
pub use usage_file::{UsageFileError, read_usage};
pub use words::{GPU_LINK_WORDS, LINK_LAYER_WORDS, NIC_ROLE_WORDS, UnknownWord, parse_link_layer};
