//! Discovery of a node's topology.
//!
//! Sources, all producing a [`topoalign_topology::Topology`]:
//! - [`sysfs`]: walks Linux sysfs/procfs under a configurable root (default `/`);
//! - [`parse`]: parsers for vendor tool output a user already has (`nvidia-smi topo -m`,
//!   `amd-smi topology` / `rocm-smi --showtopo`, NCCL topology XML);
//! - [`sysfs_write`]: materialises a topology (a built-in profile from the
//!   `topoalign-profiles` crate) as a real sysfs tree (how the walker is tested on what
//!   Linux shows);
//! - [`nvidia_smi_tool`]: on a live NVIDIA host, NVLink counts from `nvidia-smi topo -m`,
//!   run only when the caller (the CLI) asks for it; no other call spawns a process;
//! - `args` (feature `clap`): the topology-source flags as one clap argument group.

#[cfg(feature = "clap")]
pub mod args;
pub mod discovery;
pub mod error;
pub mod host;
pub mod nvidia_smi_tool;
pub mod parse;
pub mod source;
pub mod sysfs;
pub mod sysfs_write;

pub use discovery::Discovery;
pub use error::DiscoverError;
pub use host::load_on_host;
pub use source::{Source, load};
