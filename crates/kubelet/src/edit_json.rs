//! Writing a changed JSON KubeletConfiguration: same key order, same indentation style.

use serde::Serialize;
use serde_json::{Map, Value};

/// The indentation unit of a pretty-printed JSON text (`"  "`, `"    "`, `"\t"`), or
/// two spaces when the text is compact (as Python's `json.dump(indent=2)` writes).
pub(crate) fn detect_indent(text: &str) -> String {
    text.lines()
        .skip(1)
        .find_map(|line| {
            let ws: String = line
                .chars()
                .take_while(|c| *c == ' ' || *c == '\t')
                .collect();
            let rest = &line[ws.len()..];
            (!ws.is_empty() && rest.starts_with('"')).then_some(ws)
        })
        .unwrap_or_else(|| "  ".to_string())
}

/// Renders `fields` as JSON in the style of `original` (indent unit, final newline).
pub(crate) fn render(
    original: &str,
    fields: &Map<String, Value>,
) -> Result<String, serde_json::Error> {
    let indent = detect_indent(original);
    let mut buf = Vec::new();
    let formatter = serde_json::ser::PrettyFormatter::with_indent(indent.as_bytes());
    let mut ser = serde_json::Serializer::with_formatter(&mut buf, formatter);
    fields.serialize(&mut ser)?;
    // serde_json only writes valid UTF-8.
    let mut text = String::from_utf8_lossy(&buf).into_owned();
    if original.ends_with('\n') {
        text.push('\n');
    }
    Ok(text)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn keeps_indent_and_newline() {
        let original = "{\n    \"b\": 1,\n    \"a\": {\"x\": true}\n}\n";
        let v: Value = serde_json::from_str(original).unwrap();
        let out = render(original, v.as_object().unwrap()).unwrap();
        assert_eq!(
            out,
            "{\n    \"b\": 1,\n    \"a\": {\n        \"x\": true\n    }\n}\n"
        );
        assert_eq!(detect_indent("{\"a\":1}"), "  ");
        assert_eq!(detect_indent("{\n\t\"a\": 1\n}"), "\t");
        let compact = render("{\"a\":1}", json!({"a": 1}).as_object().unwrap()).unwrap();
        assert_eq!(compact, "{\n  \"a\": 1\n}");
    }
}
