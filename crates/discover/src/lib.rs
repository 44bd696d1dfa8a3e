//! Discovery of a node's topology.
//!
//! Sources, all producing a [`topoalign_topology::Topology`]:
//! - [`sysfs`]: walks Linux sysfs/procfs under a configurable root (default `/`);
//! - [`parse`]: parsers for vendor tool output a user already has (`nvidia-smi topo -m`,
//!   `amd-smi topology` / `rocm-smi --showtopo`, NCCL topology XML);
//! - [`profiles`]: built-in machine profiles, and [`sysfs_write`] which materialises a
//!   profile as a real sysfs tree (how the walker is tested on what Linux shows);
//! - [`nvidia_smi_tool`]: on a live NVIDIA host, NVLink counts from `nvidia-smi topo -m`.

pub mod error;
pub mod nvidia_smi_tool;
pub mod parse;
pub mod profiles;
pub mod source;
pub mod sysfs;
pub mod sysfs_write;

pub use error::DiscoverError;
pub use profiles::NAMES as PROFILE_NAMES;
pub use source::{Discovery, Source, load};
