//! `topoalign tm`: simulate the kubelet Topology Manager for a pod on a node — hints,
//! merge, admission, then the devices each resource would get and the GPU↔NIC paths
//! that result. `--matrix` runs every policy on 4+4 and 8+8 GPU+VF pods; `merge-cases`
//! evaluates JSON-lines merge cases for the differential test against the kubelet.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use topoalign_discover::Source;
use topoalign_kubelet::ConfigDocument;
use topoalign_tm::TmArgs;
use topoalign_tm::run_matrix;

use crate::output::{Format, exit, print, with_errors};
use crate::source::{TopologyArgs, load};

/// Arguments.
#[derive(Debug, clap::Args)]
#[command(
    args_conflicts_with_subcommands = true,
    after_help = "Examples:\n  topoalign tm --profile mi300x-8 --policy restricted --gpus 4 --nics 4\n  topoalign tm --profile mi300x-8 --policy restricted --pod pod.yaml --used used.yaml\n  topoalign tm --matrix --profile mi300x-8\n  topoalign tm merge-cases --input cases.jsonl -o table"
)]
pub(crate) struct Args {
    #[command(subcommand)]
    action: Option<Action>,
    #[command(flatten)]
    topology: TopologyArgs,
    #[command(flatten)]
    tm: TmArgs,
    /// Output format.
    #[arg(short, long = "output", alias = "format", value_enum, default_value_t = Format::Table)]
    output: Format,
}

#[derive(Debug, clap::Subcommand)]
enum Action {
    /// Evaluate merge cases (one JSON object per line) as the kubelet's NewManager and
    /// policy Merge would: the differential test's topoalign side.
    MergeCases {
        /// The cases, JSON lines: {id, policy, scope, options, numaNodes, distances, providers}.
        #[arg(long, value_name = "CASES.jsonl")]
        input: PathBuf,
        /// Output format.
        #[arg(short, long, value_enum, default_value_t = Format::Json)]
        output: Format,
    },
}

/// Runs the command.
pub(crate) fn run(args: Args) -> anyhow::Result<ExitCode> {
    if let Some(Action::MergeCases { input, output }) = &args.action {
        return with_errors(*output, || {
            let text = std::fs::read_to_string(input)
                .with_context(|| format!("reading {}", input.display()))?;
            let results =
                topoalign_tm::run_cases(&text).with_context(|| input.display().to_string())?;
            print(&results, *output, || {
                topoalign_render::merge_table(&results)
            })?;
            Ok(ExitCode::SUCCESS)
        });
    }
    with_errors(args.output, || {
        if args.tm.matrix {
            run_matrix_cmd(&args)
        } else {
            run_one(&args)
        }
    })
}

fn run_one(args: &Args) -> anyhow::Result<ExitCode> {
    let case = args.tm.case()?;
    let default_source = match case.as_ref().and_then(|c| c.profile.clone()) {
        Some(p) => Source::Profile(p),
        None => Source::host(),
    };
    let topo = load(&args.topology, default_source)?.topology;
    let kubelet_config = args.tm.kubelet_config.as_deref();
    let settings = kubelet_config.map(ConfigDocument::read_tm_settings);
    let request = args.tm.request(case, settings.transpose()?)?;
    let outcome = request.run(&topo)?;
    print(&outcome, args.output, || outcome.table())?;
    Ok(exit(outcome.admitted))
}

fn run_matrix_cmd(args: &Args) -> anyhow::Result<ExitCode> {
    let topo = load(&args.topology, Source::host())?;
    let run = run_matrix(&topo.topology, &args.tm.matrix_spec(), args.tm.vfs_per_pf)?;
    print(&run, args.output, || run.text())?;
    Ok(ExitCode::SUCCESS)
}
