//! A GPU's geometry — its GPU instances, each a profile at a start slot — and the
//! placement rules that make one valid.

use serde::{Deserialize, Serialize};

use crate::model::{Model, SM_SLICES, Shape};

/// One GPU instance: a profile placed at a memory-slice start.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Placement {
    /// The profile name on the GPU's model (`3g.40gb`).
    pub profile: String,
    /// The first memory slice it takes.
    pub start: u8,
}

/// Why a geometry breaks the placement rules. Each names the GPU and the instance.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GeometryError {
    /// The profile does not exist on the model.
    #[error("GPU {gpu}: unknown profile `{profile}` for {model}: expected one of {known}")]
    UnknownProfile {
        /// GPU index.
        gpu: usize,
        /// The profile given.
        profile: String,
        /// The model.
        model: String,
        /// The model's profiles, comma-separated.
        known: String,
    },
    /// The profile cannot start there.
    #[error(
        "GPU {gpu}: {profile} cannot start at memory slice {start}: expected a start in {allowed}"
    )]
    Start {
        /// GPU index.
        gpu: usize,
        /// The profile.
        profile: String,
        /// The start given.
        start: u8,
        /// The profile's starts (`0, 4`).
        allowed: String,
    },
    /// Two instances share a memory slice.
    #[error(
        "GPU {gpu}: {profile}@{start} overlaps {other}@{other_start} on memory slice {slice}: expected instances on disjoint memory slices"
    )]
    Overlap {
        /// GPU index.
        gpu: usize,
        /// The later instance's profile.
        profile: String,
        /// Its start.
        start: u8,
        /// The earlier instance's profile.
        other: String,
        /// Its start.
        other_start: u8,
        /// The first shared memory slice.
        slice: u8,
    },
    /// More SM slices than the GPU has.
    #[error(
        "GPU {gpu}: adding {profile}@{start} makes {total} SM slices: expected at most {SM_SLICES}"
    )]
    Compute {
        /// GPU index.
        gpu: usize,
        /// The instance that goes over.
        profile: String,
        /// Its start.
        start: u8,
        /// SM slices with it.
        total: u32,
    },
    /// A second instance of a one-per-GPU profile.
    #[error("GPU {gpu}: a second {profile} (at {start}): expected at most one per GPU")]
    OnePerGpu {
        /// GPU index.
        gpu: usize,
        /// The profile.
        profile: String,
        /// The second one's start.
        start: u8,
    },
}

/// Checks GPU `gpu`'s instances against the rules: a profile of the model, an allowed
/// start, disjoint memory slices, at most 7 SM slices in all, at most one `1g+me`.
pub fn validate(model: &Model, gpu: usize, instances: &[Placement]) -> Result<(), GeometryError> {
    let mut shaped = Vec::with_capacity(instances.len());
    for p in instances {
        let shape = model
            .shape(&p.profile)
            .ok_or_else(|| GeometryError::UnknownProfile {
                gpu,
                profile: p.profile.clone(),
                model: model.name.to_string(),
                known: model.profile_names().join(", "),
            })?;
        shaped.push((shape, p.start));
    }
    validate_shapes(model, gpu, &shaped)
}

/// [`validate`] on shapes (the model names the profiles in errors).
pub fn validate_shapes(
    model: &Model,
    gpu: usize,
    instances: &[(Shape, u8)],
) -> Result<(), GeometryError> {
    let name = |s: Shape| model.profile_name(s).to_string();
    let mut sm = 0u32;
    for (i, &(shape, start)) in instances.iter().enumerate() {
        if !shape.starts().contains(&start) {
            let allowed: Vec<String> = shape.starts().iter().map(u8::to_string).collect();
            return Err(GeometryError::Start {
                gpu,
                profile: name(shape),
                start,
                allowed: allowed.join(", "),
            });
        }
        for &(other, other_start) in &instances[..i] {
            let shared = shape.mask(start) & other.mask(other_start);
            if shared != 0 {
                return Err(GeometryError::Overlap {
                    gpu,
                    profile: name(shape),
                    start,
                    other: name(other),
                    other_start,
                    slice: u8::try_from(shared.trailing_zeros()).unwrap_or(0),
                });
            }
            if shape == other && shape.max_per_gpu() == 1 && shape != Shape::Seven {
                return Err(GeometryError::OnePerGpu {
                    gpu,
                    profile: name(shape),
                    start,
                });
            }
        }
        sm += u32::from(shape.sm_slices());
        if sm > u32::from(SM_SLICES) {
            return Err(GeometryError::Compute {
                gpu,
                profile: name(shape),
                start,
                total: sm,
            });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::lookup;

    fn p(profile: &str, start: u8) -> Placement {
        Placement {
            profile: profile.to_string(),
            start,
        }
    }

    #[test]
    fn the_rules_accept_the_classic_geometries() {
        let m = lookup("h100-80gb").unwrap();
        let ok = [
            vec![p("4g.40gb", 0), p("3g.40gb", 4)],
            vec![p("3g.40gb", 0), p("3g.40gb", 4)],
            vec![p("7g.80gb", 0)],
            vec![
                p("2g.20gb", 0),
                p("2g.20gb", 2),
                p("2g.20gb", 4),
                p("1g.10gb", 6),
            ],
            (0..7).map(|s| p("1g.10gb", s)).collect(),
            vec![
                p("1g.20gb", 0),
                p("1g.20gb", 2),
                p("1g.20gb", 4),
                p("1g.20gb", 6),
            ],
            vec![p("1g.10gb+me", 3), p("1g.10gb", 2), p("3g.40gb", 4)],
            vec![],
        ];
        for g in ok {
            assert_eq!(validate(m, 0, &g), Ok(()), "{g:?}");
        }
    }

    #[test]
    fn each_broken_rule_is_named() {
        let m = lookup("h100-80gb").unwrap();
        let e = validate(m, 3, &[p("4g.40gb", 4)]).unwrap_err();
        assert_eq!(
            e.to_string(),
            "GPU 3: 4g.40gb cannot start at memory slice 4: expected a start in 0"
        );
        let e = validate(m, 1, &[p("3g.40gb", 4), p("2g.20gb", 4)]).unwrap_err();
        assert!(matches!(e, GeometryError::Overlap { slice: 4, .. }), "{e}");
        assert!(
            e.to_string().contains("2g.20gb@4 overlaps 3g.40gb@4"),
            "{e}"
        );
        let e = validate(m, 0, &[p("3g.20gb", 0)]).unwrap_err();
        assert!(e.to_string().contains("expected one of 1g.10gb+me"), "{e}");
        let e = validate(m, 0, &[p("1g.10gb+me", 0), p("1g.10gb+me", 1)]).unwrap_err();
        assert!(
            matches!(e, GeometryError::OnePerGpu { start: 1, .. }),
            "{e}"
        );
        let e = validate(m, 0, &[p("7g.80gb", 0), p("1g.10gb", 0)]).unwrap_err();
        assert!(matches!(e, GeometryError::Overlap { .. }), "{e}");
        let e = validate(m, 0, &[p("1g.10gb", 7)]).unwrap_err();
        assert!(matches!(e, GeometryError::Start { .. }), "{e}");
    }
}
