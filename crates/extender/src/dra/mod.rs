//! The DRA wing: pods with ResourceClaims of known DeviceClasses, judged on the
//! ResourceSlices the DRA drivers publish.
//!
//! - [`judge`]: the judgement of claims on a node's slices (allocation search, scores);
//! - [`kinds`]: one call's claims worked out once per node kind;
//! - [`pairs`]: a node's pair devices, counters and pair capacity;
//! - [`pending`]: the pods waiting for a node, and what their claims need;
//! - [`room`]: room kept for the waiting pods, and what a pod's claims take;
//! - [`foreign`]: claims of other drivers (NVIDIA's GPU driver, dranet) judged on the
//!   stock allocator's choice and the devices' NUMA/PCI attributes;
//! - [`state`]: the slices, claims, templates and classes judged on;
//! - [`verdict`]: a pod's claims as read, one node's decision, the candidates' priorities;
//! - [`assume`]: where the extender sent a pod, held until the claim's allocation is seen;
//! - [`shared`]: the state shared by the watchers and the calls, with its verdict cache;
//! - [`watch`]: their watchers.

pub(crate) mod foreign;
pub(crate) mod judge;
pub(crate) mod kinds;
pub(crate) mod pairs;
pub(crate) mod pending;
pub(crate) mod room;
pub(crate) mod shared;
pub(crate) mod state;
pub(crate) mod verdict;
pub(crate) mod watch;
