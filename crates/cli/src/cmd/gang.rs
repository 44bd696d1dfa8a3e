//! `topoalign gang`: a multi-node job (pods × GPU+NIC pairs, class, rails, domain level)
//! as manifests for the engine that places the gang, every pod's claim pinned to the
//! job's rails.

use std::path::PathBuf;
use std::process::ExitCode;

use topoalign_gang::{Dialect, manifests, read_job, summary_table};

use crate::output::{Format, print_structured, print_yaml_stream, write_stdout};

/// Arguments.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Examples:\n  topoalign gang --job deploy/gang/job.yaml\n  topoalign gang --job deploy/gang/job.yaml --dialect kueue -o table\n  topoalign gang --job deploy/gang/job.yaml --dialect volcano -o json\n  topoalign gang --job deploy/gang/job.yaml --dialect kai\n  topoalign gang --job deploy/gang/job.yaml --kubernetes-version 1.35 -o table\n\nThe job file: name, pods, pairsPerPod, class (PIX|PXB|PHB|NODE), sameRails, rails, podsPerNode,\ndomain {level|key, mode, sizes, volcanoTier}, queue, image, command (see deploy/gang/job.yaml).\nErrors go to stderr only: stdout is meant for `| kubectl apply -f -`."
)]
pub(crate) struct Args {
    /// The job description (YAML or JSON).
    #[arg(long, value_name = "FILE")]
    job: PathBuf,
    /// The engine whose objects are written.
    #[arg(long, value_enum, default_value_t = Dialect::Kube)]
    dialect: Dialect,
    /// The fleet's nodes (`kubectl get nodes -o yaml`): the domain key is chosen from
    /// their labels and a gang larger than every domain is refused.
    #[arg(long, value_name = "FILE")]
    nodes: Option<PathBuf>,
    /// The cluster's Kubernetes release (`1.35`, `v1.35.2`). Before 1.36 the API server
    /// drops a claim's `distinctAttribute` (gate DRAConsumableCapacity off), so each pod's
    /// claim asks one pair per rail instead. Default: 1.36 or newer.
    #[arg(long, value_name = "VERSION")]
    kubernetes_version: Option<topoalign_kube_types::KubeVersion>,
    /// Output format: yaml (default, a stream that applies as is), json (a List) or table.
    #[arg(short = 'o', long, value_enum, default_value_t = Format::Yaml)]
    output: Format,
}

/// Runs the command.
pub(crate) fn run(args: Args) -> anyhow::Result<ExitCode> {
    let job = read_job(&args.job, args.kubernetes_version, args.nodes.as_deref())?;
    let m = manifests(&job, args.dialect)?;
    match args.output {
        Format::Table => write_stdout(&summary_table(&m.summary))?,
        Format::Yaml => print_yaml_stream(&m.objects)?,
        Format::Json => print_structured(&m.list(), Format::Json)?,
    }
    Ok(ExitCode::SUCCESS)
}
