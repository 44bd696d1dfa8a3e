//! Discovery of a node's topology.
//!
//! Sources, all producing a [`topoalign_topology::Topology`]:
//! - [`sysfs`]: walks Linux sysfs/procfs under a configurable root (default `/`);
//! - `parse`: parsers for vendor tool output a user already has (`nvidia-smi topo -m`,
//!   `amd-smi topology` / `rocm-smi --showtopo`, NCCL topology XML);
//! - `sysfs_write`: materialises a topology (a built-in profile from the
//!   `topoalign-profiles` crate) as a real sysfs tree (how the walker is tested on what
//!   Linux shows);
//! - `nvidia_smi_tool`: on a live NVIDIA host, NVLink counts from `nvidia-smi topo -m`,
//!   run only when the caller (the CLI) asks for it; no other call spawns a process;
//! - [`neighbours`]: what each NIC is cabled to (`lldpctl -f json`, InfiniBand ports in
//!   sysfs, a saved `ibnetdiscover`), the facts the gang model derives rails and leaves from;
//! - `args` (feature `clap`): the topology-source flags as one clap argument group.

#[cfg(feature = "clap")]
mod args;
mod discovery;
mod error;
mod host;
/// Public as a namespace: what the NICs are cabled to (LLDP, InfiniBand), read and
/// matched to the topology's NICs.
pub mod neighbours;
mod nvidia_smi_tool;
mod parse;
mod source;
/// Public as a namespace: The sysfs tree reader and its per-file readers (`gpu`, `nic`,
/// `pci`, `fsread`, ...): a sub-API of its own, used as a namespace by verify (`fsread`)
/// and the readers' fuzz tests.
pub mod sysfs;
mod sysfs_write;

#[cfg(feature = "clap")]
pub use args::TopologyArgs;
pub use discovery::Discovery;
pub use error::{DiscoverError, SynthError, ToolError};
pub use host::load_on_host;
pub use nvidia_smi_tool::{
    ToolOutput, merge_memory, merge_nvlinks, program_from_env, run_checked, run_tool,
};
pub use parse::amd::{AmdFormat, detect as detect_amd_format};
pub use parse::nvlink_merge::apply_nvlink_text;
pub use parse::paste::decode as decode_paste;
pub use parse::{apply_nvlink_file, parse_amd_smi, parse_nccl_xml, parse_nvidia_smi};
pub use source::{Source, load};
pub use sysfs_write::{sysfs_view, write_tree};
