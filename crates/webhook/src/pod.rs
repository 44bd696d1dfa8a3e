//! The parts of a pod the webhook reads, decoded straight from the review's bytes: its
//! metadata's namespace and annotations, and each container's name, restart policy and
//! resources. Everything else (images, env, volumes, probes) is skipped unread, which is
//! what keeps an admission cheap; a part of the wrong type is an error that names its
//! path (`spec.containers[0].resources.limits`).

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::Value;

/// A map as the webhook reads it (a few keys: no hashing).
pub(crate) type Fields = BTreeMap<String, Value>;

/// A pod, as far as the webhook reads it.
#[derive(Debug, Default, Deserialize)]
pub(crate) struct PodIn {
    #[serde(default)]
    pub(crate) metadata: Option<MetaIn>,
    #[serde(default)]
    pub(crate) spec: Option<SpecIn>,
}

/// `metadata`.
#[derive(Debug, Default, Deserialize)]
pub(crate) struct MetaIn {
    #[serde(default)]
    pub(crate) namespace: Option<String>,
    #[serde(default)]
    pub(crate) annotations: Option<Fields>,
}

/// `spec`.
#[derive(Debug, Default, Deserialize)]
pub(crate) struct SpecIn {
    #[serde(default)]
    pub(crate) containers: Option<Vec<ContainerIn>>,
    #[serde(default, rename = "initContainers")]
    pub(crate) init_containers: Option<Vec<ContainerIn>>,
}

/// One container.
#[derive(Debug, Default, Deserialize)]
pub(crate) struct ContainerIn {
    #[serde(default)]
    pub(crate) name: Option<String>,
    #[serde(default, rename = "restartPolicy")]
    pub(crate) restart_policy: Option<String>,
    #[serde(default)]
    pub(crate) resources: Option<ResourcesIn>,
}

/// `resources`.
#[derive(Debug, Default, Deserialize)]
pub(crate) struct ResourcesIn {
    #[serde(default)]
    pub(crate) limits: Option<Fields>,
    #[serde(default)]
    pub(crate) requests: Option<Fields>,
}

/// Why an object is not a pod: the path and the decoder's message.
fn not_a_pod<E: std::fmt::Display>(e: serde_path_to_error::Error<E>) -> String {
    let path = e.path().to_string();
    format!("the object is not a Pod: {path}: {}", e.into_inner())
}

/// Reads a pod from a decoded document.
pub(crate) fn from_value(pod: &Value) -> Result<PodIn, String> {
    PodIn::deserialize(pod).or_else(|_| {
        // Read again, tracking the path, only to say where it is wrong.
        serde_path_to_error::deserialize(pod).map_err(not_a_pod)
    })
}

/// Reads a pod from its JSON text.
pub(crate) fn from_str(pod: &str) -> Result<PodIn, String> {
    serde_json::from_str(pod).or_else(|_| {
        let mut de = serde_json::Deserializer::from_str(pod);
        serde_path_to_error::deserialize(&mut de).map_err(not_a_pod)
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn only_the_parts_read_are_kept_and_a_wrong_type_names_its_path() {
        let p = from_value(
            &json!({"metadata": {"name": "p", "annotations": {"a": "b"}},
            "spec": {"containers": [{"name": "c", "image": "x", "env": [{"name": "A"}],
                "resources": {"limits": {"cpu": "1"}}}], "volumes": [{}]}}),
        )
        .unwrap();
        let c = &p.spec.unwrap().containers.unwrap()[0];
        assert_eq!(c.name.as_deref(), Some("c"));
        assert!(c.resources.as_ref().unwrap().requests.is_none());
        let e = from_value(&json!({"spec": {"containers": [{"resources": {"limits": []}}]}}))
            .unwrap_err();
        assert!(
            e.starts_with("the object is not a Pod: spec.containers[0].resources.limits: "),
            "{e}"
        );
        let e = from_str("{\"spec\": {\"containers\": 3}}").unwrap_err();
        assert!(e.contains("spec.containers"), "{e}");
    }
}
