//! The pieces every dialect writer shares: the gang label, object metadata, the pod spec
//! and template holding the gang's claim, the Kueue/KAI `Topology` object, and the
//! serialization of typed objects. The dispatcher over the dialects is `crate::manifest`.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    Container, PodResourceClaim, PodSpec, PodTemplateSpec, ResourceClaim as ContainerClaim,
    ResourceRequirements,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::Serialize;

use topoalign_fabric::Level;

use crate::claim::{POD_CLAIM_NAME, template_name};
use crate::job::Job;

/// The label every object of a gang carries: `topoalign.dev/gang: <job>`.
pub(crate) const GANG_LABEL: &str = "topoalign.dev/gang";

/// Object metadata with the job's namespace and the gang label.
pub(crate) fn meta(job: &Job, name: &str) -> ObjectMeta {
    ObjectMeta {
        name: Some(name.to_string()),
        namespace: job.namespace.clone(),
        labels: Some(BTreeMap::from([(GANG_LABEL.to_string(), job.name.clone())])),
        ..Default::default()
    }
}

/// The pod spec every pod of the gang runs: one container holding the claim.
pub(crate) fn pod_spec(job: &Job) -> PodSpec {
    PodSpec {
        containers: vec![Container {
            name: "worker".into(),
            image: Some(job.image.clone()),
            command: job.command.clone(),
            resources: Some(ResourceRequirements {
                claims: Some(vec![ContainerClaim {
                    name: POD_CLAIM_NAME.into(),
                    ..Default::default()
                }]),
                ..Default::default()
            }),
            ..Default::default()
        }],
        resource_claims: Some(vec![PodResourceClaim {
            name: POD_CLAIM_NAME.into(),
            resource_claim_template_name: Some(template_name(job)),
            ..Default::default()
        }]),
        restart_policy: Some("Never".into()),
        ..Default::default()
    }
}

/// A pod template with the gang label and `annotations`.
pub(crate) fn pod_template(job: &Job, annotations: BTreeMap<String, String>) -> PodTemplateSpec {
    PodTemplateSpec {
        metadata: Some(ObjectMeta {
            labels: Some(BTreeMap::from([(GANG_LABEL.to_string(), job.name.clone())])),
            annotations: (!annotations.is_empty()).then_some(annotations),
            ..Default::default()
        }),
        spec: Some(pod_spec(job)),
    }
}

/// The name of the `Topology` object the Kueue and KAI dialects write: `topoalign-<level>`.
pub(crate) fn topology_name(job: &Job) -> String {
    format!("topoalign-{}", job.level)
}

/// A `Topology` of `api_version` (Kueue's and KAI's have the same shape): the domain
/// label, then `kubernetes.io/hostname`, which both allow only as the lowest level.
pub(crate) fn topology_object(job: &Job, api_version: &str) -> serde_json::Value {
    let mut levels = vec![serde_json::json!({"nodeLabel": job.key})];
    let hostname = Level::Node.key();
    if job.key != hostname {
        levels.push(serde_json::json!({"nodeLabel": hostname}));
    }
    serde_json::json!({
        "apiVersion": api_version,
        "kind": "Topology",
        "metadata": {"name": topology_name(job)},
        "spec": {"levels": levels},
    })
}

/// Serializes a typed object.
pub(crate) fn value<T: Serialize>(object: &T) -> serde_json::Value {
    // The k8s-openapi types and serde_json::Value serialize without failure.
    serde_json::to_value(object).unwrap_or(serde_json::Value::Null)
}
