//! The MIG instances `topoalign discover`, `matrix`, `draw` and `profile show` lay over a
//! topology: from the driver's sources (`--mig-state DIR`, `--mig-from-host`,
//! `--mig-want MIX`, read and joined by [`MigSource`] exactly as the driver publishes
//! them) or, with none of those, from the MIG geometry a built-in profile carries.

use std::path::PathBuf;

use topoalign_dra::publish::NodeMig;
use topoalign_render::{MigGpuView, MigInstanceView, MigOverlay};
use topoalign_topology::Topology;

use crate::mig_source::{MigSource, MigSourceError};

/// Where the MIG instances to show come from (at most one; none: the profile's geometry,
/// if any); flags with the `clap` feature.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[cfg_attr(feature = "clap", derive(clap::Args))]
pub struct MigViewFlags {
    /// Show the MIG instances of saved `nvidia-smi` output in DIR: `list.txt`
    /// (`nvidia-smi -L`), `lgi.txt` (`mig -lgi`), `lci.txt` (`mig -lci`), `lgipp.txt`
    /// (`mig -lgipp`), `query.txt` (`-q`); any may be absent, one of the first four must
    /// be there.
    #[cfg_attr(feature = "clap", arg(long, value_name = "DIR", conflicts_with_all = ["mig_from_host", "mig_want"]))]
    pub mig_state: Option<PathBuf>,
    /// Show this host's MIG instances: runs `nvidia-smi -L`, `nvidia-smi mig -lgi` and
    /// `-lci` ($TOPOALIGN_NVIDIA_SMI names another binary).
    #[cfg_attr(feature = "clap", arg(long, conflicts_with = "mig_want"))]
    pub mig_from_host: bool,
    /// Show the instances `topoalign mig plan --want MIX` places on the node's GPUs
    /// (`1g.10gb=14,3g.40gb=2`).
    #[cfg_attr(feature = "clap", arg(long, value_name = "MIX"))]
    pub mig_want: Option<String>,
}

impl MigViewFlags {
    /// The source the flags name.
    pub fn source(&self) -> MigSource {
        if self.mig_from_host {
            return MigSource::Host;
        }
        match (&self.mig_state, &self.mig_want) {
            (Some(dir), _) => MigSource::State(dir.clone()),
            (None, Some(mix)) => MigSource::Want(mix.clone()),
            (None, None) => MigSource::None,
        }
    }

    /// The instances to show on `topo`: the flags' source, else the geometry of the
    /// built-in profile `profile` (when it carries one), else none; with the warnings (a
    /// MIG mode change waiting for a reset).
    pub fn overlay(
        &self,
        profile: Option<&str>,
        topo: &Topology,
    ) -> Result<(MigOverlay, Vec<String>), MigSourceError> {
        let (layout, warnings) = self.source().layout_on(topo, profile)?;
        Ok((overlay_of(&layout, topo), warnings))
    }
}

/// The drawing's view of a joined layout (GPUs by topology index).
fn overlay_of(layout: &NodeMig, topo: &Topology) -> MigOverlay {
    let gpus = (layout.gpus.iter())
        .filter_map(|g| {
            let gpu = (0..topo.gpus.len()).find(|&i| topo.gpu_bdf(i) == g.bdf)?;
            let instances = (g.instances.iter())
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_profile_geometry_is_shown_by_gpu_index_and_a_mix_on_any_node() {
        let topo = topoalign_profiles::get("dgx-a100-mig").unwrap();
        let none = MigViewFlags::default();
        assert_eq!(none.source(), MigSource::None);
        let (o, warnings) = none.overlay(Some("dgx-a100-mig"), &topo).unwrap();
        assert!(warnings.is_empty() && !o.gpus.is_empty());
        assert!(
            o.gpus
                .iter()
                .all(|g| g.gpu < topo.gpus.len() && !g.instances.is_empty())
        );
        let (plain, _) = none.overlay(None, &topo).unwrap();
        assert!(plain.gpus.is_empty(), "no source and no profile: nothing");
        let want = MigViewFlags {
            mig_want: Some("7g.40gb=1".into()),
            ..Default::default()
        };
        assert_eq!(want.source(), MigSource::Want("7g.40gb=1".into()));
        let (o, _) = want.overlay(None, &topo).unwrap();
        let placed: usize = o.gpus.iter().map(|g| g.instances.len()).sum();
        assert_eq!(placed, 1);
    }
}
