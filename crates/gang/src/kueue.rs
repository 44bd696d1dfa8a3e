//! The `kueue` dialect: a `batch/v1` Job (Indexed, one pod per member, created
//! suspended) in a LocalQueue (`kueue.x-k8s.io/queue-name`), whose pod template asks
//! Kueue's topology-aware scheduling for one domain
//! (`kueue.x-k8s.io/podset-required-topology` or `podset-preferred-topology`), and the
//! Kueue `Topology` (`kueue.x-k8s.io/v1beta2`) over the domain label and the hostname.

use std::collections::BTreeMap;

use k8s_openapi::api::batch::v1::{Job as BatchJob, JobSpec};

use crate::job::Job;
use crate::job::Mode;
use crate::manifest_parts::{meta, pod_template, topology_name, topology_object, value};

/// Kueue's LocalQueue label.
pub(crate) const QUEUE_LABEL: &str = "kueue.x-k8s.io/queue-name";
/// Pod-template annotation: the pods must be inside one domain of this label.
pub(crate) const REQUIRED_TOPOLOGY: &str = "kueue.x-k8s.io/podset-required-topology";
/// Pod-template annotation: the pods should be inside one domain of this label.
pub(crate) const PREFERRED_TOPOLOGY: &str = "kueue.x-k8s.io/podset-preferred-topology";
/// Kueue's API version for `Topology`.
pub(crate) const API_VERSION: &str = "kueue.x-k8s.io/v1beta2";

/// The Kueue `Topology`: the domain label, then `kubernetes.io/hostname` (the lowest
/// level, which Kueue allows only last).
pub(crate) fn topology(job: &Job) -> serde_json::Value {
    topology_object(job, API_VERSION)
}

/// Appends the Topology and the Job.
pub(crate) fn objects(job: &Job, out: &mut Vec<serde_json::Value>, notes: &mut Vec<String>) {
    let annotation = match job.mode {
        Mode::Required => REQUIRED_TOPOLOGY,
        Mode::Preferred => PREFERRED_TOPOLOGY,
    };
    let pods = i32::try_from(job.pods).unwrap_or(i32::MAX);
    let mut metadata = meta(job, &job.name);
    metadata
        .labels
        .get_or_insert_with(BTreeMap::new)
        .insert(QUEUE_LABEL.into(), job.queue.clone());
    let batch = BatchJob {
        metadata,
        spec: Some(JobSpec {
            parallelism: Some(pods),
            completions: Some(pods),
            completion_mode: Some("Indexed".into()),
            // Kueue unsuspends the job when it admits the whole gang.
            suspend: Some(true),
            backoff_limit: Some(0),
            template: pod_template(
                job,
                BTreeMap::from([(annotation.to_string(), job.key.clone())]),
            ),
            ..Default::default()
        }),
        status: None,
    };
    out.push(topology(job));
    out.push(value(&batch));
    notes.push(format!(
        "Kueue TAS: the ResourceFlavor of LocalQueue {:?}'s ClusterQueue needs spec.topologyName: {}",
        job.queue,
        topology_name(job)
    ));
}
