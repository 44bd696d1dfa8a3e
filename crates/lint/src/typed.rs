//! Reading a manifest (or part of one) into its k8s-openapi type, keeping every field the
//! type refuses as a problem at its field path, so one bad field neither hides the rest of
//! the object nor loses its location.

use serde::de::DeserializeOwned;
use serde_json::Value;
use serde_path_to_error::Segment;

use crate::located::child_path;

/// A field the typed reader refused: where (field path from the document root) and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct TypeProblem {
    /// Field path, e.g. `spec.containers[0].resources.limits.cpu`.
    pub path: String,
    /// The reader's complaint, e.g. ``invalid type: boolean `true`, expected Quantity``.
    pub message: String,
}

/// At most this many refused fields are reported (and removed) per object.
const MAX_PROBLEMS: usize = 32;

/// Reads `value` (found at field path `base`) as a `T`. A refused field is reported and
/// removed, and the rest read again, so the other fields are still checked; `None` when
/// the object itself cannot be read.
pub(crate) fn read<T: DeserializeOwned>(
    value: &Value,
    base: &str,
) -> (Option<T>, Vec<TypeProblem>) {
    let mut value = value.clone();
    let mut problems = Vec::new();
    loop {
        let err = match serde_path_to_error::deserialize::<_, T>(&value) {
            Ok(t) => return (Some(t), problems),
            Err(e) => e,
        };
        let segments: Vec<&Segment> = err.path().iter().collect();
        let mut path = base.to_string();
        for s in &segments {
            path = match s {
                Segment::Seq { index } => format!("{path}[{index}]"),
                Segment::Map { key } | Segment::Enum { variant: key } => child_path(&path, key),
                Segment::Unknown => break,
            };
        }
        problems.push(TypeProblem {
            path,
            message: err.inner().to_string(),
        });
        if problems.len() >= MAX_PROBLEMS || !remove(&mut value, &segments) {
            return (None, problems);
        }
    }
}

/// Removes the node at `segments` from `value`; false when there is none (or it is the
/// root).
fn remove(value: &mut Value, segments: &[&Segment]) -> bool {
    let Some((last, parents)) = segments.split_last() else {
        return false;
    };
    let mut cur = value;
    for s in parents {
        let next = match (s, cur) {
            (Segment::Seq { index }, Value::Array(a)) => a.get_mut(*index),
            (Segment::Map { key }, Value::Object(m)) => m.get_mut(key.as_str()),
            _ => None,
        };
        match next {
            Some(n) => cur = n,
            None => return false,
        }
    }
    match (last, cur) {
        (Segment::Seq { index }, Value::Array(a)) if *index < a.len() => {
            a.remove(*index);
            true
        }
        (Segment::Map { key }, Value::Object(m)) => m.remove(key.as_str()).is_some(),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::Pod;
    use serde_json::json;

    #[test]
    fn a_refused_field_is_reported_at_its_path_and_the_rest_is_read() {
        let doc = json!({"kind": "Pod", "spec": {"containers": [{"name": "a", "resources": {
            "limits": {"cpu": true, "amd.com/gpu": 2, "memory": {"x": 1}}}}]}});
        let (pod, problems) = read::<Pod>(&doc, "");
        let paths: Vec<&str> = problems.iter().map(|p| p.path.as_str()).collect();
        assert_eq!(
            paths,
            [
                "spec.containers[0].resources.limits.cpu",
                "spec.containers[0].resources.limits.memory"
            ]
        );
        assert!(problems[0].message.contains("boolean"), "{problems:?}");
        let limits = pod.unwrap().spec.unwrap().containers[0]
            .resources
            .clone()
            .unwrap()
            .limits
            .unwrap();
        assert_eq!(limits["amd.com/gpu"].0, "2");
        assert_eq!(limits.len(), 1);
    }

    #[test]
    fn an_object_that_cannot_be_read_is_one_problem_at_its_base() {
        // The apiVersion check refuses the whole object (the error is raised above the field).
        let (pod, problems) = read::<Pod>(&json!({"apiVersion": "v2", "kind": "Pod"}), "");
        assert!(pod.is_none());
        assert_eq!(problems.len(), 1);
        assert!(problems[0].message.contains("expected v1"), "{problems:?}");
        let (none, problems) = read::<Pod>(&json!("text"), "spec.template");
        assert!(none.is_none());
        assert_eq!(problems[0].path, "spec.template");
    }
}
