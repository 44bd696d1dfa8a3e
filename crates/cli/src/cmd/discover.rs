//! `topoalign discover`: read a node's topology from sysfs, a profile, or saved vendor
//! tool output, and print it as a readable summary, JSON or YAML; MIG instances (saved
//! `nvidia-smi` output, the live host, a planned mix or a profile's geometry) under their
//! GPU with the parent's PCIe path and closest NIC.

use std::process::ExitCode;

use topoalign_discover::Source;
use topoalign_node_facts::MigViewFlags;
use topoalign_render::WithMig;

use crate::output::{Format, print_structured, write_stdout};
use crate::source::{TopologyArgs, load, mig_overlay};

/// Arguments.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Examples:\n  topoalign discover --profile dgx-a100-mig\n  topoalign discover --profile dgx-h100 --mig-want 3g.40gb=4,1g.10gb=7 -o json"
)]
pub(crate) struct Args {
    /// Where to read the topology (default: sysfs of this host, `/`).
    #[command(flatten)]
    pub topology: TopologyArgs,
    /// MIG instances to show under their GPU (default: a built-in profile's own geometry).
    #[command(flatten)]
    pub mig: MigViewFlags,
    /// Output format.
    #[arg(short = 'o', long = "output", value_enum, default_value_t = Format::Table)]
    pub format: Format,
}

/// Runs the command.
pub(crate) fn run(args: Args) -> anyhow::Result<ExitCode> {
    let d = load(&args.topology, Source::host())?;
    let mig = mig_overlay(&args.mig, args.topology.profile.as_deref(), &d.topology)?;
    match args.format {
        Format::Table => write_stdout(&topoalign_render::render_summary_with_mig(
            &d.topology,
            &mig,
        ))?,
        f => print_structured(
            &WithMig {
                value: &d.topology,
                mig: &mig.rows(&d.topology),
            },
            f,
        )?,
    }
    Ok(ExitCode::SUCCESS)
}
