//! Reading the JSON or YAML documents users hand to topoalign (manifests, node lists,
//! usage files), with the YAML parser's messages made readable.

use std::path::Path;

use serde_json::Value;
use thiserror::Error;

/// A document that cannot be read or parsed; the message names the file first.
#[derive(Debug, Error, PartialEq, Eq)]
#[error("{path}: {reason}")]
pub struct DocumentError {
    /// The file, as given.
    pub path: String,
    /// What is wrong (`cannot read: …`, `invalid JSON: …`, `invalid YAML: …`).
    pub reason: String,
}

/// The YAML parser's message for people: one line, with its location, without the
/// library's own advice (such as which function to call for several documents).
pub fn yaml_error(e: &serde_saphyr::Error) -> String {
    let text = e.without_snippet().to_string();
    let first = text.lines().next().unwrap_or("").trim();
    let first = first.strip_prefix("error: ").unwrap_or(first);
    first.replace(
        "multiple YAML documents detected; use from_str_multiple or from_str_multiple_with_options",
        "more than one YAML document (`---`); expected exactly one",
    )
}

/// Reads a JSON or YAML document (JSON when the name ends in `.json` or the text starts
/// with `{`).
pub fn read_document(path: &Path) -> Result<Value, DocumentError> {
    let name = path.display().to_string();
    let err = |reason: String| DocumentError {
        path: name.clone(),
        reason,
    };
    let text = std::fs::read_to_string(path).map_err(|e| err(format!("cannot read: {e}")))?;
    let is_json =
        path.extension().is_some_and(|e| e == "json") || text.trim_start().starts_with('{');
    if is_json {
        serde_json::from_str(&text).map_err(|e| err(format!("invalid JSON: {e}")))
    } else {
        serde_saphyr::from_str(&text).map_err(|e| err(format!("invalid YAML: {}", yaml_error(&e))))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(suffix: &str, text: &str) -> tempfile::NamedTempFile {
        let f = tempfile::Builder::new().suffix(suffix).tempfile().unwrap();
        std::fs::write(f.path(), text).unwrap();
        f
    }

    #[test]
    fn json_and_yaml_are_read_by_name_or_first_character() {
        let y = file(".yaml", "a: 1\n");
        assert_eq!(
            read_document(y.path()).unwrap(),
            serde_json::json!({"a": 1})
        );
        let j = file(".txt", "{\"a\": [1]}");
        assert_eq!(
            read_document(j.path()).unwrap(),
            serde_json::json!({"a": [1]})
        );
    }

    #[test]
    fn errors_name_the_file_and_the_problem() {
        let p = Path::new("/nonexistent/x.yaml");
        let e = read_document(p).unwrap_err().to_string();
        assert!(e.starts_with("/nonexistent/x.yaml: cannot read: "), "{e}");
        let bad = file(".json", "{");
        let e = read_document(bad.path()).unwrap_err();
        assert!(e.reason.starts_with("invalid JSON: "), "{e}");
        let two = file(".yaml", "a: 1\n---\nb: 2\n");
        let e = read_document(two.path()).unwrap_err();
        assert!(e.reason.contains("expected exactly one"), "{e}");
        assert!(!e.reason.contains("from_str_multiple"), "{e}");
    }
}
