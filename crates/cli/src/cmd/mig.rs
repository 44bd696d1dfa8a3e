//! `topoalign mig plan`: the MIG geometry for a request mix on a node or a fleet, with
//! explicit placements (`nvidia-smi mig` commands) or as a mig-parted config.

use std::process::ExitCode;

use topoalign_mig::{MigFormat, PlanArgs, mig_parted};

use crate::output::{exit, print, with_errors, write_stdout};

/// Arguments.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Examples:\n  topoalign mig plan --model h100-80gb --gpus 2 --want 3g.40gb=2,1g.10gb=4\n  topoalign mig plan --model a100-40gb --gpus 8 --nodes 100 --want 7g.40gb=200,3g.20gb=400 -o json\n  topoalign mig plan --model gb300 --gpus 4 --want 4g.139gb=4,3g.139gb=4 -o mig-parted"
)]
pub(crate) struct Args {
    /// What to do.
    #[command(subcommand)]
    pub action: Action,
}

/// The mig subcommands.
#[derive(Debug, clap::Subcommand)]
pub(crate) enum Action {
    /// Plan the GPU instances of a request mix on N GPUs (a node) or a fleet of nodes:
    /// valid placements, one GPU filled before the next, 4g@0 / 3g@4 kept reachable; what
    /// cannot be placed is named with the reason (exit 1).
    Plan(PlanArgs),
}

/// Runs the command.
pub(crate) fn run(args: Args) -> anyhow::Result<ExitCode> {
    match args.action {
        Action::Plan(a) => run_plan(&a),
    }
}

fn run_plan(a: &PlanArgs) -> anyhow::Result<ExitCode> {
    with_errors(a.output.format(), || {
        let p = a.plan()?;
        if a.output == MigFormat::MigParted {
            write_stdout(&mig_parted(&p, &a.config_name))?;
            for r in &p.reasons {
                eprintln!("unplaced: {r}");
            }
        } else {
            print(&p, a.output.format(), || p.table())?;
        }
        Ok(exit(p.complete()))
    })
}
