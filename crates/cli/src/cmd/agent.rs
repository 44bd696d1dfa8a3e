//! `topoalign agent`: the node agent for device-plugin clusters. Reads the kubelet's
//! pod-resources API, publishes a NodeResourceTopology object and node labels; `--once`
//! prints what it would publish and exits.

use std::fmt::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use topoalign_agent::podresources::DEFAULT_SOCKET;
use topoalign_agent::run::{Config, Output, once, run as run_agent};
use topoalign_kubelet::ConfigDocument;
use topoalign_tm::{Policy, Scope, Settings};

use crate::output::{Format, print, with_errors};
use crate::source::TopologyArgs;

/// Arguments.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(flatten)]
    topology: TopologyArgs,
    /// This node's name (the NodeResourceTopology object's name; default: $NODE_NAME).
    #[arg(long)]
    node: Option<String>,
    /// The kubelet's pod-resources socket.
    #[arg(long, default_value = DEFAULT_SOCKET)]
    socket: PathBuf,
    /// Read topologyManagerPolicy/Scope/PolicyOptions from this KubeletConfiguration.
    #[arg(long, value_name = "FILE")]
    kubelet_config: Option<PathBuf>,
    /// topologyManagerPolicy (overrides --kubelet-config).
    #[arg(long)]
    policy: Option<String>,
    /// topologyManagerScope (overrides --kubelet-config).
    #[arg(long)]
    scope: Option<String>,
    /// A kubeconfig file (default: in-cluster config, then $KUBECONFIG / ~/.kube/config).
    #[arg(long, value_name = "FILE")]
    kubeconfig: Option<PathBuf>,
    /// Seconds between kubelet reads.
    #[arg(long, default_value_t = 10)]
    interval: u64,
    /// Publish at least every this many seconds (keeps the extender from calling the data
    /// stale; keep it well under the extender's --stale-after).
    #[arg(long, default_value_t = 60)]
    heartbeat: u64,
    /// Seconds a label change must hold before it is written (no flapping).
    #[arg(long, default_value_t = 120)]
    label_hold: u64,
    /// Seconds per kubelet call.
    #[arg(long, default_value_t = 5)]
    timeout: u64,
    /// Read the kubelet once, print what would be published, and exit.
    #[arg(long)]
    once: bool,
    /// Output format of --once.
    #[arg(short, long, value_enum, default_value_t = Format::Table)]
    output: Format,
}

fn settings(args: &Args) -> anyhow::Result<Settings> {
    let mut s = match &args.kubelet_config {
        Some(p) => ConfigDocument::read(p)?
            .tm_settings()
            .with_context(|| p.display().to_string())?,
        None => Settings::default(),
    };
    if let Some(p) = &args.policy {
        s.topology_manager_policy = p.parse::<Policy>().context("--policy")?;
    }
    if let Some(p) = &args.scope {
        s.topology_manager_scope = p.parse::<Scope>().context("--scope")?;
    }
    Ok(s)
}

fn table(o: &Output) -> String {
    let r = &o.report;
    let mut t = String::new();
    let _ = writeln!(t, "pods holding devices: {}", r.pods.len());
    let _ = writeln!(
        t,
        "GPUs in use: {}   NICs in use: {}",
        r.used.gpus.len(),
        r.used.nics.len()
    );
    for (res, zones) in &r.zones {
        for (numa, c) in zones {
            let _ = writeln!(
                t,
                "  {res:<28} numa {numa:>2}: {} of {} free",
                c.available, c.allocatable
            );
        }
    }
    let _ = writeln!(
        t,
        "best free pair: {}",
        r.best_pair.map_or("none", |c| c.as_str())
    );
    let _ = writeln!(t, "GPU fabric: {}", r.fabric);
    for (k, v) in &o.labels {
        let _ = writeln!(t, "label {k}={v}");
    }
    if !r.unknown_ids.is_empty() {
        let _ = writeln!(
            t,
            "warning: device IDs not on this topology: {}",
            r.unknown_ids.join(", ")
        );
    }
    t
}

/// Runs the command.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let format = args.output;
    with_errors(format, || {
        let topo = args
            .topology
            .load(crate::cmd::discover::host_sysfs())?
            .topology;
        let node = match args
            .node
            .clone()
            .or_else(|| std::env::var("NODE_NAME").ok())
        {
            Some(n) if !n.is_empty() => n,
            _ => anyhow::bail!("--node: missing (give the node's name, or set NODE_NAME)"),
        };
        let cfg = Config {
            node,
            topology: topo,
            settings: settings(&args)?,
            socket: args.socket.clone(),
            interval: Duration::from_secs(args.interval.max(1)),
            heartbeat: Duration::from_secs(args.heartbeat.max(1)),
            label_hold: Duration::from_secs(args.label_hold),
            timeout: Duration::from_secs(args.timeout.max(1)),
        };
        let rt = tokio::runtime::Runtime::new().context("starting the async runtime")?;
        if args.once {
            let out = rt.block_on(once(&cfg))?;
            print(&out, format, || table(&out))?;
            return Ok(ExitCode::SUCCESS);
        }
        rt.block_on(async {
            let client = crate::cmd::extender::client(args.kubeconfig.as_ref()).await?;
            eprintln!(
                "topoalign agent for node {} reading {}",
                cfg.node,
                cfg.socket.display()
            );
            run_agent(cfg, client, crate::cmd::extender::shutdown_signal()).await?;
            Ok::<_, anyhow::Error>(())
        })?;
        Ok(ExitCode::SUCCESS)
    })
}
