//! Claims for "N MIG instances of one profile", optionally each with a NIC function of
//! its parent's (MIG×NIC pairs, [`crate::publish::mig`]).
//!
//! One request, `count: N`, class `mig.topoalign.dev` (or `mig-nic-pair.topoalign.dev`)
//! and a CEL selector on the `profile` attribute. The pool lists MIG devices GPU by GPU
//! and MIG pairs best class first, then GPU by GPU, so the allocator's first solution
//! fills one GPU before the next and takes the best pairs first: the mechanism
//! [`crate::claim::spec`] uses for GPU+NIC pairs. NCCL does not run on MIG (REFERENCE §11): a
//! MIG pair serves UCX/NIXL/libfabric transfers.

use k8s_openapi::api::resource::v1::{DeviceClaim, ResourceClaimSpec};

use crate::claim::spec::exactly;
use crate::limits::MAX_DEVICES_PER_CLAIM;
use crate::publish::{CLASS_MIG, CLASS_MIG_PAIR};
use crate::{DraError, attr};

/// What a MIG claim asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MigClaimSpec {
    /// The MIG profile (`1g.10gb`).
    pub profile: String,
    /// Instances wanted.
    pub count: u32,
    /// Each instance with one function of a NIC its parent pairs with.
    pub with_nic: bool,
    /// Only pairs at this rank or better (0 PIX … 3 NODE); with `with_nic` only.
    pub max_rank: Option<u32>,
}

/// The request's name in a MIG claim: `mig` or `mig-pairs`.
pub(crate) fn request_name(with_nic: bool) -> &'static str {
    if with_nic { "mig-pairs" } else { "mig" }
}

/// Every MIG profile name of the built-in models, sorted and without duplicates.
pub(crate) fn known_profiles() -> Vec<&'static str> {
    let mut v: Vec<&'static str> = topoalign_mig::MODELS
        .iter()
        .flat_map(|m| m.profile_names())
        .collect();
    v.sort_unstable();
    v.dedup();
    v
}

/// The claim's device part. Errors: a profile no built-in model has (naming `--mig` and
/// the known profiles), a count of 0 or above the allocator's 32, a rank above 3.
pub fn mig_claim_spec(spec: &MigClaimSpec) -> Result<ResourceClaimSpec, DraError> {
    let known = known_profiles();
    if !known.contains(&spec.profile.as_str()) {
        return Err(DraError::BadClaim(format!(
            "--mig {:?} is not a MIG profile of any known GPU model: expected one of {}",
            spec.profile,
            known.join(", ")
        )));
    }
    if spec.count == 0 {
        return Err(DraError::BadClaim("--count must be at least 1".into()));
    }
    if spec.count as usize > MAX_DEVICES_PER_CLAIM {
        return Err(DraError::BadClaim(format!(
            "--count {}: the allocator hands out at most {MAX_DEVICES_PER_CLAIM} devices per claim",
            spec.count
        )));
    }
    let mut selectors = vec![format!(
        "{} == \"{}\"",
        attr::cel(attr::PROFILE),
        spec.profile
    )];
    if let Some(r) = spec.max_rank {
        if !spec.with_nic {
            return Err(DraError::BadClaim(
                "a pair class limit needs --with-nic (a MIG instance alone has no NIC)".into(),
            ));
        }
        if r > 3 {
            return Err(DraError::BadClaim(format!(
                "rank {r} is not published: pair ranks are 0 (PIX) to 3 (NODE)"
            )));
        }
        selectors.push(format!("{} <= {r}", attr::cel(attr::RANK)));
    }
    let class = if spec.with_nic {
        CLASS_MIG_PAIR
    } else {
        CLASS_MIG
    };
    Ok(ResourceClaimSpec {
        devices: Some(DeviceClaim {
            requests: Some(vec![exactly(
                request_name(spec.with_nic),
                class,
                spec.count,
                selectors,
            )]),
            constraints: None,
            config: None,
        }),
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn spec(profile: &str, count: u32, with_nic: bool) -> MigClaimSpec {
        MigClaimSpec {
            profile: profile.into(),
            count,
            with_nic,
            max_rank: None,
        }
    }

    #[test]
    fn one_request_of_the_profile() {
        let c = mig_claim_spec(&spec("1g.10gb", 7, false)).unwrap();
        let r = &c.devices.unwrap().requests.unwrap()[0];
        let e = r.exactly.as_ref().unwrap();
        assert_eq!((r.name.as_str(), e.count), ("mig", Some(7)));
        assert_eq!(e.device_class_name, CLASS_MIG);
        let sel = &e.selectors.as_ref().unwrap()[0]
            .cel
            .as_ref()
            .unwrap()
            .expression;
        assert_eq!(
            sel,
            "device.attributes[\"topoalign.dev\"][\"profile\"] == \"1g.10gb\""
        );
        let c = mig_claim_spec(&spec("3g.40gb", 2, true)).unwrap();
        let r = &c.devices.unwrap().requests.unwrap()[0];
        assert_eq!(r.name, "mig-pairs");
        assert_eq!(
            r.exactly.as_ref().unwrap().device_class_name,
            CLASS_MIG_PAIR
        );
    }

    #[test]
    fn bad_specs_say_which_flag_and_what_is_expected() {
        let e = mig_claim_spec(&spec("1g.11gb", 1, false))
            .unwrap_err()
            .to_string();
        assert!(e.contains("--mig \"1g.11gb\""), "{e}");
        assert!(e.contains("1g.10gb") && e.contains("7g.278gb"), "{e}");
        let e = mig_claim_spec(&spec("1g.10gb", 0, false))
            .unwrap_err()
            .to_string();
        assert!(e.contains("--count"), "{e}");
        let e = mig_claim_spec(&spec("1g.10gb", 33, false))
            .unwrap_err()
            .to_string();
        assert!(e.contains("at most 32"), "{e}");
        let mut s = spec("1g.10gb", 1, false);
        s.max_rank = Some(0);
        assert!(
            mig_claim_spec(&s)
                .unwrap_err()
                .to_string()
                .contains("--with-nic")
        );
    }
}
