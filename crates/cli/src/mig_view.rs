//! The MIG instances `discover`, `matrix`, `draw` and `profile show` lay over a topology:
//! from the driver's sources (`--mig-state DIR`, `--mig-from-host`, `--mig-want MIX`,
//! read and joined by `topoalign_node_facts::MigSource` exactly as the driver publishes
//! them) or, with none of those, from the MIG geometry a built-in profile carries.

use std::path::PathBuf;

use topoalign_dra::publish::NodeMig;
use topoalign_node_facts::MigSource;
use topoalign_render::{MigGpuView, MigInstanceView, MigOverlay};
use topoalign_topology::Topology;

/// Where the MIG instances come from (at most one; none: the profile's geometry, if any).
#[derive(Debug, Clone, Default, clap::Args)]
pub(crate) struct MigArgs {
    /// Show the MIG instances of saved `nvidia-smi` output in DIR: `list.txt`
    /// (`nvidia-smi -L`), `lgi.txt` (`mig -lgi`), `lci.txt` (`mig -lci`), `lgipp.txt`
    /// (`mig -lgipp`), `query.txt` (`-q`); any may be absent, one of the first four must
    /// be there.
    #[arg(long, value_name = "DIR", conflicts_with_all = ["mig_from_host", "mig_want"])]
    pub mig_state: Option<PathBuf>,
    /// Show this host's MIG instances: runs `nvidia-smi -L`, `nvidia-smi mig -lgi` and
    /// `-lci` ($TOPOALIGN_NVIDIA_SMI names another binary).
    #[arg(long, conflicts_with = "mig_want")]
    pub mig_from_host: bool,
    /// Show the instances `topoalign mig plan --want MIX` places on the node's GPUs
    /// (`1g.10gb=14,3g.40gb=2`).
    #[arg(long, value_name = "MIX")]
    pub mig_want: Option<String>,
}

impl MigArgs {
    fn source(&self) -> MigSource {
        if self.mig_from_host {
            return MigSource::Host;
        }
        match (&self.mig_state, &self.mig_want) {
            (Some(dir), _) => MigSource::State(dir.clone()),
            (None, Some(mix)) => MigSource::Want(mix.clone()),
            (None, None) => MigSource::None,
        }
    }
}

/// The instances to show on `topo`: the flags' source, else the geometry of the built-in
/// profile `profile` (when it carries one), else none. Warnings (a MIG mode change
/// waiting for a reset) go to stderr.
pub(crate) fn overlay(
    args: &MigArgs,
    profile: Option<&str>,
    topo: &Topology,
) -> anyhow::Result<MigOverlay> {
    let (layout, warnings) = args.source().layout_on(topo, profile)?;
    crate::output::warn(&warnings);
    Ok(from_layout(&layout, topo))
}

/// The drawing's view of a joined layout (GPUs by topology index).
fn from_layout(layout: &NodeMig, topo: &Topology) -> MigOverlay {
    let gpus = layout
        .gpus
        .iter()
        .filter_map(|g| {
            let gpu = (0..topo.gpus.len()).find(|&i| topo.gpu_bdf(i) == g.bdf)?;
            let instances = g
                .instances
                .iter()
                .map(|i| MigInstanceView {
                    profile: i.profile.clone(),
                    start: i.start,
                    size: i.size,
                    gi: i.gi,
                    ci: i.ci,
                    uuid: i.uuid.clone(),
                })
                .collect();
            Some(MigGpuView {
                gpu,
                model: g.model.name.to_string(),
                instances,
            })
        })
        .collect();
    MigOverlay { gpus }
}
