//! `topoalign demo`: on one screen, what a node's GPU+NIC pods get with the Topology
//! Manager off, with `restricted`, and with topoalign (`topoalign_fleet::demo`).

use std::process::ExitCode;
use std::sync::Arc;

use topoalign_fleet::{DemoOptions, story};

use crate::output::{Format, print, with_errors};

/// Arguments.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// The built-in profile to tell the story on.
    #[arg(long, default_value = "mi300x-8")]
    pub profile: String,
    /// Seed of the blind draws.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Show the whole `nvidia-smi topo -m` matrix with its legends.
    #[arg(long)]
    pub matrix: bool,
    /// Blind draws behind the "one NUMA node in x%" line (0 to skip).
    #[arg(long, default_value_t = 1000)]
    pub draws: u32,
    /// Output format.
    #[arg(short, long, value_enum, default_value_t = Format::Table)]
    pub output: Format,
}

/// Runs the command.
pub(crate) fn run(args: Args) -> anyhow::Result<ExitCode> {
    with_errors(args.output, || {
        let topo = topoalign_profiles::lookup(&args.profile)?;
        let options = DemoOptions {
            seed: args.seed,
            full_matrix: args.matrix,
            draws: args.draws,
        };
        let report = story(&Arc::new(topo), options)?;
        print(&report, args.output, || report.text())?;
        Ok(ExitCode::SUCCESS)
    })
}
