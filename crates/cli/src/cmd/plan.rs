//! `topoalign plan`: choose GPUs, NICs and CPUs for a pod, and explain the choice.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use topoalign_discover::Source;
use topoalign_plan::RequestArgs;
use topoalign_plan::{PlanError, Planner, Usage};
use topoalign_plan::{PlanTiming, time_plan};

use crate::output::{Format, print, print_structured, with_errors, write_stdout};
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
        let timing = args
            .time_iterations
            .map(|n| time_plan(&topo, &req, &usage, usize::from(n)));
        // Every output names the machine it describes.
        match Planner::new(&topo).plan(&req, &usage) {
            Ok(plan) => {
                let mut value = serde_json::to_value(&plan).context("encoding the plan")?;
                if let Some(o) = value.as_object_mut() {
                    o.insert("machine".into(), topo.name.clone().into());
                    if let Some(t) = &timing {
                        o.insert("timing".into(), serde_json::to_value(t)?);
                    }
                }
                print(&value, args.output, || {
                    let table = format!("Machine:    {}\n{}", topo.name, plan.table(&topo));
                    with_timing(table, timing.as_ref())
                })
                .map(|()| ExitCode::SUCCESS)
            }
            Err(e @ PlanError::Unsatisfiable { .. }) => {
                let message = format!("on `{}`: {e}", topo.name);
                if args.output != Format::Table {
                    let mut value = serde_json::json!({"machine": topo.name, "error": message, "unsatisfiable": true});
                    if let (Some(t), Some(o)) = (&timing, value.as_object_mut()) {
                        o.insert("timing".into(), serde_json::to_value(t)?);
                    }
                    print_structured(&value, args.output)?;
                } else if timing.is_some() {
                    write_stdout(&with_timing(String::new(), timing.as_ref()))?;
                }
                eprintln!("{message}");
                Ok(ExitCode::from(1))
            }
            Err(e) => Err(anyhow::Error::from(e).context(match &args.used {
                Some(p) => format!("planning with usage file {}", p.display()),
                None => "planning".to_string(),
            })),
        }
    })
}

/// `text` with the `--time-iterations` line after it, if any.
fn with_timing(mut text: String, timing: Option<&PlanTiming>) -> String {
    if let Some(t) = timing {
        if !text.is_empty() && !text.ends_with('\n') {
            text.push('\n');
        }
        text.push_str(&t.text());
        text.push('\n');
    }
    text
}

/// Reads a `--used` file (JSON or YAML) naming the devices already taken; none means an
/// empty node. Shared by `plan` and `claims --explain`.
pub(crate) fn read_usage(path: Option<&std::path::Path>) -> anyhow::Result<Usage> {
    let Some(p) = path else {
        return Ok(Usage::empty());
    };
    serde_json::from_value(topoalign_kube_types::read_document(p)?).with_context(|| {
        format!(
            "usage file {}: expected {{gpus: [BDF…], nics: [BDF…], cpus: \"cpu list\", memory: {{node: bytes}}}}",
            p.display()
        )
    })
}
