//! Output formats shared by the commands.

use std::io::Write;

use anyhow::Context;
use serde::Serialize;

/// How a command prints its result.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// Human-readable text.
    #[default]
    Table,
    /// JSON.
    Json,
    /// YAML.
    Yaml,
}

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
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes())
        .context("writing to stdout")?;
    Ok(())
}
