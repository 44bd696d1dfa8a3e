//! ResourceSlices read from a file someone saved (`kubectl get resourceslices -o yaml`,
//! a JSON array, a YAML stream): every document is checked to be a `resource.k8s.io/v1`
//! ResourceSlice, and errors name the file and the object's position.

use k8s_openapi::api::resource::v1::ResourceSlice;
use serde_json::Value;
use thiserror::Error;

/// Why a slices file cannot be used.
#[derive(Debug, Error)]
pub enum SliceFileError {
    /// The text is neither YAML nor JSON.
    #[error("{file}: not YAML or JSON")]
    Syntax {
        /// The file, as the user named it.
        file: String,
        /// The parser's complaint.
        #[source]
        source: Box<serde_saphyr::Error>,
    },
    /// An object that is not a ResourceSlice.
    #[error(
        "{file}: object {index} has kind {kind:?}, expected ResourceSlice (resource.k8s.io/v1)"
    )]
    WrongKind {
        /// The file.
        file: String,
        /// 1-based position among the objects.
        index: usize,
        /// The kind it has (empty when it has none).
        kind: String,
    },
    /// A ResourceSlice whose fields do not match the API.
    #[error("{file}: object {index} is not a valid resource.k8s.io/v1 ResourceSlice")]
    Invalid {
        /// The file.
        file: String,
        /// 1-based position among the objects.
        index: usize,
        /// What did not match.
        #[source]
        source: serde_json::Error,
    },
    /// No object at all.
    #[error("{file}: no ResourceSlice found")]
    Empty {
        /// The file.
        file: String,
    },
}

/// Parses `text` (the content of `file`): a YAML stream, a `kind: *List`, a JSON object
/// or a JSON array of ResourceSlices. At least one slice is required.
pub fn parse_slices(text: &str, file: &str) -> Result<Vec<ResourceSlice>, SliceFileError> {
    let docs: Vec<Value> =
        serde_saphyr::from_multiple(text).map_err(|source| SliceFileError::Syntax {
            file: file.to_string(),
            source: Box::new(source),
        })?;
    let mut items = Vec::new();
    for d in docs {
        match d {
            Value::Null => {}
            Value::Array(a) => items.extend(a),
            Value::Object(ref o)
                if o.get("kind")
                    .and_then(Value::as_str)
                    .is_some_and(|k| k.ends_with("List")) =>
            {
                items.extend(
                    o.get("items")
                        .and_then(Value::as_array)
                        .cloned()
                        .unwrap_or_default(),
                );
            }
            other => items.push(other),
        }
    }
    let mut out = Vec::new();
    for (i, item) in items.into_iter().enumerate() {
        let kind = item.get("kind").and_then(Value::as_str).unwrap_or("");
        if kind != "ResourceSlice" {
            return Err(SliceFileError::WrongKind {
                file: file.to_string(),
                index: i + 1,
                kind: kind.to_string(),
            });
        }
        let s: ResourceSlice =
            serde_json::from_value(item).map_err(|source| SliceFileError::Invalid {
                file: file.to_string(),
                index: i + 1,
                source,
            })?;
        out.push(s);
    }
    if out.is_empty() {
        return Err(SliceFileError::Empty {
            file: file.to_string(),
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    const SLICE: &str = r#"{"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
        "metadata": {"name": "s"},
        "spec": {"driver": "d", "pool": {"name": "p", "generation": 1, "resourceSliceCount": 1},
                 "nodeName": "n", "devices": []}}"#;

    #[test]
    fn reads_an_object_an_array_a_list_and_a_stream() {
        assert_eq!(parse_slices(SLICE, "f").unwrap().len(), 1);
        assert_eq!(
            parse_slices(&format!("[{SLICE}, {SLICE}]"), "f")
                .unwrap()
                .len(),
            2
        );
        let list = format!(r#"{{"kind": "ResourceSliceList", "items": [{SLICE}]}}"#);
        assert_eq!(parse_slices(&list, "f").unwrap().len(), 1);
        let stream = format!("{SLICE}\n---\n{SLICE}\n");
        assert_eq!(parse_slices(&stream, "f").unwrap().len(), 2);
    }

    #[test]
    fn errors_name_the_file_and_the_object() {
        let e = parse_slices("kind: Pod\n", "pods.yaml").unwrap_err();
        assert_eq!(
            e.to_string(),
            "pods.yaml: object 1 has kind \"Pod\", expected ResourceSlice (resource.k8s.io/v1)"
        );
        let bad = r#"{"kind": "ResourceSlice", "spec": 3}"#;
        let e = parse_slices(bad, "f.json").unwrap_err();
        assert!(matches!(e, SliceFileError::Invalid { index: 1, .. }), "{e}");
        let e = parse_slices("", "empty.yaml").unwrap_err();
        assert_eq!(e.to_string(), "empty.yaml: no ResourceSlice found");
        let e = parse_slices("a: [", "broken.yaml").unwrap_err();
        assert!(matches!(e, SliceFileError::Syntax { .. }), "{e}");
    }
}
