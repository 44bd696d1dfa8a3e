//! `topoalign extender`: the kube-scheduler extender (filter, prioritize) over the API's
//! Nodes, NodeResourceTopology objects, ResourceSlices, claims and bound pods;
//! `extender nodes` prints synthetic Node objects the extender understands; `extender
//! decide` runs the decision offline on Node manifests.

use std::process::ExitCode;

use anyhow::Context;
use topoalign_extender::run as serve;
use topoalign_extender::synth_nodes;
use topoalign_extender::{DecideArgs, NodesArgs, ServeArgs};
use topoalign_extender::{decide_on_manifests, decide_table, node_items, node_list, node_table};
use topoalign_kube_types::read_document;
use topoalign_probes::{Serving, say_stopping};

use crate::output::{print, with_errors};

/// Arguments.
#[derive(Debug, clap::Args)]
#[command(args_conflicts_with_subcommands = true)]
pub(crate) struct Args {
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

impl Args {
    /// Installs the log subscriber: the serving process's as its flags ask, a one-shot
    /// command's for `nodes` and `decide`.
    pub(crate) fn install_logging(&self) {
        match self.command {
            None => self.serve.process.install_logging(),
            Some(_) => topoalign_probes::install_command_logging(),
        }
    }
}

/// Runs the command.
pub(crate) fn run(args: Args) -> anyhow::Result<ExitCode> {
    match args.command {
        Some(Sub::Nodes(a)) => with_errors(a.output, || nodes(&a)),
        Some(Sub::Decide(a)) => with_errors(a.output, || decide(&a)),
        None => serve_cmd(args.serve),
    }
}

fn nodes(a: &NodesArgs) -> anyhow::Result<ExitCode> {
    let profiles: Vec<&str> = a.profiles.iter().map(String::as_str).collect();
    let nodes = synth_nodes(a.count, a.seed, &profiles, &a.policies)
        .map_err(|e| anyhow::anyhow!("--profiles: {e}"))?;
    print(&node_list(&nodes), a.output, || node_table(&nodes))?;
    Ok(ExitCode::SUCCESS)
}

fn decide(a: &DecideArgs) -> anyhow::Result<ExitCode> {
    let items =
        node_items(&read_document(&a.nodes)?).with_context(|| a.nodes.display().to_string())?;
    let pod = read_document(&a.pod)?;
    let (req, results) = decide_on_manifests(&items, &pod, a.resources.map()?)
        .with_context(|| format!("{} / {}", a.nodes.display(), a.pod.display()))?;
    print(&results, a.output, || decide_table(&req, &results))?;
    Ok(ExitCode::from(u8::from(!results.iter().any(|r| r.passes))))
}

fn serve_cmd(a: ServeArgs) -> anyhow::Result<ExitCode> {
    let cfg = a.config()?;
    let Serving { runtime, signalled } = a.process.serving()?;
    let drained = runtime.block_on(async {
        let client = a.process.client().await?;
        let listening = |addr| eprintln!("topoalign extender listening on {addr}");
        let stop = say_stopping("extender", signalled);
        anyhow::Ok(serve(client, cfg, stop, listening).await?)
    })?;
    if !drained {
        eprintln!("warning: calls still in flight after 10 s; exiting");
    }
    eprintln!("topoalign extender stopped");
    Ok(ExitCode::SUCCESS)
}
