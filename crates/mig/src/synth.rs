//! A host's MIG state without hardware: from explicit placements or from a [`GeometryPlan`], as
//! if the instances had been created with `nvidia-smi mig -cgi <ID>:<start> -C` on GPUs
//! 0, 1, … (in that order, so GPU-instance IDs count up from 1 per GPU and each GPU
//! instance has one compute instance, ID 0). No UUIDs: a consumer joins the GPUs by
//! index.

use crate::geometry::{GeometryError, Placement, validate};
use crate::model::Model;
use crate::planner::GeometryPlan;
use crate::read_state::{ComputeInstance, GpuInstance, MigGpu, MigState};

/// The state of GPUs `(index, instances)` of `model`, each checked by the placement
/// rules. GPUs listed without instances are in the state with none.
pub fn state_from_placements(
    model: &'static Model,
    gpus: &[(u32, Vec<Placement>)],
) -> Result<MigState, GeometryError> {
    let mut out = Vec::with_capacity(gpus.len());
    for (index, placements) in gpus {
        validate(
            model,
            usize::try_from(*index).unwrap_or(usize::MAX),
            placements,
        )?;
        let mut instances: Vec<GpuInstance> = Vec::with_capacity(placements.len());
        for (id, p) in (1u32..).zip(placements) {
            // validate() accepted every profile, so each has a shape.
            let Some(shape) = model.shape(&p.profile) else {
                continue;
            };
            instances.push(GpuInstance {
                profile: p.profile.clone(),
                profile_id: shape.gi_profile_id(),
                id,
                start: p.start,
                size: shape.memory_slices(),
                compute_instances: vec![ComputeInstance {
                    profile: p.profile.clone(),
                    profile_id: 0,
                    id: 0,
                    placement: Some((0, shape.sm_slices())),
                }],
                mig_devices: Vec::new(),
            });
        }
        instances.sort_by_key(|i| (i.start, i.id));
        out.push(MigGpu {
            index: *index,
            name: Some(model.product.to_string()),
            uuid: None,
            model: Some(model),
            instances,
            unmatched_devices: Vec::new(),
            possible_placements: Vec::new(),
        });
    }
    out.sort_by_key(|g| g.index);
    Ok(MigState { gpus: out })
}

/// The state a one-node plan's geometry would leave (its GPUs by index; a GPU the plan
/// leaves empty has no instances).
pub fn state_from_plan(plan: &GeometryPlan) -> Result<MigState, GeometryError> {
    let gpus: Vec<(u32, Vec<Placement>)> = plan
        .gpus
        .iter()
        .map(|g| (g.index, g.instances.clone()))
        .collect();
    state_from_placements(plan.model, &gpus)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use crate::model::lookup;

    fn p(profile: &str, start: u8) -> Placement {
        Placement {
            profile: profile.into(),
            start,
        }
    }

    #[test]
    fn placements_become_instances_with_ids_and_sizes() {
        let h100 = lookup("h100-80gb").unwrap();
        let s = state_from_placements(
            h100,
            &[(1, vec![p("3g.40gb", 4), p("4g.40gb", 0)]), (0, vec![])],
        )
        .unwrap();
        assert_eq!(s.gpus.len(), 2);
        assert_eq!(s.gpus[0].index, 0);
        let g1 = &s.gpus[1];
        assert_eq!(
            g1.placements(),
            vec![p("4g.40gb", 0), p("3g.40gb", 4)],
            "by start"
        );
        assert_eq!((g1.instances[0].profile_id, g1.instances[0].size), (5, 4));
        assert_eq!(g1.instances[1].id, 1, "IDs in creation order");
    }

    #[test]
    fn broken_geometry_is_refused_with_the_rule() {
        let h100 = lookup("h100-80gb").unwrap();
        let e = state_from_placements(h100, &[(2, vec![p("3g.40gb", 0), p("2g.20gb", 2)])])
            .unwrap_err()
            .to_string();
        assert!(e.contains("GPU 2") && e.contains("overlaps"), "{e}");
        let e = state_from_placements(h100, &[(0, vec![p("1g.5gb", 0)])])
            .unwrap_err()
            .to_string();
        assert!(e.contains("unknown profile `1g.5gb`"), "{e}");
    }
}
