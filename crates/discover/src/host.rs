//! Sources as a command line names them: this host's sysfs by default, a short
//! description for messages, and a load that, on the live host only, asks NVML (through
//! `nvidia-smi`) for the NVLink counts sysfs lacks. [`load`] itself never runs a
//! program; [`load_on_host`] is the explicit opt-in.

use std::path::{Path, PathBuf};

use topoalign_topology::FabricStatus;

use crate::discovery::Discovery;
use crate::error::DiscoverError;
use crate::nvidia_smi_tool::{merge_memory, merge_nvlinks, program_from_env};
use crate::source::{Source, load};

impl Source {
    /// This host's sysfs (`/`), without a saved NVLink source.
    pub fn host() -> Source {
        Source::Sysfs {
            root: PathBuf::from("/"),
            nvlink_from: None,
        }
    }

    /// A short description for messages: `sysfs under DIR`, `profile `NAME``, ….
    pub fn describe(&self) -> String {
        match self {
            Source::Sysfs { root, .. } => format!("sysfs under {}", root.display()),
            Source::Profile(p) => format!("profile `{p}`"),
            Source::NvidiaSmi(f) => format!("nvidia-smi output {}", f.display()),
            Source::AmdSmi(f) => format!("amd-smi output {}", f.display()),
            Source::NcclXml(f) => format!("NCCL topology XML {}", f.display()),
        }
    }
}

/// [`load`], then, when `source` is the live host's sysfs (`/`): with no NVLink source
/// and the NVIDIA fabric unknown, runs `nvidia-smi topo -m` (`$TOPOALIGN_NVIDIA_SMI`) and
/// merges its NVLink cells; with NVIDIA GPUs of unknown memory, asks the tool for their
/// sizes. A failure there is a warning.
pub fn load_on_host(source: &Source) -> Result<Discovery, DiscoverError> {
    let mut d = load(source)?;
    if let Source::Sysfs { root, nvlink_from } = source
        && root.as_path() == Path::new("/")
    {
        let program = program_from_env();
        if nvlink_from.is_none() && d.topology.fabric_status() == FabricStatus::Unknown {
            merge_nvlinks(&mut d, &program);
        }
        merge_memory(&mut d, &program);
    }
    Ok(d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn descriptions_name_the_source() {
        assert_eq!(Source::host().describe(), "sysfs under /");
        assert_eq!(
            Source::Profile("gb300-4".into()).describe(),
            "profile `gb300-4`"
        );
        assert_eq!(
            Source::NcclXml("t.xml".into()).describe(),
            "NCCL topology XML t.xml"
        );
    }

    #[test]
    fn a_profile_loads_without_asking_any_tool() {
        // Only the live host's sysfs asks the tool; a profile loads as `load` gives it.
        let d = load_on_host(&Source::Profile("dgx-h100".into())).unwrap();
        assert!(d.warnings.is_empty());
        assert_eq!(d.topology.gpus.len(), 8);
    }
}
