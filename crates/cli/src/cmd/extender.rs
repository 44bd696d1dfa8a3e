//! `topoalign extender`: the kube-scheduler extender (filter, prioritize) over the API's
//! Nodes, NodeResourceTopology objects and bound pods; `extender nodes` prints synthetic
//! Node objects the extender understands; `extender decide` runs the decision offline on
//! Node manifests.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use topoalign_extender::offline::{
    decide_on_manifests, decide_table, node_items, node_list, node_table,
};
use topoalign_extender::runtime::{ServeConfig, run as serve};
use topoalign_extender::synth::synth_nodes;
use topoalign_tm::request::read_document;
use topoalign_tm::{Policy, ResourceMap};

use crate::output::{Format, print, with_errors};

/// Arguments.
#[derive(Debug, clap::Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct Args {
    #[command(subcommand)]
    command: Option<Sub>,
    #[command(flatten)]
    serve: ServeArgs,
}

#[derive(Debug, clap::Subcommand)]
enum Sub {
    /// Print synthetic Node objects (built-in profiles, random occupancy) as a v1 List.
    Nodes(NodesArgs),
    /// Filter and score a pod on Node manifests offline (no cluster).
    Decide(DecideArgs),
}

/// Serving flags.
#[derive(Debug, clap::Args)]
struct ServeArgs {
    /// A kubeconfig file (default: in-cluster config, then $KUBECONFIG / ~/.kube/config).
    #[arg(long, value_name = "FILE")]
    kubeconfig: Option<PathBuf>,
    /// Address to serve the extender, health and metrics on.
    #[arg(long, default_value = "0.0.0.0:8888")]
    listen: SocketAddr,
    /// Agent data older than this many seconds is stale (neutral score, never filtered).
    #[arg(long, default_value_t = 300)]
    stale_after: u64,
    /// Seconds an allocation assumed for a bound pod lasts on an agent-reported node.
    #[arg(long, default_value_t = 120)]
    assume_ttl: u64,
    /// Verdict cache entries (0 disables the cache).
    #[arg(long, default_value_t = 200_000)]
    cache_size: usize,
    /// Map a resource name: NAME=gpus|gpus:<vendor>|vfs|vfs:<N>|pfs (repeatable).
    #[arg(long = "resource", value_name = "NAME=KIND")]
    resources: Vec<String>,
}

#[derive(Debug, clap::Args)]
struct NodesArgs {
    /// Number of nodes.
    #[arg(long, default_value_t = 200)]
    count: usize,
    /// Random seed of the occupancy.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Profiles, cycled (comma-separated).
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "mi300x-8,gb300-4,dgx-h100"
    )]
    profiles: Vec<String>,
    /// Topology Manager policies, cycled (comma-separated).
    #[arg(long, value_delimiter = ',', default_value = "restricted")]
    policies: Vec<String>,
    /// Output format (table: one line per node).
    #[arg(short, long, value_enum, default_value_t = Format::Yaml)]
    output: Format,
}

#[derive(Debug, clap::Args)]
struct DecideArgs {
    /// Node manifests: a v1 List/NodeList or one Node (JSON or YAML).
    #[arg(long, value_name = "FILE")]
    nodes: PathBuf,
    /// The Pod manifest (JSON or YAML).
    #[arg(long, value_name = "FILE")]
    pod: PathBuf,
    /// Map a resource name: NAME=gpus|gpus:<vendor>|vfs|vfs:<N>|pfs (repeatable).
    #[arg(long = "resource", value_name = "NAME=KIND")]
    resources: Vec<String>,
    /// Output format.
    #[arg(short, long, value_enum, default_value_t = Format::Table)]
    output: Format,
}

/// Runs the command.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    match args.command {
        Some(Sub::Nodes(a)) => with_errors(a.output, || nodes(&a)),
        Some(Sub::Decide(a)) => with_errors(a.output, || decide(&a)),
        None => serve_cmd(args.serve),
    }
}

fn resource_map(specs: &[String]) -> anyhow::Result<ResourceMap> {
    let mut m = ResourceMap::default();
    for s in specs {
        m.add_spec(s, "--resource")?;
    }
    Ok(m)
}

fn nodes(a: &NodesArgs) -> anyhow::Result<ExitCode> {
    let policies: Vec<Policy> = a
        .policies
        .iter()
        .map(|p| p.parse().with_context(|| format!("--policies: `{p}`")))
        .collect::<anyhow::Result<_>>()?;
    let profiles: Vec<&str> = a.profiles.iter().map(String::as_str).collect();
    let nodes = synth_nodes(a.count, a.seed, &profiles, &policies)
        .map_err(|e| anyhow::anyhow!("--profiles: {e}"))?;
    print(&node_list(&nodes), a.output, || node_table(&nodes))?;
    Ok(ExitCode::SUCCESS)
}

fn decide(a: &DecideArgs) -> anyhow::Result<ExitCode> {
    let items =
        node_items(&read_document(&a.nodes)?).with_context(|| a.nodes.display().to_string())?;
    let pod = read_document(&a.pod)?;
    let (req, results) = decide_on_manifests(&items, &pod, resource_map(&a.resources)?)
        .with_context(|| format!("{} / {}", a.nodes.display(), a.pod.display()))?;
    print(&results, a.output, || decide_table(&req, &results))?;
    Ok(ExitCode::from(u8::from(!results.iter().any(|r| r.passes))))
}

/// An API client (shared with `topoalign agent`).
pub async fn client(kubeconfig: Option<&PathBuf>) -> anyhow::Result<kube::Client> {
    Ok(topoalign_extender::runtime::client(kubeconfig.map(PathBuf::as_path)).await?)
}

/// Resolves on SIGINT or SIGTERM (shared with `topoalign agent`).
pub async fn shutdown_signal() {
    topoalign_extender::runtime::shutdown_signal().await
}

fn serve_cmd(a: ServeArgs) -> anyhow::Result<ExitCode> {
    let cfg = ServeConfig {
        listen: a.listen,
        stale_after: Duration::from_secs(a.stale_after),
        assume_ttl: Duration::from_secs(a.assume_ttl),
        cache_size: a.cache_size,
        resources: resource_map(&a.resources)?,
    };
    let rt = tokio::runtime::Runtime::new().context("starting the async runtime")?;
    let drained = rt.block_on(async {
        let client = client(a.kubeconfig.as_ref()).await?;
        let listening = |addr| eprintln!("topoalign extender listening on {addr}");
        anyhow::Ok(serve(client, cfg, shutdown_signal(), listening).await?)
    })?;
    if !drained {
        eprintln!("warning: calls still in flight after 10 s; exiting");
    }
    eprintln!("topoalign extender stopped");
    Ok(ExitCode::SUCCESS)
}
