//! Printing in the output formats (`topoalign_render::format`), and how errors reach
//! JSON/YAML readers.

use std::io::Write;
use std::process::ExitCode;

use anyhow::Context;
use serde::Serialize;

use topoalign_probes::ReadError;
pub(crate) use topoalign_render::Format;

/// Prints `value` as JSON or YAML to stdout (the table form is each command's own).
pub(crate) fn print_structured<T: Serialize>(value: &T, format: Format) -> anyhow::Result<()> {
    let text = match format {
        Format::Json => {
            let mut s = serde_json::to_string_pretty(value).context("encoding JSON")?;
            s.push('\n');
            s
        }
        Format::Yaml => serde_saphyr::to_string(value).context("encoding YAML")?,
        Format::Table => anyhow::bail!("table output is printed by the command itself"),
    };
    write_stdout(&text)
}

/// Prints `docs` as one YAML stream (`---` between documents).
pub(crate) fn print_yaml_stream<T: Serialize>(docs: &[T]) -> anyhow::Result<()> {
    let docs = docs.iter().map(serde_saphyr::to_string);
    let docs = docs
        .collect::<Result<Vec<_>, _>>()
        .context("encoding YAML")?;
    write_stdout(&docs.join("---\n"))
}

/// Writes `text` to stdout as is.
pub(crate) fn write_stdout(text: &str) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes()).context("writing to stdout")
}

/// Prints `table` (text) or `value` (JSON/YAML).
pub(crate) fn print<T: Serialize>(
    value: &T,
    format: Format,
    table: impl FnOnce() -> String,
) -> anyhow::Result<()> {
    match format {
        Format::Table => write_stdout(&table()),
        f => print_structured(value, f),
    }
}

/// Runs a command body; with JSON or YAML output an error is also printed on stdout as
/// `{"error": "..."}`, so a reader of stdout always gets a document. The error still goes
/// to `main`, which prints it on stderr and exits 2.
pub(crate) fn with_errors(
    format: Format,
    body: impl FnOnce() -> anyhow::Result<ExitCode>,
) -> anyhow::Result<ExitCode> {
    let result = body();
    if let (Err(e), Format::Json | Format::Yaml) = (&result, format) {
        let _ = print_structured(&serde_json::json!({ "error": error_text(e) }), format);
    }
    result
}

/// The one line an error prints as: each cause of the chain after a colon, except a
/// cause whose text the line already holds (library errors that name their source in
/// their own message and also keep it as `source()` would otherwise say it twice).
pub(crate) fn error_text(e: &anyhow::Error) -> String {
    let mut line = String::new();
    for cause in e.chain() {
        let text = cause.to_string();
        if line.is_empty() {
            line = text;
        } else if !line.contains(&text) {
            line.push_str(": ");
            line.push_str(&text);
        }
    }
    line
}

/// A live read's error as the one line it always printed: what was read and the API's
/// word, or the server not reached; kube's own causes, which [`ReadError`] keeps as
/// sources, are not walked.
pub(crate) fn read_error(e: ReadError) -> anyhow::Error {
    match e {
        ReadError::Api { .. } | ReadError::Unreachable { .. } => anyhow::anyhow!("{e}"),
        e => e.into(),
    }
}

/// Prints each warning on stderr.
pub(crate) fn warn(warnings: &[String]) {
    for w in warnings {
        eprintln!("warning: {w}");
    }
}

/// Exit 0 when `ok`, else 1 (a finding, a refusal: not a usage error).
pub(crate) fn exit(ok: bool) -> ExitCode {
    if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A library error that names its source in its message and keeps it as `source()`.
    #[derive(Debug)]
    struct Io {
        path: String,
        source: std::io::Error,
    }

    impl std::fmt::Display for Io {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            write!(f, "cannot read {}: {}", self.path, self.source)
        }
    }

    impl std::error::Error for Io {
        fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
            Some(&self.source)
        }
    }

    #[test]
    fn a_cause_is_said_once() {
        let io = std::io::Error::new(std::io::ErrorKind::IsADirectory, "Is a directory");
        let e = anyhow::Error::new(Io {
            path: "/tmp".into(),
            source: io,
        })
        .context("reading the topology");
        assert_eq!(
            error_text(&e),
            "reading the topology: cannot read /tmp: Is a directory"
        );
        let plain = anyhow::anyhow!("inner").context("outer");
        assert_eq!(error_text(&plain), "outer: inner");
    }
}
