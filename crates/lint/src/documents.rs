//! Splitting a multi-document YAML stream and parsing each document on its own, so one
//! malformed document does not hide the others.

use serde_json::Value;

use crate::located::Lines;

/// One YAML document of a stream.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Document {
    /// 1-based index among the non-empty documents.
    pub index: usize,
    /// 1-based line of its first content line.
    pub line: usize,
    /// 1-based line of the first line handed to the parser (the parser's line 1).
    pub body_line: usize,
    /// The parsed value, or why the YAML parser refused it.
    pub value: Result<Value, SyntaxError>,
    /// Where each field is.
    pub lines: Lines,
}

fn is_separator(line: &str) -> bool {
    let line = line.trim_end_matches('\r');
    match line.strip_prefix("---") {
        Some(rest) => rest.is_empty() || rest.starts_with(' ') || rest.starts_with('\t'),
        None => false,
    }
}

fn has_content(lines: &[&str]) -> bool {
    lines.iter().any(|l| {
        let t = l.trim();
        !t.is_empty() && !t.starts_with('#') && t != "..."
    })
}

/// Why a document is not valid YAML: the parser's message, its location counted in lines
/// of the whole file.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub(crate) struct SyntaxError(pub String);

/// The parser's message, first line only, prefixed with the file line of the parser's own
/// location (not a line number recovered from the text).
fn parser_message(e: &serde_saphyr::Error, body_line: usize) -> String {
    let first = topoalign_kube_types::yaml_error(e);
    let first = first.as_str();
    // Drop the parser's own "line N column M: " prefix; the location below replaces it.
    let first = match first.split_once(": ") {
        Some((head, rest)) if head.starts_with("line ") => rest,
        _ => first,
    };
    // ... and its " at line N, column M" suffix, counted from the document's start.
    let first = match first.rfind(" at line ") {
        Some(cut) => &first[..cut],
        None => first,
    };
    match e.location().filter(|l| l.line() > 0) {
        Some(l) => format!(
            "line {} column {}: {first}",
            l.line() as usize + body_line - 1,
            l.column()
        ),
        None => first.to_string(),
    }
}

/// Splits `text` at `---` lines and parses every document that has content.
pub(crate) fn split_documents(text: &str) -> Vec<Document> {
    // (1-based line of the chunk's first line, its lines)
    let mut chunks: Vec<(usize, Vec<&str>)> = vec![(1, Vec::new())];
    for (i, line) in text.lines().enumerate() {
        if is_separator(line) {
            // Content after `--- ` on the same line belongs to the new document.
            let rest = line.trim_end_matches('\r')[3..].trim_start();
            if rest.is_empty() || rest.starts_with('#') {
                chunks.push((i + 2, Vec::new()));
            } else {
                chunks.push((i + 1, vec![rest]));
            }
        } else if let Some((_, chunk)) = chunks.last_mut() {
            chunk.push(line);
        }
    }
    let mut out = Vec::new();
    for (first_line, chunk) in chunks {
        if !has_content(&chunk) {
            continue;
        }
        let body = chunk.join("\n");
        let value = serde_saphyr::from_str::<Value>(&body)
            .map_err(|e| SyntaxError(parser_message(&e, first_line)));
        let lines = if value.is_ok() {
            Lines::of(&body, first_line)
        } else {
            Lines::default()
        };
        let offset = chunk
            .iter()
            .position(|l| {
                let t = l.trim();
                !t.is_empty() && !t.starts_with('#')
            })
            .unwrap_or(0);
        out.push(Document {
            index: out.len() + 1,
            line: first_line + offset,
            body_line: first_line,
            value,
            lines,
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_and_parses_each_document() {
        let text = "# header\n---\nkind: Pod\nmetadata: {name: a}\n---\n---\nkind: [oops\n--- # c\nkind: Job\n";
        let docs = split_documents(text);
        assert_eq!(docs.len(), 3);
        assert_eq!(docs[0].value.as_ref().unwrap()["kind"], "Pod");
        assert_eq!(
            docs[1].value.as_ref().unwrap_err().0,
            "line 7 column 7: unclosed bracket '['"
        );
        assert_eq!(docs[2].value.as_ref().unwrap()["kind"], "Job");
        assert_eq!(docs.iter().map(|d| d.line).collect::<Vec<_>>(), [3, 7, 9]);
    }

    #[test]
    fn single_document_without_separator() {
        let docs = split_documents("\nkind: Pod\n");
        assert_eq!(docs.len(), 1);
        assert_eq!(docs[0].line, 2);
    }
}
