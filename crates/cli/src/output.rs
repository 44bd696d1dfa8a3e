//! Printing in the output formats (`topoalign_render::format`), and how errors reach
//! JSON/YAML readers.

use std::io::Write;
use std::process::ExitCode;

use anyhow::Context;
use serde::Serialize;

pub use topoalign_render::format::Format;

/// Prints `value` as JSON or YAML to stdout (the table form is each command's own).
pub fn print_structured<T: Serialize>(value: &T, format: Format) -> anyhow::Result<()> {
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
pub fn print_yaml_stream<T: Serialize>(docs: &[T]) -> anyhow::Result<()> {
    let docs = docs.iter().map(serde_saphyr::to_string);
    let docs = docs
        .collect::<Result<Vec<_>, _>>()
        .context("encoding YAML")?;
    write_stdout(&docs.join("---\n"))
}

/// Writes `text` to stdout as is.
pub fn write_stdout(text: &str) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes()).context("writing to stdout")
}

/// Prints `table` (text) or `value` (JSON/YAML).
pub fn print<T: Serialize>(
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
pub fn with_errors(
    format: Format,
    body: impl FnOnce() -> anyhow::Result<ExitCode>,
) -> anyhow::Result<ExitCode> {
    let result = body();
    if let (Err(e), Format::Json | Format::Yaml) = (&result, format) {
        let _ = print_structured(&serde_json::json!({ "error": format!("{e:#}") }), format);
    }
    result
}

/// Prints each warning on stderr.
pub fn warn(warnings: &[String]) {
    for w in warnings {
        eprintln!("warning: {w}");
    }
}

/// Exit 0 when `ok`, else 1 (a finding, a refusal: not a usage error).
pub fn exit(ok: bool) -> ExitCode {
    if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}
