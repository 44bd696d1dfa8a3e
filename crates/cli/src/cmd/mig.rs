//! `topoalign mig plan`: the MIG geometry for a request mix on a node or a fleet, with
//! explicit placements (`nvidia-smi mig` commands) or as a mig-parted config.

use std::path::Path;
use std::process::ExitCode;

use anyhow::Context;
use topoalign_mig::{GeometryRequest, MigFormat, Model, PlanArgs, PodsFile, lookup, mig_parted};
use topoalign_mig::{parse_mix, plan, plan_pods, resolve_pods};

use crate::output::{Format, exit, print, with_errors, write_stdout};

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
    let format = match a.output {
        MigFormat::Json => Format::Json,
        MigFormat::Yaml => Format::Yaml,
        MigFormat::Table | MigFormat::MigParted => Format::Table,
    };
    with_errors(format, || {
        let model = lookup(&a.model).context("--model")?;
        let p = match (&a.pods, &a.want) {
            (Some(file), _) => plan_pods(model, a.gpus, a.nodes, &read_pods(model, file)?)?,
            (None, want) => {
                let want = parse_mix(model, want.as_deref().unwrap_or("")).context("--want")?;
                plan(&GeometryRequest {
                    model,
                    gpus: a.gpus,
                    nodes: a.nodes,
                    want,
                })?
            }
        };
        if a.output == MigFormat::MigParted {
            write_stdout(&mig_parted(&p, &a.config_name))?;
            for r in &p.reasons {
                eprintln!("unplaced: {r}");
            }
        } else {
            print(&p, format, || p.table())?;
        }
        Ok(exit(p.complete()))
    })
}

/// Reads and checks a `--pods` file.
fn read_pods(model: &Model, path: &Path) -> anyhow::Result<Vec<topoalign_mig::Pod>> {
    let what = format!("--pods {}", path.display());
    let doc = topoalign_kube_types::read_document(path).with_context(|| what.clone())?;
    let file: PodsFile = serde_json::from_value(doc).with_context(|| {
        format!(
            "{what}: expected {{pods: [{{name: NAME, replicas: N, want: {{PROFILE: COUNT}}}}]}}"
        )
    })?;
    resolve_pods(model, &file).with_context(|| what.clone())
}
