//! Splitting a multi-document YAML stream and parsing each document on its own, so one
//! malformed document does not hide the others.

use serde_json::Value;

/// One YAML document of a stream.
#[derive(Debug, Clone, PartialEq)]
pub struct Document {
    /// 1-based index among the non-empty documents.
    pub index: usize,
    /// 1-based line of its first content line.
    pub line: usize,
    /// 1-based line of the first line handed to the parser (the parser's line 1).
    pub body_line: usize,
    /// The parsed value, or the parser's message.
    pub value: Result<Value, String>,
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

/// The first line of a parser message, its `line N` made relative to the file.
fn one_line_message(message: &str, body_line: usize) -> String {
    let first = message.lines().next().unwrap_or("").trim();
    let first = first.strip_prefix("error: ").unwrap_or(first);
    if let Some(rest) = first.strip_prefix("line ") {
        let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
        if let Ok(n) = digits.parse::<usize>() {
            return format!("line {}{}", n + body_line - 1, &rest[digits.len()..]);
        }
    }
    first.to_string()
}

/// Splits `text` at `---` lines and parses every document that has content.
pub fn split_documents(text: &str) -> Vec<Document> {
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
            .map_err(|e| one_line_message(&e.to_string(), first_line));
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
            docs[1].value.as_ref().unwrap_err(),
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
