//! `topoalign discover`: read a node's topology from sysfs, a profile, or saved vendor
//! tool output, and print it as a readable summary, JSON or YAML.

use std::process::ExitCode;

use topoalign_discover::Source;

use crate::output::{Format, print};
use crate::source::{TopologyArgs, load};

/// Arguments.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// Where to read the topology (default: sysfs of this host, `/`).
    #[command(flatten)]
    pub topology: TopologyArgs,
    /// Output format.
    #[arg(short = 'o', long = "output", value_enum, default_value_t = Format::Table)]
    pub format: Format,
}

/// Runs the command.
pub(crate) fn run(args: Args) -> anyhow::Result<ExitCode> {
    let d = load(&args.topology, Source::host())?;
    print(&d.topology, args.format, || {
        topoalign_render::render_summary(&d.topology)
    })?;
    Ok(ExitCode::SUCCESS)
}
