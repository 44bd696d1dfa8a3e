//! ResourceSlices read from a file someone saved (`kubectl get resourceslices -o yaml`,
//! a JSON array, a YAML stream), with the DeviceClasses saved beside them
//! (`kubectl get resourceslices,deviceclasses -o yaml`): every document is checked to be
//! a `resource.k8s.io/v1` ResourceSlice or DeviceClass, and errors name the file and the
//! object's position.

use std::io::Read;
use std::path::PathBuf;

use k8s_openapi::api::resource::v1::{DeviceClass, ResourceSlice};
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
        "{file}: object {index} has kind {kind:?}, expected ResourceSlice or DeviceClass (resource.k8s.io/v1)"
    )]
    WrongKind {
        /// The file.
        file: String,
        /// 1-based position among the objects.
        index: usize,
        /// The kind it has (empty when it has none).
        kind: String,
    },
    /// A ResourceSlice or DeviceClass whose fields do not match the API.
    #[error("{file}: object {index} is not a valid resource.k8s.io/v1 {kind}")]
    Invalid {
        /// The file.
        file: String,
        /// 1-based position among the objects.
        index: usize,
        /// `ResourceSlice` or `DeviceClass`.
        kind: &'static str,
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
    /// One slice name in two files with different content (two saves of a cluster at
    /// different times, or two clusters).
    #[error(
        "ResourceSlice {slice:?} is in {first} and in {second} with different content: give one save of the cluster"
    )]
    Conflict {
        /// The slice's name.
        slice: String,
        /// The file read first.
        first: String,
        /// The file that disagrees.
        second: String,
    },
    /// `-` (stdin) named twice among the files.
    #[error("--from-slices: `-` (stdin) given twice")]
    StdinTwice,
    /// Standard input cannot be read.
    #[error("reading slices from stdin")]
    Stdin(#[source] std::io::Error),
    /// A file cannot be read.
    #[error("reading {}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
}

/// What a slices file holds.
#[derive(Debug, Clone, Default)]
pub struct SliceFile {
    /// The ResourceSlices, in file order.
    pub slices: Vec<ResourceSlice>,
    /// The DeviceClasses saved beside them, in file order.
    pub classes: Vec<DeviceClass>,
}

impl SliceFile {
    /// Adds what `other` (read from `file`) holds: a slice already read (by name) is
    /// kept once when both are equal and refused when they differ; classes already read
    /// are kept once. `seen` remembers which file each slice came from.
    pub fn merge(
        &mut self,
        other: SliceFile,
        file: &str,
        seen: &mut Vec<(String, String)>,
    ) -> Result<(), SliceFileError> {
        for s in other.slices {
            let name = s.metadata.name.clone().unwrap_or_default();
            let earlier = (!name.is_empty())
                .then(|| {
                    self.slices
                        .iter()
                        .position(|o| o.metadata.name.as_deref() == Some(&name))
                })
                .flatten();
            match earlier {
                Some(i) if self.slices[i] == s => {}
                Some(_) => {
                    let first = (seen.iter().find(|(n, _)| *n == name))
                        .map_or_else(String::new, |(_, f)| f.clone());
                    return Err(SliceFileError::Conflict {
                        slice: name,
                        first,
                        second: file.to_string(),
                    });
                }
                None => {
                    seen.push((name, file.to_string()));
                    self.slices.push(s);
                }
            }
        }
        for c in other.classes {
            if !self
                .classes
                .iter()
                .any(|o| o.metadata.name == c.metadata.name)
            {
                self.classes.push(c);
            }
        }
        Ok(())
    }
}

/// Reads and merges the saved files `paths` ([`SliceFile::merge`]); `-` is `stdin`, at
/// most once, named `stdin` in errors.
pub fn read_slice_files(
    paths: &[PathBuf],
    stdin: &mut dyn Read,
) -> Result<SliceFile, SliceFileError> {
    let mut all = SliceFile::default();
    let mut seen = Vec::new();
    if paths.iter().filter(|p| p.as_os_str() == "-").count() > 1 {
        return Err(SliceFileError::StdinTwice);
    }
    for p in paths {
        let (text, name) = if p.as_os_str() == "-" {
            let mut t = String::new();
            stdin
                .read_to_string(&mut t)
                .map_err(SliceFileError::Stdin)?;
            (t, "stdin".to_string())
        } else {
            let t = std::fs::read_to_string(p).map_err(|source| SliceFileError::Read {
                path: p.clone(),
                source,
            })?;
            (t, p.display().to_string())
        };
        all.merge(parse_slice_file(&text, &name)?, &name, &mut seen)?;
    }
    Ok(all)
}

/// Parses `text` (the content of `file`): a YAML stream, a `kind: *List`, a JSON object
/// or a JSON array of ResourceSlices. At least one slice is required; DeviceClasses are
/// skipped (read them with [`parse_slice_file`]).
#[cfg(test)]
pub(crate) fn parse_slices(text: &str, file: &str) -> Result<Vec<ResourceSlice>, SliceFileError> {
    parse_slice_file(text, file).map(|f| f.slices)
}

/// Parses `text` (the content of `file`) like `parse_slices`, keeping the DeviceClasses.
pub fn parse_slice_file(text: &str, file: &str) -> Result<SliceFile, SliceFileError> {
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
    let mut out = SliceFile::default();
    for (i, item) in items.into_iter().enumerate() {
        let kind = item.get("kind").and_then(Value::as_str).unwrap_or("");
        let invalid = |kind, source| SliceFileError::Invalid {
            file: file.to_string(),
            index: i + 1,
            kind,
            source,
        };
        match kind {
            "ResourceSlice" => out
                .slices
                .push(serde_json::from_value(item).map_err(|e| invalid("ResourceSlice", e))?),
            "DeviceClass" => out
                .classes
                .push(serde_json::from_value(item).map_err(|e| invalid("DeviceClass", e))?),
            _ => {
                return Err(SliceFileError::WrongKind {
                    file: file.to_string(),
                    index: i + 1,
                    kind: kind.to_string(),
                });
            }
        }
    }
    if out.slices.is_empty() {
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
            "pods.yaml: object 1 has kind \"Pod\", expected ResourceSlice or DeviceClass (resource.k8s.io/v1)"
        );
        let bad = r#"{"kind": "ResourceSlice", "spec": 3}"#;
        let e = parse_slices(bad, "f.json").unwrap_err();
        assert!(matches!(e, SliceFileError::Invalid { index: 1, .. }), "{e}");
        let e = parse_slices("", "empty.yaml").unwrap_err();
        assert_eq!(e.to_string(), "empty.yaml: no ResourceSlice found");
        let e = parse_slices("a: [", "broken.yaml").unwrap_err();
        assert!(matches!(e, SliceFileError::Syntax { .. }), "{e}");
        let e = parse_slices(
            &format!("{SLICE}\n---\nkind: DeviceClass\nspec: 3\n"),
            "c.yaml",
        );
        assert_eq!(
            e.unwrap_err().to_string(),
            "c.yaml: object 2 is not a valid resource.k8s.io/v1 DeviceClass"
        );
    }

    #[test]
    fn files_merge_and_a_slice_that_differs_is_refused() {
        let other = SLICE.replace("\"name\": \"s\"", "\"name\": \"t\"");
        let mut all = SliceFile::default();
        let mut seen = Vec::new();
        all.merge(
            parse_slice_file(SLICE, "gpu.yaml").unwrap(),
            "gpu.yaml",
            &mut seen,
        )
        .unwrap();
        all.merge(
            parse_slice_file(&other, "nic.yaml").unwrap(),
            "nic.yaml",
            &mut seen,
        )
        .unwrap();
        // The same save twice is one.
        all.merge(
            parse_slice_file(SLICE, "again.yaml").unwrap(),
            "again.yaml",
            &mut seen,
        )
        .unwrap();
        assert_eq!(all.slices.len(), 2);
        let changed = SLICE.replace("\"generation\": 1", "\"generation\": 2");
        let e = all
            .merge(
                parse_slice_file(&changed, "late.yaml").unwrap(),
                "late.yaml",
                &mut seen,
            )
            .unwrap_err();
        assert_eq!(
            e.to_string(),
            "ResourceSlice \"s\" is in gpu.yaml and in late.yaml with different content: give one save of the cluster"
        );
    }

    #[test]
    fn device_classes_beside_the_slices_are_kept() {
        let class = r#"{"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass",
            "metadata": {"name": "dranet.net"},
            "spec": {"selectors": [{"cel": {"expression": "device.driver == \"dra.net\""}}]}}"#;
        let f = parse_slice_file(&format!("[{SLICE}, {class}]"), "f").unwrap();
        assert_eq!((f.slices.len(), f.classes.len()), (1, 1));
        assert_eq!(f.classes[0].metadata.name.as_deref(), Some("dranet.net"));
        assert_eq!(
            parse_slices(&format!("[{class}, {SLICE}]"), "f")
                .unwrap()
                .len(),
            1
        );
        let e = parse_slices(&format!("[{class}]"), "only-classes.yaml").unwrap_err();
        assert_eq!(e.to_string(), "only-classes.yaml: no ResourceSlice found");
    }

    #[test]
    fn files_and_stdin_are_read_and_merged_and_each_is_named() {
        let fixture = |f: &str| {
            PathBuf::from(env!("CARGO_MANIFEST_DIR"))
                .join("tests/fixtures/vendor")
                .join(f)
        };
        let gpu = fixture("nvidia-v05-dranet-h100.yaml");
        let alone = read_slice_files(std::slice::from_ref(&gpu), &mut &b""[..]).unwrap();
        let mut stdin = SLICE.as_bytes();
        let paths = [
            gpu.clone(),
            PathBuf::from("-"),
            gpu,
            fixture("dra-cpu.yaml"),
        ];
        let all = read_slice_files(&paths, &mut stdin).unwrap();
        assert!(
            all.slices.len() > alone.slices.len() + 1,
            "stdin's and the CPU file's"
        );
        assert_eq!(
            all.classes.len(),
            alone.classes.len(),
            "a file's classes kept once"
        );
        let twice = [PathBuf::from("-"), PathBuf::from("-")];
        let e = read_slice_files(&twice, &mut &b""[..]).unwrap_err();
        assert!(matches!(e, SliceFileError::StdinTwice), "{e:?}");
        let e = read_slice_files(&[PathBuf::from("-")], &mut &b""[..]).unwrap_err();
        assert_eq!(e.to_string(), "stdin: no ResourceSlice found");
        let gone = PathBuf::from("/nonexistent/gone.yaml");
        let e = read_slice_files(&[gone], &mut &b""[..]).unwrap_err();
        assert_eq!(e.to_string(), "reading /nonexistent/gone.yaml");
        assert!(
            std::error::Error::source(&e).is_some(),
            "the io error is kept"
        );
    }
}
