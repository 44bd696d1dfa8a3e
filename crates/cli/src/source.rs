//! The topology-source flags shared by every command that reads a topology.

use std::path::PathBuf;

use anyhow::Context;
use topoalign_discover::{Discovery, Source};
use topoalign_topology::FabricStatus;

/// Where to read the node topology from (at most one; default as each command says).
#[derive(Debug, Clone, Default, clap::Args)]
pub struct TopologyArgs {
    /// Walk sysfs under DIR (use `/` for this host).
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
    /// The source these flags name, or `default` when none is given.
    pub fn source(&self, default: Source) -> Source {
        if let Some(root) = &self.sysfs_root {
            Source::Sysfs {
                root: root.clone(),
                nvlink_from: self.nvlink_from.clone(),
            }
        } else if let Some(p) = &self.profile {
            Source::Profile(p.clone())
        } else if let Some(f) = &self.from_nvidia_smi {
            Source::NvidiaSmi(f.clone())
        } else if let Some(f) = &self.from_amd_smi {
            Source::AmdSmi(f.clone())
        } else if let Some(f) = &self.from_nccl_xml {
            Source::NcclXml(f.clone())
        } else {
            default
        }
    }

    /// Loads the topology, printing discovery warnings to stderr.
    pub fn load(&self, default: Source) -> anyhow::Result<Discovery> {
        let source = self.source(default);
        let mut d = topoalign_discover::load(&source)
            .with_context(|| format!("reading the topology from {}", describe(&source)))?;
        // The library never runs programs; on the live host the CLI asks NVML (through
        // nvidia-smi) for what sysfs lacks, when nothing else supplied it.
        if let Source::Sysfs {
            root,
            nvlink_from: None,
        } = &source
            && root.as_path() == std::path::Path::new("/")
            && d.topology.fabric_status() == FabricStatus::Unknown
        {
            let program = topoalign_discover::nvidia_smi_tool::program_from_env();
            topoalign_discover::nvidia_smi_tool::merge_nvlinks(&mut d, &program);
        }
        for w in &d.warnings {
            eprintln!("warning: {w}");
        }
        Ok(d)
    }
}

/// A short human description of a source for error messages.
pub fn describe(source: &Source) -> String {
    match source {
        Source::Sysfs { root, .. } => format!("sysfs under {}", root.display()),
        Source::Profile(p) => format!("profile `{p}`"),
        Source::NvidiaSmi(f) => format!("nvidia-smi output {}", f.display()),
        Source::AmdSmi(f) => format!("amd-smi output {}", f.display()),
        Source::NcclXml(f) => format!("NCCL topology XML {}", f.display()),
    }
}
