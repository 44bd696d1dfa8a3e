//! What a node publishes for a MIG geometry written down rather than read from a tool
//! (the geometry a built-in profile carries, such as `dgx-a100-mig`): its placements,
//! checked by the placement rules of the GPU model, as GPU instances joined to the
//! node's topology, exactly as saved `nvidia-smi` output of the same geometry joins.

use topoalign_mig::{GeometryError, ModelError, Placement, lookup, state_from_placements};
use topoalign_topology::Topology;

use crate::publish::mig::{MigJoinError, NodeMig};

/// Why a written-down MIG geometry cannot be published.
#[derive(Debug, thiserror::Error)]
pub enum MigGeometryError {
    /// The GPU model has no MIG profile table.
    #[error(transparent)]
    Model(#[from] ModelError),
    /// A placement breaks the model's rules.
    #[error(transparent)]
    Geometry(#[from] GeometryError),
    /// The geometry names GPUs the topology lacks.
    #[error(transparent)]
    Join(#[from] MigJoinError),
}

impl NodeMig {
    /// The MIG layout `topo` publishes for the geometry of GPU model `model` (`a100-40gb`):
    /// per GPU index (nvidia-smi's, in PCI address order), its instances as
    /// `(profile, start)`.
    pub fn from_geometry(
        topo: &Topology,
        model: &str,
        gpus: &[(u32, &[(&str, u8)])],
    ) -> Result<NodeMig, MigGeometryError> {
        let model = lookup(model)?;
        let gpus: Vec<(u32, Vec<Placement>)> = gpus
            .iter()
            .map(|(index, instances)| {
                let placements = instances
                    .iter()
                    .map(|(profile, start)| Placement {
                        profile: (*profile).to_string(),
                        start: *start,
                    })
                    .collect();
                (*index, placements)
            })
            .collect();
        let state = state_from_placements(model, &gpus)?;
        Ok(NodeMig::join(topo, &state)?)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn a_profiles_geometry_joins_its_topology_and_bad_ones_are_refused() {
        let topo = topoalign_profiles::get("dgx-a100-mig").unwrap();
        let geo = topoalign_profiles::mig_geometry("dgx-a100-mig").unwrap();
        let mig = NodeMig::from_geometry(&topo, geo.model, geo.gpus).unwrap();
        let want: usize = geo.gpus.iter().map(|(_, i)| i.len()).sum();
        assert_eq!(
            mig.gpus.iter().map(|g| g.instances.len()).sum::<usize>(),
            want
        );
        let e = NodeMig::from_geometry(&topo, "x100", geo.gpus).unwrap_err();
        assert!(matches!(e, MigGeometryError::Model(_)), "{e}");
        let overlapping: &[(u32, &[(&str, u8)])] = &[(0, &[("4g.20gb", 0), ("4g.20gb", 0)])];
        let e = NodeMig::from_geometry(&topo, geo.model, overlapping).unwrap_err();
        assert!(matches!(e, MigGeometryError::Geometry(_)), "{e}");
        let absent: &[(u32, &[(&str, u8)])] = &[(99, &[("1g.5gb", 0)])];
        let e = NodeMig::from_geometry(&topo, geo.model, absent).unwrap_err();
        assert!(matches!(e, MigGeometryError::Join(_)), "{e}");
    }
}
