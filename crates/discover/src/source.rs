//! One entry point for every topology source the CLI accepts.

use std::path::PathBuf;

use crate::discovery::Discovery;
use crate::error::DiscoverError;
use topoalign_profiles as profiles;

/// Where a topology comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// Walk sysfs/procfs under `root` (`/` on a live host).
    Sysfs {
        /// The directory that plays `/`.
        root: PathBuf,
        /// `nvidia-smi topo -m` output to take NVLink counts from (NVLink is not in
        /// sysfs; NVML knows it). Without it, the saved output inside the tree is used
        /// when present ([`crate::sysfs::nvml`]); otherwise the NVIDIA fabric is unknown.
        /// [`load`] never runs `nvidia-smi`: a caller that wants the live tool calls
        /// [`crate::nvidia_smi_tool::merge_nvlinks`] itself.
        nvlink_from: Option<PathBuf>,
    },
    /// A built-in profile by name.
    Profile(String),
    /// A saved `nvidia-smi topo -m` output.
    NvidiaSmi(PathBuf),
    /// A saved `amd-smi topology` or `rocm-smi --showtopo` output.
    AmdSmi(PathBuf),
    /// An NCCL topology XML file (`NCCL_TOPO_FILE` format).
    NcclXml(PathBuf),
}

/// Loads a topology from any source.
pub fn load(source: &Source) -> Result<Discovery, DiscoverError> {
    match source {
        Source::Profile(name) => Ok(Discovery::clean(profiles::lookup(name)?)),
        Source::Sysfs { root, nvlink_from } => {
            let mut discovery = crate::sysfs::discover(root)?;
            if let Some(path) = nvlink_from {
                crate::parse::apply_nvlink_file(&mut discovery, path)?;
            }
            Ok(discovery)
        }
        Source::NvidiaSmi(path) => crate::parse::load_nvidia_smi(path),
        Source::AmdSmi(path) => crate::parse::load_amd_smi(path),
        Source::NcclXml(path) => crate::parse::load_nccl_xml(path),
    }
}
