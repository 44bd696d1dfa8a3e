//! `topoalign draw`: the machine as SVG (laid out by topoalign, no Graphviz needed) or as
//! Graphviz DOT, to stdout or atomically to a file.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, bail};

use crate::cmd::discover::host_sysfs;
use crate::output::write_stdout;
use crate::source::TopologyArgs;

/// Drawing formats.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum DrawFormat {
    /// Standalone SVG.
    #[default]
    Svg,
    /// Graphviz DOT text.
    Dot,
}

/// Arguments.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Where to read the topology (default: sysfs of this host, `/`).
    #[command(flatten)]
    pub topology: TopologyArgs,
    /// Output format.
    #[arg(short = 'o', long = "output", value_enum, default_value_t = DrawFormat::Svg)]
    pub format: DrawFormat,
    /// Write to FILE (atomically: a temporary file beside it, then a rename) instead of
    /// stdout.
    #[arg(long, value_name = "FILE")]
    pub out: Option<PathBuf>,
}

/// Runs the command.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let d = args.topology.load(host_sysfs())?;
    let text = match args.format {
        DrawFormat::Svg => topoalign_render::svg::render(&d.topology),
        DrawFormat::Dot => topoalign_render::dot::render(&d.topology),
    };
    match &args.out {
        Some(path) => {
            if path.is_dir() {
                bail!(
                    "--out {}: is a directory, expected a file path",
                    path.display()
                );
            }
            topoalign_atomic::write(path, text.as_bytes()).context("--out")?
        }
        None => write_stdout(&text)?,
    }
    Ok(ExitCode::SUCCESS)
}
