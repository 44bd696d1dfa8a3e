//! Reading YAML or JSON into a typed value, with the field path of the first bad field.

use serde::de::DeserializeOwned;
use serde_path_to_error::Segment;

use crate::GangError;

/// Parses `text` (YAML or JSON; JSON is YAML) as a `T`. A syntax error, or a field of
/// the wrong type, unknown or missing, is an error naming `file` and the field path.
pub(crate) fn parse<T: DeserializeOwned>(text: &str, file: &str) -> Result<T, GangError> {
    let value: serde_json::Value =
        serde_saphyr::from_str(text).map_err(|source| GangError::Syntax {
            file: file.to_string(),
            source: Box::new(source),
        })?;
    serde_path_to_error::deserialize(value).map_err(|e| GangError::Shape {
        file: file.to_string(),
        path: field_path(e.path()),
        source: e.into_inner(),
    })
}

/// `domain.level`, `rails[2]`, `nics."0000:0c:00.0"` (keys that are not plain
/// identifiers quoted); `.` for the root.
pub(crate) fn field_path(path: &serde_path_to_error::Path) -> String {
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
        let e = parse::<T>("a: [1, x]\nm: {}\n", "f.yaml").unwrap_err();
        assert!(e.to_string().starts_with("f.yaml: a[1]: "), "{e}");
        let e = parse::<T>("a: []\nm: {\"0000:0c:00.0\": -1}\n", "f.yaml").unwrap_err();
        assert!(
            e.to_string().starts_with("f.yaml: m.\"0000:0c:00.0\": "),
            "{e}"
        );
        let e = parse::<T>("a: []\nm: {}\nb: 1\n", "f.yaml").unwrap_err();
        assert!(e.to_string().contains("unknown field `b`"), "{e}");
        let e = parse::<T>("a: [", "f.yaml").unwrap_err();
        assert!(e.to_string().starts_with("f.yaml: not YAML"), "{e}");
    }
}
