//! `topoalign discover`: read a node's topology from sysfs, a profile, or saved vendor
//! tool output, and print it as a readable summary, JSON or YAML.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use topoalign_discover::Source;

use crate::output::{Format, print_structured};
use crate::source::TopologyArgs;

/// Arguments.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Where to read the topology (default: sysfs of this host, `/`).
    #[command(flatten)]
    pub topology: TopologyArgs,
    /// Output format.
    #[arg(short = 'o', long = "output", value_enum, default_value_t = Format::Table)]
    pub format: Format,
}

/// The default source: this host's sysfs.
pub fn host_sysfs() -> Source {
    Source::Sysfs {
        root: PathBuf::from("/"),
        nvlink_from: None,
    }
}

/// Runs the command.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let d = args.topology.load(host_sysfs())?;
    match args.format {
        Format::Table => {
            let text = topoalign_render::summary::render(&d.topology);
            std::io::stdout()
                .lock()
                .write_all(text.as_bytes())
                .context("writing to stdout")?;
        }
        f => print_structured(&d.topology, f)?,
    }
    Ok(ExitCode::SUCCESS)
}
