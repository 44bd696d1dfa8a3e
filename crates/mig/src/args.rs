//! `topoalign mig plan`'s flags (the `clap` feature): one clap struct the CLI takes as
//! its subcommand's arguments, and its output formats.

use std::path::PathBuf;

/// Output formats of `mig plan`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum MigFormat {
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
pub struct PlanArgs {
    /// GPU model: a100-40gb, a100-80gb, h100-80gb, h100-94gb, h200-141gb, b200, gb200,
    /// b300, gb300.
    #[arg(long, value_name = "NAME")]
    pub model: String,
    /// GPUs per node.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub gpus: u32,
    /// Plan a fleet of this many nodes of --gpus GPUs each (GPUs are filled node by node).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub nodes: Option<u32>,
    /// The instances wanted, as profile names of the model with counts.
    #[arg(
        long,
        value_name = "PROFILE=COUNT,…",
        required_unless_present = "pods",
        conflicts_with = "pods"
    )]
    pub want: Option<String>,
    /// Pod shapes instead of --want, each pod's instances on ONE node (YAML or JSON):
    /// `pods: [{name: trainer, replicas: 2, want: {3g.40gb: 1, 1g.10gb: 2}}]`.
    #[arg(long, value_name = "FILE")]
    pub pods: Option<PathBuf>,
    /// The config name in `-o mig-parted` output (fleets: NAME-1, NAME-2, … per distinct
    /// node geometry).
    #[arg(long, value_name = "NAME", default_value = "topoalign")]
    pub config_name: String,
    /// Output format.
    #[arg(short = 'o', long, value_enum, default_value_t = MigFormat::Table)]
    pub output: MigFormat,
}
