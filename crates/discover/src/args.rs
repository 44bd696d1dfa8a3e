//! The topology-source flags every command that reads a topology takes (the `clap`
//! feature): one [`TopologyArgs`] that commands and library argument structs flatten.

use std::path::PathBuf;

use crate::Source;

/// Where to read the node topology from: at most one of these; with none, every command
/// describes this host (`--sysfs-root /`).
#[derive(Debug, Clone, Default, clap::Args)]
pub struct TopologyArgs {
    /// Walk sysfs under DIR (`/`, this host, is the default of every command).
    #[arg(long, value_name = "DIR", group = "topology_source")]
    pub sysfs_root: Option<PathBuf>,
    /// A built-in machine profile (see `topoalign profile list`).
    #[arg(long, value_name = "NAME", group = "topology_source")]
    pub profile: Option<String>,
    /// A saved `nvidia-smi topo -m` output.
    #[arg(long, value_name = "FILE", group = "topology_source")]
    pub from_nvidia_smi: Option<PathBuf>,
    /// A saved `amd-smi topology` or `rocm-smi --showtopo` output.
    #[arg(long, value_name = "FILE", group = "topology_source")]
    pub from_amd_smi: Option<PathBuf>,
    /// An NCCL topology XML file (NCCL_TOPO_FILE format).
    #[arg(long, value_name = "FILE", group = "topology_source")]
    pub from_nccl_xml: Option<PathBuf>,
    /// With --sysfs-root: take NVLink counts from this `nvidia-smi topo -m` output (NVLink
    /// is not in sysfs). Without it: the saved output inside the tree, else on the live host
    /// (`--sysfs-root /`) topoalign runs `nvidia-smi topo -m` ($TOPOALIGN_NVIDIA_SMI),
    /// else the NVIDIA fabric is reported unknown.
    #[arg(long, value_name = "FILE", requires = "sysfs_root")]
    pub nvlink_from: Option<PathBuf>,
}

impl TopologyArgs {
    /// The source these flags name, if any.
    pub fn given(&self) -> Option<Source> {
        if let Some(root) = &self.sysfs_root {
            let nvlink_from = self.nvlink_from.clone();
            return Some(Source::Sysfs {
                root: root.clone(),
                nvlink_from,
            });
        }
        let profile = self.profile.clone().map(Source::Profile);
        profile
            .or_else(|| self.from_nvidia_smi.clone().map(Source::NvidiaSmi))
            .or_else(|| self.from_amd_smi.clone().map(Source::AmdSmi))
            .or_else(|| self.from_nccl_xml.clone().map(Source::NcclXml))
    }

    /// The source these flags name, or `default` when none is given.
    pub fn source(&self, default: Source) -> Source {
        self.given().unwrap_or(default)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sysfs_wins_and_carries_the_nvlink_file_and_the_default_fills_in() {
        let args = TopologyArgs {
            sysfs_root: Some("/tmp/t".into()),
            nvlink_from: Some("/tmp/nv.txt".into()),
            ..TopologyArgs::default()
        };
        assert_eq!(
            args.given(),
            Some(Source::Sysfs {
                root: "/tmp/t".into(),
                nvlink_from: Some("/tmp/nv.txt".into())
            })
        );
        let none = TopologyArgs::default();
        assert_eq!(none.given(), None);
        assert_eq!(
            none.source(Source::Profile("gb300-4".into())),
            Source::Profile("gb300-4".into())
        );
    }
}
