//! `topoalign mig plan`: the MIG geometry for a request mix on a node or a fleet, with
//! explicit placements (`nvidia-smi mig` commands) or as a mig-parted config.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;
use topoalign_mig::{
    GeometryPlan, GeometryRequest, GpuPlan, Model, PodsFile, lookup, parse_mix, plan, plan_pods,
    resolve_pods,
};
use topoalign_mig::{mig_parted, node_groups, nvidia_smi_commands, ranges};
use topoalign_render::Table;

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

/// Output formats of `mig plan`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum MigFormat {
    /// Per GPU the instances and the `nvidia-smi mig` commands that create them.
    Table,
    /// `{model, gpus: [{index, instances: [{profile, start}]}], placed, unplaced}`, plus
    /// `reasons` when something is unplaced, `nodes`/`node` in the fleet form and
    /// `pods: [{name, node}]` with --pods.
    Json,
    /// The same as YAML.
    Yaml,
    /// A mig-parted config (`version: v1`, `mig-configs`); counts only, no placements.
    MigParted,
}

/// `mig plan` arguments.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Examples:\n  topoalign mig plan --model h100-80gb --gpus 2 --want 3g.40gb=2,1g.10gb=4\n  topoalign mig plan --model gb300 --gpus 4 --want 4g.139gb=4,3g.139gb=4 -o mig-parted"
)]
pub(crate) struct PlanArgs {
    /// GPU model: a100-40gb, a100-80gb, h100-80gb, h100-94gb, h200-141gb, b200, gb200,
    /// b300, gb300.
    #[arg(long, value_name = "NAME")]
    model: String,
    /// GPUs per node.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    gpus: u32,
    /// Plan a fleet of this many nodes of --gpus GPUs each (GPUs are filled node by node).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    nodes: Option<u32>,
    /// The instances wanted, as profile names of the model with counts.
    #[arg(
        long,
        value_name = "PROFILE=COUNT,…",
        required_unless_present = "pods",
        conflicts_with = "pods"
    )]
    want: Option<String>,
    /// Pod shapes instead of --want, each pod's instances on ONE node (YAML or JSON):
    /// `pods: [{name: trainer, replicas: 2, want: {3g.40gb: 1, 1g.10gb: 2}}]`.
    #[arg(long, value_name = "FILE")]
    pods: Option<PathBuf>,
    /// The config name in `-o mig-parted` output (fleets: NAME-1, NAME-2, … per distinct
    /// node geometry).
    #[arg(long, value_name = "NAME", default_value = "topoalign")]
    config_name: String,
    /// Output format.
    #[arg(short = 'o', long, value_enum, default_value_t = MigFormat::Table)]
    output: MigFormat,
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
            print(&p, format, || table(&p))?;
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

/// The table output: the totals, then per node geometry the GPUs and the commands.
fn table(p: &GeometryPlan) -> String {
    let m = p.model;
    let mut out = format!(
        "Model:     {} ({}): 8 memory slices, 7 SM slices per GPU\n",
        m.name, m.product
    );
    out += &match p.nodes {
        Some(n) => format!(
            "GPUs:      {} ({n} nodes × {})\n",
            p.gpus.len(),
            p.gpus_per_node()
        ),
        None => format!("GPUs:      {}\n", p.gpus.len()),
    };
    out += &format!("Placed:    {}\n", p.placed.text());
    out += &format!("Unplaced:  {}\n", p.unplaced.text());
    for r in &p.reasons {
        out += &format!("  because  {r}\n");
    }
    if !p.pods.is_empty() {
        let mut t = Table::new(&["POD", "NODE"]);
        for pod in &p.pods {
            let node = pod
                .node
                .map_or_else(|| "unplaced".to_string(), |n| n.to_string());
            t.row(vec![pod.name.clone(), node]);
        }
        out.push('\n');
        out += &t.render(0);
    }
    for (nodes, gpus) in node_groups(p) {
        out.push('\n');
        if p.nodes.is_some() {
            let s = if nodes.len() == 1 { "" } else { "s" };
            out += &format!("Node{s} {} ({} node{s}):\n", ranges(&nodes), nodes.len());
        }
        out += &gpu_table(p, gpus);
        let cmds: Vec<String> = gpus
            .iter()
            .flat_map(|g| nvidia_smi_commands(m, g.index, &g.instances))
            .collect();
        if !cmds.is_empty() {
            out += "\nCreate with explicit placements (MIG mode on: nvidia-smi -i <gpu> -mig 1):\n";
            for c in cmds {
                out += &format!("  {c}\n");
            }
        }
    }
    out
}

/// One row per GPU: its instances at their starts and the memory slices left free.
fn gpu_table(p: &GeometryPlan, gpus: &[GpuPlan]) -> String {
    let mut t = Table::new(&["GPU", "INSTANCES (PROFILE@START)", "FREE SLICES"]);
    for g in gpus {
        let used = g
            .instances
            .iter()
            .filter_map(|i| p.model.shape(&i.profile).map(|s| s.mask(i.start)))
            .fold(0u8, |a, b| a | b);
        let free: Vec<u32> = (0..8u32).filter(|b| used & (1 << b) == 0).collect();
        let instances: Vec<String> = g
            .instances
            .iter()
            .map(|i| format!("{}@{}", i.profile, i.start))
            .collect();
        t.row(vec![
            g.index.to_string(),
            if instances.is_empty() {
                "-".to_string()
            } else {
                instances.join(" ")
            },
            if free.is_empty() {
                "-".to_string()
            } else {
                ranges(&free)
            },
        ]);
    }
    t.render(0)
}
