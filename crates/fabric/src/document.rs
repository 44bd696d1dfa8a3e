//! Reading the files an operator writes (rail files, domain files, and the gang crate's
//! job descriptions and node lists) as YAML or JSON into a typed value, with the field
//! path of the first bad field.

use serde::de::DeserializeOwned;
use serde_path_to_error::Segment;
use thiserror::Error;

/// A file that is not YAML or JSON, or whose fields do not read; the message names the
/// file and the field.
#[derive(Debug, Error)]
pub enum DocumentError {
    /// The text is not YAML or JSON at all.
    #[error("{file}: not YAML or JSON: {source}")]
    Syntax {
        /// The file (or `-`).
        file: String,
        /// The parser's error.
        #[source]
        source: Box<serde_saphyr::Error>,
    },
    /// A field with the wrong type, an unknown field or a missing one.
    #[error("{file}: {path}: {source}")]
    Shape {
        /// The file.
        file: String,
        /// The field path (`domain.level`, `nics."0000:0c:00.0"`); `.` for the root.
        path: String,
        /// The reader's complaint.
        #[source]
        source: serde_json::Error,
    },
}

/// Parses `text` (YAML or JSON; JSON is YAML) as a `T`. A syntax error, or a field of
/// the wrong type, unknown or missing, is an error naming `file` and the field path.
pub fn parse_document<T: DeserializeOwned>(text: &str, file: &str) -> Result<T, DocumentError> {
    let value: serde_json::Value =
        serde_saphyr::from_str(text).map_err(|source| DocumentError::Syntax {
            file: file.to_string(),
            source: Box::new(source),
        })?;
    serde_path_to_error::deserialize(value).map_err(|e| DocumentError::Shape {
        file: file.to_string(),
        path: field_path(e.path()),
        source: e.into_inner(),
    })
}

/// `domain.level`, `rails[2]`, `nics."0000:0c:00.0"` (keys that are not plain
/// identifiers quoted); `.` for the root.
pub fn field_path(path: &serde_path_to_error::Path) -> String {
    let mut out = String::new();
    for s in path.iter() {
        match s {
            Segment::Seq { index } => out.push_str(&format!("[{index}]")),
            Segment::Map { key } | Segment::Enum { variant: key } => out = child(&out, key),
            Segment::Unknown => out.push('?'),
        }
    }
    if out.is_empty() { ".".into() } else { out }
}

/// `parent.key`, the key quoted unless it is a plain identifier (`nics."0000:0c:00.0"`,
/// `nics.mlx5_0`); `key` alone under the root.
pub(crate) fn child(parent: &str, key: &str) -> String {
    let plain = !key.is_empty()
        && key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    let key = if plain {
        key.to_string()
    } else {
        format!("{key:?}")
    };
    if parent.is_empty() || parent == "." {
        key
    } else {
        format!("{parent}.{key}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct T {
        a: Vec<u32>,
        m: std::collections::BTreeMap<String, u32>,
    }

    #[test]
    fn names_the_bad_field() {
        let e = parse_document::<T>("a: [1, x]\nm: {}\n", "f.yaml").unwrap_err();
        assert!(e.to_string().starts_with("f.yaml: a[1]: "), "{e}");
        let e = parse_document::<T>("a: []\nm: {\"0000:0c:00.0\": -1}\n", "f.yaml").unwrap_err();
        assert!(
            e.to_string().starts_with("f.yaml: m.\"0000:0c:00.0\": "),
            "{e}"
        );
        let e = parse_document::<T>("a: []\nm: {}\nb: 1\n", "f.yaml").unwrap_err();
        assert!(e.to_string().contains("unknown field `b`"), "{e}");
        let e = parse_document::<T>("a: [", "f.yaml").unwrap_err();
        assert!(e.to_string().starts_with("f.yaml: not YAML"), "{e}");
    }
}
