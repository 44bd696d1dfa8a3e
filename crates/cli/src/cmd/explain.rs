//! `topoalign explain pod NS/NAME`: against the live cluster, the devices a pod got from
//! its ResourceClaims, each GPU–NIC pair's class, the best free choice on its node and
//! why the two differ (`topoalign_dra::explain::explain_pod`); for a device-plugin pod, what the
//! API server can tell.

use std::process::ExitCode;

use anyhow::{Context, anyhow, bail};
use topoalign_dra::explain::{ClusterInput, explain_all};
use topoalign_dra::explain::{PodExplanation, PodInput, agent_node_facts, claim_refs};
use topoalign_dra::explain::{explain_pod, parse_pod_key};
use topoalign_probes::{ClusterReader, KubeArgs, read_cluster};

use crate::output::{Format, exit, print, read_error, with_errors};
use crate::source::{TopologyArgs, load};

/// Arguments.
#[derive(Debug, clap::Args)]
#[command(
    args_conflicts_with_subcommands = true,
    after_help = "Examples (need a cluster):\n  topoalign explain pod ml/train-0 --kubeconfig ~/.kube/config -o table\n  topoalign explain --all --kubeconfig ~/.kube/config\n  topoalign explain --all -o json --profile dgx-h100"
)]
pub(crate) struct Args {
    #[command(subcommand)]
    what: Option<What>,
    #[command(flatten)]
    all: AllArgs,
}

/// `explain --all`.
#[derive(Debug, clap::Args)]
struct AllArgs {
    /// How aligned the cluster is now, whatever driver published its devices: every
    /// scheduled pod with GPU–NIC pairs from its claims, its pairs by class, GPUDirect
    /// RDMA on every GPU, the better free choice on its node now; a summary line (exit 1
    /// when some pod has a better free choice).
    #[arg(long)]
    all: bool,
    /// The API client (`--kubeconfig`).
    #[command(flatten)]
    kube: KubeArgs,
    /// Output format.
    #[arg(short, long, value_enum, default_value_t = Format::Table)]
    output: Format,
    /// A machine's topology (classes with its PCIe switches and C2C links) for the nodes
    /// that have its GPUs' and NICs' addresses; others are classed on their slices.
    #[command(flatten)]
    topology: TopologyArgs,
}

#[derive(Debug, clap::Subcommand)]
enum What {
    /// The devices a running pod got, each GPU–NIC pair's class, the best free choice on
    /// its node and why they differ (exit 1 when the pod's pairs are worse).
    #[command(
        after_help = "Example (needs a cluster):\n  topoalign explain pod ml/train-0 --kubeconfig ~/.kube/config -o table"
    )]
    Pod(PodArgs),
}

#[derive(Debug, clap::Args)]
struct PodArgs {
    /// The pod, as NAMESPACE/NAME.
    #[arg(value_name = "NS/NAME")]
    target: String,
    /// The API client (`--kubeconfig`).
    #[command(flatten)]
    kube: KubeArgs,
    /// Output format.
    #[arg(short, long, value_enum, default_value_t = Format::Table)]
    output: Format,
}

/// Runs the command.
pub(crate) fn run(args: Args) -> anyhow::Result<ExitCode> {
    let a = match args.what {
        Some(What::Pod(a)) => a,
        None if args.all.all => return run_all(&args.all),
        None => {
            return with_errors(args.all.output, || {
                bail!("explain: name what to explain: `explain pod NS/NAME` or `explain --all`")
            });
        }
    };
    with_errors(a.output, || {
        let (ns, name) = parse_target(&a.target)?;
        let rt = topoalign_probes::runtime(topoalign_probes::Threads::PerCpu)
            .context("starting the async runtime")?;
        let e = rt.block_on(read_and_explain(&a.kube, ns, name))?;
        print(&e, a.output, || e.table())?;
        Ok(exit(e.as_good))
    })
}

/// `explain --all`.
fn run_all(a: &AllArgs) -> anyhow::Result<ExitCode> {
    with_errors(a.output, || {
        let topo = match a.topology.given() {
            Some(source) => Some(load(&a.topology, source)?.topology),
            None => None,
        };
        let live = read_cluster(a.kube.kubeconfig.as_deref(), true).map_err(read_error)?;
        let out = explain_all(&ClusterInput {
            pods: &live.pods,
            claims: &live.claims,
            slices: &live.slices,
            classes: &live.classes,
            topology: topo.as_ref(),
        });
        print(&out, a.output, || out.table())?;
        Ok(exit(out.summary.better_free_choice == 0))
    })
}

/// `NS/NAME` → (NS, NAME).
fn parse_target(target: &str) -> anyhow::Result<(&str, &str)> {
    parse_pod_key(target)
        .ok_or_else(|| anyhow!("pod {target:?}: expected NAMESPACE/NAME (for example ml/train-0)"))
}

async fn read_and_explain(kube: &KubeArgs, ns: &str, name: &str) -> anyhow::Result<PodExplanation> {
    let r = ClusterReader::connect(kube.kubeconfig.as_deref()).await;
    let r = r.map_err(read_error)?;
    let pod = r.pod(ns, name).await.map_err(read_error)?;
    let refs = claim_refs(&pod)?;
    let names: Vec<&str> = refs.iter().map(|r| r.claim.as_str()).collect();
    let read = r.pod_devices(&pod, &names).await.map_err(read_error)?;
    Ok(explain_pod(&PodInput {
        pod: &pod,
        claims: &read.claims,
        slices: &read.slices,
        others: &read.others,
        classes: &read.classes,
        node_facts: &agent_node_facts(read.node.as_ref()),
        topology: None,
    })?)
}
