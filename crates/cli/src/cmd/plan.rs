//! `topoalign plan`: choose GPUs, NICs and CPUs for a pod, and explain the choice.

use std::path::PathBuf;
use std::process::ExitCode;

use topoalign_discover::Source;
use topoalign_plan::{PlanError, PlanReport, Planner, Refusal, RequestArgs};
use topoalign_plan::{read_usage, time_plan};

use crate::output::{Format, print, with_errors};
use crate::source::{TopologyArgs, load};

/// Arguments.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Examples:\n  topoalign plan --profile mi300x-8 --gpus 4 --nics-per-gpu 1\n  topoalign plan --profile gb300-4 --gpus 2 --nics-per-gpu 1 --require-rdma -o json\n\nWith no topology source the plan is for this host (--sysfs-root /)."
)]
pub(crate) struct Args {
    #[command(flatten)]
    topology: TopologyArgs,
    #[command(flatten)]
    request: RequestArgs,
    /// YAML or JSON file of devices/CPUs/memory already in use.
    #[arg(long, value_name = "FILE")]
    used: Option<PathBuf>,
    /// Also time the planner in-process over N calls, topology loaded (for the e2e `speed`
    /// scenario): adds `timing` to JSON/YAML output, a line to the table.
    #[arg(long, value_name = "N", hide = true, value_parser = clap::value_parser!(u16).range(1..))]
    time_iterations: Option<u16>,
    /// Output format.
    #[arg(short = 'o', long, value_enum, default_value_t = Format::Table)]
    output: Format,
}

/// Runs the command.
pub(crate) fn run(args: Args) -> anyhow::Result<ExitCode> {
    with_errors(args.output, || {
        let req = args.request.request()?;
        let usage = read_usage(args.used.as_deref())?;
        let topo = load(&args.topology, Source::host())?.topology;
        let timing = (args.time_iterations).map(|n| time_plan(&topo, &req, &usage, n.into()));
        // Every output names the machine it describes.
        match Planner::new(&topo).plan(&req, &usage) {
            Ok(plan) => {
                let r = PlanReport {
                    plan: &plan,
                    machine: &topo.name,
                    timing: timing.as_ref(),
                };
                print(&r, args.output, || r.table(&topo))?;
                Ok(ExitCode::SUCCESS)
            }
            Err(e @ PlanError::Unsatisfiable { .. }) => {
                let r = Refusal::new(&topo.name, &e, timing.as_ref());
                print(&r, args.output, || r.table())?;
                eprintln!("{}", r.error);
                Ok(ExitCode::from(1))
            }
            Err(e) => Err(anyhow::Error::from(e).context(match &args.used {
                Some(p) => format!("planning with usage file {}", p.display()),
                None => "planning".to_string(),
            })),
        }
    })
}
