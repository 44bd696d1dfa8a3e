//! The `volcano` dialect: a Volcano Job (`batch.volcano.sh/v1alpha1`) with one task of
//! `pods` replicas, `minAvailable` the whole gang, and `networkTopology` keeping it
//! inside one HyperNode of the level's tier (`hard` for required, `soft` for preferred).

use serde_json::json;

use crate::job::Job;
use crate::job::Mode;
use crate::manifest_parts::{meta, pod_template, value};

/// Volcano's Job API version.
pub(crate) const API_VERSION: &str = "batch.volcano.sh/v1alpha1";

/// Appends the Volcano Job.
pub(crate) fn objects(job: &Job, out: &mut Vec<serde_json::Value>, notes: &mut Vec<String>) {
    let mode = match job.mode {
        Mode::Required => "hard",
        Mode::Preferred => "soft",
    };
    out.push(json!({
        "apiVersion": API_VERSION,
        "kind": "Job",
        "metadata": value(&meta(job, &job.name)),
        "spec": {
            "schedulerName": "volcano",
            "minAvailable": job.pods,
            "queue": job.queue,
            "networkTopology": {"mode": mode, "highestTierAllowed": job.volcano_tier},
            "tasks": [{
                "name": "worker",
                "replicas": job.pods,
                "template": value(&pod_template(job, Default::default())),
            }],
        },
    }));
    notes.push(format!(
        "Volcano: HyperNodes (topology.volcano.sh/v1alpha1) of tier {} must group the nodes by {} (set domain.volcanoTier if the cluster's tiers differ)",
        job.volcano_tier, job.key
    ));
}
