//! The `kai` dialect: NVIDIA's KAI scheduler. A KAI `Topology` (`kai.scheduler/v1alpha1`)
//! over the domain label and the hostname, a PodGroup (`scheduling.run.ai/v2alpha2`)
//! holding the gang (`minMember` the whole job) and its `topologyConstraint`, and one Pod
//! per member joining it through the `pod-group-name` annotation (KAI's pod grouper then
//! leaves the pod alone). The pods also carry the topology annotations
//! (`kai.scheduler/topology`, `kai.scheduler/topology-required-placement` or
//! `-preferred-placement`), which the pod grouper reads from a workload's top owner.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Pod;
use serde_json::json;

use crate::job::Job;
use crate::job::Mode;
use crate::manifest_parts::{meta, pod_spec, topology_name, topology_object, value};

/// KAI's API version for `Topology`.
pub(crate) const TOPOLOGY_API_VERSION: &str = "kai.scheduler/v1alpha1";
/// KAI's API version for `PodGroup`.
pub(crate) const POD_GROUP_API_VERSION: &str = "scheduling.run.ai/v2alpha2";
/// The scheduler name KAI serves.
pub(crate) const SCHEDULER_NAME: &str = "kai-scheduler";
/// The queue label on pods and PodGroups.
pub(crate) const QUEUE_LABEL: &str = "kai.scheduler/queue";
/// Pod annotation: the PodGroup the pod belongs to.
pub(crate) const POD_GROUP_ANNOTATION: &str = "pod-group-name";
/// Annotation: the name of the KAI `Topology` the placement refers to.
pub(crate) const TOPOLOGY_ANNOTATION: &str = "kai.scheduler/topology";
/// Annotation: the pods must be inside one domain of this level (a node label).
pub(crate) const REQUIRED_PLACEMENT: &str = "kai.scheduler/topology-required-placement";
/// Annotation: the pods should be inside one domain of this level (a node label).
pub(crate) const PREFERRED_PLACEMENT: &str = "kai.scheduler/topology-preferred-placement";

/// The KAI `Topology` (cluster-scoped): the domain label, then `kubernetes.io/hostname`,
/// which KAI allows only as the lowest level.
pub(crate) fn topology(job: &Job) -> serde_json::Value {
    topology_object(job, TOPOLOGY_API_VERSION)
}

/// Appends the Topology, the PodGroup and the pods.
pub(crate) fn objects(job: &Job, out: &mut Vec<serde_json::Value>, notes: &mut Vec<String>) {
    let (level_field, annotation) = match job.mode {
        Mode::Required => ("requiredTopologyLevel", REQUIRED_PLACEMENT),
        Mode::Preferred => ("preferredTopologyLevel", PREFERRED_PLACEMENT),
    };
    let mut group_meta = meta(job, &job.name);
    group_meta
        .labels
        .get_or_insert_with(BTreeMap::new)
        .insert(QUEUE_LABEL.into(), job.queue.clone());
    out.push(topology(job));
    out.push(json!({
        "apiVersion": POD_GROUP_API_VERSION,
        "kind": "PodGroup",
        "metadata": value(&group_meta),
        "spec": {
            "minMember": job.pods,
            "queue": job.queue,
            "topologyConstraint": {
                "topology": topology_name(job),
                level_field: job.key,
            },
        },
    }));
    for i in 0..job.pods {
        let mut metadata = meta(job, &format!("{}-{i}", job.name));
        metadata
            .labels
            .get_or_insert_with(BTreeMap::new)
            .insert(QUEUE_LABEL.into(), job.queue.clone());
        metadata.annotations = Some(BTreeMap::from([
            (POD_GROUP_ANNOTATION.to_string(), job.name.clone()),
            (TOPOLOGY_ANNOTATION.to_string(), topology_name(job)),
            (annotation.to_string(), job.key.clone()),
        ]));
        let mut spec = pod_spec(job);
        spec.scheduler_name = Some(SCHEDULER_NAME.into());
        out.push(value(&Pod {
            metadata,
            spec: Some(spec),
            status: None,
        }));
    }
    notes.push(format!(
        "KAI: v0.12 or later (the kai.scheduler/v1alpha1 Topology), a Queue {:?} (scheduling.run.ai/v2), and KAI's DRA support for the pods' ResourceClaims",
        job.queue
    ));
}
