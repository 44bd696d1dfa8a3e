//! Surgical edits of a YAML KubeletConfiguration: only the lines of the top-level keys
//! that change are rewritten (new keys are appended), so comments and order survive.

use serde_json::Value;

/// One top-level `key: value` entry of a block-mapping YAML document.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopLevelEntry {
    /// The key, unquoted.
    pub key: String,
    /// Index of the line holding the key.
    pub first_line: usize,
    /// Index of the last line of its value (indented lines and `- ` items that follow).
    pub last_line: usize,
    /// The key line up to and including the `:` (kept verbatim when rewriting).
    pub key_prefix: String,
}

/// The parsed line layout of a YAML file.
#[derive(Debug, Clone)]
pub struct YamlLayout {
    /// The lines without their line terminators.
    pub lines: Vec<String>,
    /// `"\r\n"` when the file uses CRLF, else `"\n"`.
    pub eol: &'static str,
    /// Whether the text ends with a line terminator.
    pub final_newline: bool,
    /// The top-level entries, in file order.
    pub entries: Vec<TopLevelEntry>,
    /// The indentation unit used for nested mappings (two spaces if none is found).
    pub indent: String,
}

fn is_blank_or_comment(line: &str) -> bool {
    let t = line.trim_start();
    t.is_empty() || t.starts_with('#')
}

/// Splits a column-0 line into (key, prefix up to and including `:`), if it is `key:`.
fn parse_key_line(line: &str) -> Option<(String, String)> {
    let first = line.chars().next()?;
    let (key, after_key) = match first {
        '"' => {
            let mut escaped = false;
            let mut end = None;
            for (i, c) in line.char_indices().skip(1) {
                match c {
                    '\\' if !escaped => escaped = true,
                    '"' if !escaped => {
                        end = Some(i);
                        break;
                    }
                    _ => escaped = false,
                }
            }
            let end = end?;
            let key: String = serde_json::from_str(&line[..=end]).ok()?;
            (key, end + 1)
        }
        '\'' => {
            let bytes = line.as_bytes();
            let mut i = 1;
            let end = loop {
                if i >= bytes.len() {
                    return None;
                }
                if bytes[i] == b'\'' {
                    if bytes.get(i + 1) == Some(&b'\'') {
                        i += 2;
                        continue;
                    }
                    break i;
                }
                i += 1;
            };
            (line[1..end].replace("''", "'"), end + 1)
        }
        '{' | '[' | '&' | '*' | '!' | '|' | '>' | '%' | '@' | '`' | '?' | ',' | '#' => return None,
        _ => {
            let bytes = line.as_bytes();
            let colon = (0..bytes.len()).find(|&i| {
                bytes[i] == b':' && matches!(bytes.get(i + 1), None | Some(b' ') | Some(b'\t'))
            })?;
            (line[..colon].trim_end().to_string(), colon)
        }
    };
    let rest = &line[after_key..];
    let colon_at = after_key + rest.len() - rest.trim_start().len();
    if !line[colon_at..].starts_with(':') {
        return None;
    }
    Some((key, line[..=colon_at].to_string()))
}

/// Why a YAML KubeletConfiguration cannot be edited line by line without losing comments
/// or order (the line and what is there).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct LayoutError(pub String);

impl YamlLayout {
    /// Analyses `text`; fails (with the reason) when the layout is not a single
    /// block mapping this editor can change line by line.
    pub fn parse(text: &str) -> Result<YamlLayout, LayoutError> {
        let eol = if text.contains("\r\n") { "\r\n" } else { "\n" };
        let final_newline = text.ends_with('\n');
        let lines: Vec<String> = text
            .lines()
            .map(|l| l.strip_suffix('\r').unwrap_or(l).to_string())
            .collect();
        let mut entries: Vec<TopLevelEntry> = Vec::new();
        let mut indent: Option<String> = None;
        for (i, line) in lines.iter().enumerate() {
            if is_blank_or_comment(line) && !line.starts_with(' ') && !line.starts_with('\t') {
                continue;
            }
            if line.starts_with(' ')
                || line.starts_with('\t')
                || line.starts_with("- ")
                || line == "-"
            {
                let Some(last) = entries.last_mut() else {
                    if is_blank_or_comment(line) {
                        continue;
                    }
                    return Err(LayoutError(format!(
                        "line {}: indented content before the first key",
                        i + 1
                    )));
                };
                if !is_blank_or_comment(line) {
                    last.last_line = i;
                    let first_child = i == last.first_line + 1;
                    if indent.is_none() && first_child && !line.trim_start().starts_with('-') {
                        let ws: String = line.chars().take_while(|c| *c == ' ').collect();
                        if !ws.is_empty() {
                            indent = Some(ws);
                        }
                    }
                }
                continue;
            }
            if line.starts_with("---") && line[3..].trim_start().is_empty_or_comment() {
                if entries.is_empty() {
                    continue;
                }
                return Err(LayoutError(format!(
                    "line {}: a second YAML document starts here; expected one KubeletConfiguration",
                    i + 1
                )));
            }
            if line.starts_with('%') && entries.is_empty() {
                continue;
            }
            match parse_key_line(line) {
                Some((key, key_prefix)) => {
                    if entries.iter().any(|e| e.key == key) {
                        return Err(LayoutError(format!(
                            "line {}: duplicate top-level key `{key}`",
                            i + 1
                        )));
                    }
                    entries.push(TopLevelEntry {
                        key,
                        first_line: i,
                        last_line: i,
                        key_prefix,
                    });
                }
                None => {
                    return Err(LayoutError(format!(
                        "line {}: `{}` is not a top-level `key: value` line (flow style, document markers and complex keys are not edited)",
                        i + 1,
                        line.chars().take(40).collect::<String>()
                    )));
                }
            }
        }
        Ok(YamlLayout {
            lines,
            eol,
            final_newline,
            entries,
            indent: indent.unwrap_or_else(|| "  ".to_string()),
        })
    }

    /// Returns the text with every `(key, value)` set: existing keys have their value lines
    /// replaced in place, new keys are appended at the end.
    pub fn apply(&self, updates: &[(String, Value)]) -> String {
        let mut replaced: Vec<Option<Vec<String>>> = vec![None; self.entries.len()];
        let mut appended: Vec<String> = Vec::new();
        for (key, value) in updates {
            match self.entries.iter().position(|e| &e.key == key) {
                Some(idx) => {
                    let e = &self.entries[idx];
                    let comment = if e.first_line == e.last_line && !value.is_object() {
                        trailing_comment(&self.lines[e.first_line][e.key_prefix.len()..])
                    } else {
                        String::new()
                    };
                    let mut lines = render_entry(&e.key_prefix, value, &self.indent);
                    if let Some(first) = lines.first_mut() {
                        first.push_str(&comment);
                    }
                    replaced[idx] = Some(lines);
                }
                None => appended.extend(render_entry(
                    &format!("{}:", plain_or_quoted(key)),
                    value,
                    &self.indent,
                )),
            }
        }
        let mut out: Vec<String> = Vec::new();
        let mut i = 0;
        while i < self.lines.len() {
            if let Some(idx) = self.entries.iter().position(|e| e.first_line == i)
                && let Some(lines) = &replaced[idx]
            {
                out.extend(lines.iter().cloned());
                i = self.entries[idx].last_line + 1;
                continue;
            }
            out.push(self.lines[i].clone());
            i += 1;
        }
        let appends = !appended.is_empty();
        out.extend(appended);
        let mut text = out.join(self.eol);
        if self.final_newline || appends {
            text.push_str(self.eol);
        }
        text
    }
}

trait EmptyOrComment {
    fn is_empty_or_comment(&self) -> bool;
}

impl EmptyOrComment for str {
    fn is_empty_or_comment(&self) -> bool {
        self.is_empty() || self.starts_with('#')
    }
}

/// The ` # comment` at the end of a scalar value (outside quotes), with its leading spaces.
fn trailing_comment(value_part: &str) -> String {
    let mut quote: Option<char> = None;
    let mut prev_ws = true;
    for (i, c) in value_part.char_indices() {
        match quote {
            Some(q) if c == q => quote = None,
            Some(_) => {}
            None if c == '"' || c == '\'' => quote = Some(c),
            None if c == '#' && prev_ws => {
                let start = value_part[..i].trim_end().len();
                return value_part[start..].to_string();
            }
            None => {}
        }
        prev_ws = c == ' ' || c == '\t';
    }
    String::new()
}

const RESERVED_WORDS: [&str; 12] = [
    "true", "false", "yes", "no", "on", "off", "y", "n", "null", "~", "nan", "inf",
];

/// A string as a YAML scalar: plain when that cannot be misread, else double-quoted.
pub(crate) fn plain_or_quoted(s: &str) -> String {
    let safe = s.chars().next().is_some_and(|c| c.is_ascii_alphabetic())
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '/' | '-'))
        && !RESERVED_WORDS.contains(&s.to_ascii_lowercase().as_str());
    if safe {
        s.to_string()
    } else {
        // A JSON string is a valid YAML double-quoted scalar.
        serde_json::Value::String(s.to_string()).to_string()
    }
}

/// Renders `prefix value` (prefix is `key:`) as block YAML lines.
fn render_entry(prefix: &str, value: &Value, indent: &str) -> Vec<String> {
    match value {
        Value::Object(m) if !m.is_empty() => {
            let mut lines = vec![prefix.to_string()];
            for (k, v) in m {
                for line in render_entry(&format!("{}:", plain_or_quoted(k)), v, indent) {
                    lines.push(format!("{indent}{line}"));
                }
            }
            lines
        }
        Value::String(s) => vec![format!("{prefix} {}", plain_or_quoted(s))],
        other => vec![format!("{prefix} {other}")],
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const SAMPLE: &str = "# kubeadm config\napiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\ncpuManagerPolicy: none # was default\nkubeReserved:\n    cpu: 637m\n    memory: 1Gi\n\n# topology\ntopologyManagerPolicyOptions:\n    max-allowable-numa-nodes: \"8\"\nclusterDNS:\n- 10.96.0.10\n";

    #[test]
    fn finds_entries_and_indent() {
        let l = YamlLayout::parse(SAMPLE).unwrap();
        let keys: Vec<_> = l
            .entries
            .iter()
            .map(|e| (e.key.as_str(), e.first_line, e.last_line))
            .collect();
        assert_eq!(
            keys,
            [
                ("apiVersion", 1, 1),
                ("kind", 2, 2),
                ("cpuManagerPolicy", 3, 3),
                ("kubeReserved", 4, 6),
                ("topologyManagerPolicyOptions", 9, 10),
                ("clusterDNS", 11, 12)
            ]
        );
        assert_eq!(l.indent, "    ");
    }

    #[test]
    fn replaces_in_place_and_appends() {
        let l = YamlLayout::parse(SAMPLE).unwrap();
        let out = l.apply(&[
            ("cpuManagerPolicy".into(), json!("static")),
            (
                "topologyManagerPolicyOptions".into(),
                json!({"max-allowable-numa-nodes": "8", "prefer-closest-numa-nodes": "true"}),
            ),
            ("topologyManagerPolicy".into(), json!("single-numa-node")),
        ]);
        let expected = "# kubeadm config\napiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\ncpuManagerPolicy: static # was default\nkubeReserved:\n    cpu: 637m\n    memory: 1Gi\n\n# topology\ntopologyManagerPolicyOptions:\n    max-allowable-numa-nodes: \"8\"\n    prefer-closest-numa-nodes: \"true\"\nclusterDNS:\n- 10.96.0.10\ntopologyManagerPolicy: single-numa-node\n";
        assert_eq!(out, expected);
    }

    #[test]
    fn quoting() {
        assert_eq!(plain_or_quoted("restricted"), "restricted");
        assert_eq!(plain_or_quoted("true"), "\"true\"");
        assert_eq!(plain_or_quoted("On"), "\"On\"");
        assert_eq!(plain_or_quoted("0-1,64"), "\"0-1,64\"");
        assert_eq!(plain_or_quoted("a: b"), "\"a: b\"");
        assert_eq!(plain_or_quoted(""), "\"\"");
    }

    #[test]
    fn key_lines() {
        assert_eq!(parse_key_line("a: b"), Some(("a".into(), "a:".into())));
        assert_eq!(
            parse_key_line("\"a b\" : c"),
            Some(("a b".into(), "\"a b\" :".into()))
        );
        assert_eq!(
            parse_key_line("'it''s': c"),
            Some(("it's".into(), "'it''s':".into()))
        );
        assert_eq!(parse_key_line("url:http"), None);
        assert_eq!(trailing_comment(" \"a # b\" # c"), " # c");
        assert_eq!(trailing_comment(" a#b"), "");
    }

    #[test]
    fn refuses_unsafe_layouts() {
        assert!(YamlLayout::parse("{a: 1}\n").is_err());
        assert!(YamlLayout::parse("a: 1\n---\nb: 2\n").is_err());
        assert!(YamlLayout::parse("a: 1\na: 2\n").is_err());
        assert!(YamlLayout::parse("---\na: 1\n").is_ok());
    }

    #[test]
    fn keeps_crlf() {
        let l = YamlLayout::parse("a: 1\r\nb: 2\r\n").unwrap();
        assert_eq!(l.apply(&[("b".into(), json!("x"))]), "a: 1\r\nb: x\r\n");
    }
}
