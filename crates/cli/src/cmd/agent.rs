//! `topoalign agent`: the node agent for device-plugin clusters. Reads the kubelet's
//! pod-resources API, publishes a NodeResourceTopology object and node labels; `--once`
//! prints what it would publish and exits.

use std::process::ExitCode;

use anyhow::Context;
use topoalign_agent::{AgentArgs, run_once, run_serving};
use topoalign_discover::Source;
use topoalign_kubelet::ConfigDocument;
use topoalign_probes::{Serving, say_stopping};

use crate::output::{Format, print, with_errors};
use crate::source::{TopologyArgs, load};

/// Arguments.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    #[command(flatten)]
    topology: TopologyArgs,
    #[command(flatten)]
    agent: AgentArgs,
    /// Output format of --once.
    #[arg(short, long, value_enum, default_value_t = Format::Table)]
    output: Format,
}

impl Args {
    /// Installs the log subscriber the flags ask for.
    pub(crate) fn install_logging(&self) {
        self.agent.process.install_logging();
    }
}

/// Runs the command.
pub(crate) fn run(args: Args) -> anyhow::Result<ExitCode> {
    let format = args.output;
    with_errors(format, || {
        let topo = load(&args.topology, Source::host())?.topology;
        let kubelet_config = args.agent.kubelet_config.as_deref();
        let settings = kubelet_config
            .map(ConfigDocument::read_tm_settings)
            .transpose()?;
        let node_env = std::env::var("NODE_NAME").ok();
        let cfg = args
            .agent
            .config(topo, settings.unwrap_or_default(), node_env)?;
        let process = &args.agent.process;
        if args.agent.once {
            let rt = process.runtime().context("starting the async runtime")?;
            let out = rt.block_on(run_once(&cfg))?;
            print(&out, format, || out.table())?;
            return Ok(ExitCode::SUCCESS);
        }
        let Serving { runtime, signalled } = process.serving()?;
        runtime.block_on(async {
            let client = process.client().await?;
            let (node, socket) = (&cfg.node, cfg.socket.display());
            eprintln!("topoalign agent for node {node} reading {socket}");
            let stop = say_stopping("agent", signalled);
            anyhow::Ok(run_serving(cfg, client, process.listen, stop).await?)
        })?;
        Ok(ExitCode::SUCCESS)
    })
}
