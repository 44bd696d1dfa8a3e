//! The ResourceClaimTemplate every pod of a gang gets: its pairs, at the class asked or
//! better, pinned to the job's rail set with one pair per rail. Built by the DRA model's
//! claim writer (the one `topoalign claims --pairs` uses) and pinned by
//! [`topoalign_dra::publish::pin_rails`] (or, for API servers that drop `distinctAttribute`,
//! [`topoalign_dra::publish::pin_rails_per_rail`]); nothing here writes a claim of its own.

use k8s_openapi::api::resource::v1::ResourceClaimTemplate;
use topoalign_dra::claim::{ClaimSpec, claim_template};
use topoalign_dra::publish::{pin_rails, pin_rails_per_rail};

use crate::error::GangError;
use crate::job::Job;

/// The name of a job's claim template: `<job>-pairs`.
pub(crate) fn template_name(job: &Job) -> String {
    format!("{}-pairs", job.name)
}

/// The name pods use for the claim in `spec.resourceClaims` and
/// `containers[].resources.claims`.
pub(crate) const POD_CLAIM_NAME: &str = "pairs";

/// The job's claim template.
pub fn gang_claim_template(job: &Job) -> Result<ResourceClaimTemplate, GangError> {
    let err = |source| GangError::Claim {
        job: job.name.clone(),
        source,
    };
    let spec = ClaimSpec {
        name: template_name(job),
        namespace: job.namespace.clone(),
        max_rank: Some(job.class.rank()),
        // Each pair its own physical NIC: two pairs on one NIC through VFs would share
        // its rail and its bandwidth. (Without `distinctAttribute`, one request per rail
        // gives every pair its own NIC; unpinned pairs then cannot be kept apart.)
        distinct_nics: job.distinct_attribute(),
        ..ClaimSpec::pairs(job.pairs_per_pod)
    };
    let mut template = claim_template(&spec).map_err(err)?;
    if let Some(rails) = &job.rails
        && let Some(claim) = template.spec.as_mut().and_then(|s| s.spec.as_mut())
    {
        if job.distinct_attribute() {
            pin_rails(claim, rails, true).map_err(err)?;
        } else {
            pin_rails_per_rail(claim, rails).map_err(err)?;
        }
    }
    Ok(template)
}
