//! `topoalign draw`: the machine as SVG (laid out by topoalign, no Graphviz needed) or as
//! Graphviz DOT, to stdout or atomically to a file.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, bail};
use topoalign_discover::Source;
use topoalign_node_facts::MigViewFlags;
use topoalign_render::DrawFormat;

use crate::output::write_stdout;
use crate::source::{TopologyArgs, load, mig_overlay};

/// Arguments.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Examples:\n  topoalign draw --profile mi300x-8 -o svg --out m.svg\n  topoalign draw --profile dgx-a100-mig -o dot"
)]
pub(crate) struct Args {
    /// Where to read the topology (default: sysfs of this host, `/`).
    #[command(flatten)]
    pub topology: TopologyArgs,
    /// MIG instances to draw inside their GPU's box (default: a built-in profile's own
    /// geometry).
    #[command(flatten)]
    pub mig: MigViewFlags,
    /// Output format.
    #[arg(short = 'o', long = "output", value_enum, default_value_t = DrawFormat::Svg)]
    pub format: DrawFormat,
    /// Write to FILE (atomically: a temporary file beside it, then a rename) instead of
    /// stdout.
    #[arg(long, value_name = "FILE")]
    pub out: Option<PathBuf>,
}

/// Runs the command.
pub(crate) fn run(args: Args) -> anyhow::Result<ExitCode> {
    let d = load(&args.topology, Source::host())?;
    let mig = mig_overlay(&args.mig, args.topology.profile.as_deref(), &d.topology)?;
    let text = args.format.render_with_mig(&d.topology, &mig);
    match &args.out {
        Some(path) if path.is_dir() => bail!(
            "--out {}: is a directory, expected a file path",
            path.display()
        ),
        Some(path) => topoalign_atomic::write(path, text.as_bytes()).context("--out")?,
        None => write_stdout(&text)?,
    }
    Ok(ExitCode::SUCCESS)
}
