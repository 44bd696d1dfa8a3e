//! `topoalign extender`: the kube-scheduler extender (filter, prioritize) over the API's
//! Nodes, NodeResourceTopology objects and bound pods; `extender nodes` prints synthetic
//! Node objects the extender understands; `extender decide` runs the decision offline on
//! Node manifests.

use std::fmt::Write as _;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::{Arc, RwLock};
use std::time::{Duration, SystemTime};

use anyhow::{Context, bail};
use serde::Serialize;
use serde_json::{Value, json};
use topoalign_extender::decide::{Decider, Decision, Verdict};
use topoalign_extender::nodeinfo::{Interner, from_node_labels};
use topoalign_extender::score::NEUTRAL_SCORE;
use topoalign_extender::server::{App, serve};
use topoalign_extender::synth::synth_nodes;
use topoalign_extender::{ClusterState, pod_request};
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
        .map(|p| {
            p.parse::<Policy>()
                .with_context(|| format!("--policies: `{p}`"))
        })
        .collect::<anyhow::Result<_>>()?;
    let profiles: Vec<&str> = a.profiles.iter().map(String::as_str).collect();
    let nodes = synth_nodes(a.count, a.seed, &profiles, &policies)
        .map_err(|e| anyhow::anyhow!("--profiles: {e}"))?;
    let list = json!({
        "apiVersion": "v1",
        "kind": "List",
        "items": nodes.iter().map(|n| n.manifest()).collect::<Vec<_>>(),
    });
    print(&list, a.output, || {
        let mut t = String::new();
        for n in &nodes {
            let _ = writeln!(
                t,
                "{:<20} {:<10} {:<17} {} of {} GPUs used",
                n.name,
                n.profile,
                n.policy.as_str(),
                n.used.gpus.len(),
                n.gpus
            );
        }
        t
    })?;
    Ok(ExitCode::SUCCESS)
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct NodeResult {
    node: String,
    passes: bool,
    score: i64,
    reason: String,
}

fn decide(a: &DecideArgs) -> anyhow::Result<ExitCode> {
    let doc = read_document(&a.nodes)?;
    let items: Vec<Value> = match doc.get("items").and_then(Value::as_array) {
        Some(items) => items.clone(),
        None if doc.get("kind").and_then(Value::as_str) == Some("Node") => vec![doc.clone()],
        None => bail!(
            "{}: expected a v1 List/NodeList with `items`, or a Node",
            a.nodes.display()
        ),
    };
    let pod = read_document(&a.pod)?;
    let decider = Decider::new(resource_map(&a.resources)?, 0);
    let req =
        pod_request(&pod, decider.resources()).with_context(|| a.pod.display().to_string())?;
    let mut interner = Interner::default();
    let mut state = ClusterState::default();
    let mut names = Vec::new();
    for (i, n) in items.iter().enumerate() {
        let name = n
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .with_context(|| format!("{}: items[{i}].metadata.name missing", a.nodes.display()))?;
        if let Some(e) = from_node_labels(n, &mut interner) {
            state.upsert_node(name, e);
        }
        names.push(name.to_string());
    }
    let (decisions, _) = decider.decide(&state, &req, &names, SystemTime::now());
    let results: Vec<NodeResult> = names
        .iter()
        .zip(decisions)
        .map(|(n, d)| {
            let (passes, score, reason) = match d {
                Decision::Judged(Verdict::Fit(s)) => (true, s, String::new()),
                Decision::Judged(Verdict::Reject { message, .. }) => (false, 0, message),
                Decision::Judged(Verdict::Neutral(w)) => (true, NEUTRAL_SCORE, w),
                Decision::Neutral(w) => (true, NEUTRAL_SCORE, format!("neutral: {}", w.label())),
            };
            NodeResult {
                node: n.clone(),
                passes,
                score,
                reason,
            }
        })
        .collect();
    print(&results, a.output, || {
        let mut t = format!(
            "pod {}: {} GPU(s), {} NIC(s)\n",
            req.key, req.gpus, req.nics
        );
        for r in &results {
            let _ = writeln!(
                t,
                "{:<22} {:<6} score {:>2}  {}",
                r.node,
                if r.passes { "pass" } else { "FAIL" },
                r.score,
                r.reason
            );
        }
        t
    })?;
    Ok(if results.iter().any(|r| r.passes) {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

pub async fn client(kubeconfig: Option<&PathBuf>) -> anyhow::Result<kube::Client> {
    let config = match kubeconfig {
        Some(p) => {
            let kc = kube::config::Kubeconfig::read_from(p)
                .with_context(|| format!("reading kubeconfig {}", p.display()))?;
            kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default())
                .await
                .with_context(|| format!("kubeconfig {}", p.display()))?
        }
        None => kube::Config::infer().await.context(
            "no kubeconfig given and none found (in-cluster, $KUBECONFIG, ~/.kube/config)",
        )?,
    };
    kube::Client::try_from(config).context("building the API client")
}

/// Resolves on SIGINT or SIGTERM.
pub async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        _ = ctrl_c => {},
        _ = term => {},
    }
}

fn serve_cmd(a: ServeArgs) -> anyhow::Result<ExitCode> {
    let resources = resource_map(&a.resources)?;
    let rt = tokio::runtime::Runtime::new().context("starting the async runtime")?;
    rt.block_on(async move {
        let client = client(a.kubeconfig.as_ref()).await?;
        let state = Arc::new(RwLock::new(ClusterState::new(
            Duration::from_secs(a.stale_after),
            Duration::from_secs(a.assume_ttl),
        )));
        let app = Arc::new(App::new(state, Decider::new(resources, a.cache_size)));
        let listener = tokio::net::TcpListener::bind(a.listen)
            .await
            .with_context(|| format!("--listen {}: cannot bind", a.listen))?;
        eprintln!("topoalign extender listening on {}", a.listen);
        let watch = tokio::spawn(topoalign_extender::watch::run(client, app.clone()));
        let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
        let server = tokio::spawn(serve(listener, app, async move {
            let mut rx = stop_rx;
            let _ = rx.changed().await;
        }));
        let outcome: anyhow::Result<()> = tokio::select! {
            _ = shutdown_signal() => Ok(()),
            w = watch => match w {
                Ok(Ok(())) => Ok(()),
                Ok(Err(e)) => Err(anyhow::Error::new(e).context("watching the API server")),
                Err(e) => Err(anyhow::anyhow!("watcher task failed: {e}")),
            },
        };
        let _ = stop_tx.send(true);
        match tokio::time::timeout(Duration::from_secs(10), server).await {
            Ok(Ok(Ok(()))) => {}
            Ok(Ok(Err(e))) => return Err(anyhow::Error::new(e).context("serving")),
            Ok(Err(e)) => bail!("server task failed: {e}"),
            Err(_) => eprintln!("warning: calls still in flight after 10 s; exiting"),
        }
        outcome?;
        eprintln!("topoalign extender stopped");
        Ok(ExitCode::SUCCESS)
    })
}
