//! `topoalign driver`: the node agent. Publishes this node's GPUs, NICs and GPU+NIC pairs
//! as ResourceSlices and serves the kubelet DRA plugin; `--dry-run` prints every object
//! it would create instead (a stable interface: `-o yaml` is one kubectl-applicable YAML
//! stream, `-o json` a `v1` List).

use std::io::Write;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use topoalign_dra::{PairsPerGpu, PublishOptions};
use topoalign_driver::dry_run::{self, DriverObject};
use topoalign_driver::{DriverConfig, LogFormat};
use topoalign_kubelet_plugin::{FaultPoint, PluginConfig};

use crate::cmd::discover::host_sysfs;
use crate::output::{Format, print_structured, with_errors};
use crate::source::{TopologyArgs, describe};

/// Log line format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormatArg {
    /// One JSON object per line.
    Json,
    /// Human-readable text.
    Text,
}

/// Arguments.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// This node's name: `spec.nodeName` and pool name of its ResourceSlices.
    #[arg(long, value_name = "N")]
    pub node_name: String,
    /// Where to read the topology (default: this host's sysfs, `/`). With `--profile`
    /// or `--sysfs-root DIR` the driver publishes for a fake node (tests).
    #[command(flatten)]
    pub topology: TopologyArgs,
    /// Print the DeviceClasses and ResourceSlices it would create, and exit.
    #[arg(long)]
    pub dry_run: bool,
    /// Pair devices per GPU: `auto` (its best pair plus one alternative when the NICs
    /// have VFs, else every pair in its NUMA node), `all`, or a number. Fewer pairs keep
    /// the scheduler's search for an unsatisfiable claim short.
    #[arg(long, value_name = "auto|all|N", default_value = "auto")]
    pub pairs_per_gpu: PairsPerGpu,
    /// Fault testing only: abort at this write step of prepare/unprepare
    /// (`checkpoint-created` … `cdi-renamed`, `cdi-removed`).
    #[arg(long, value_name = "STEP", hide = true)]
    pub crash_at: Option<FaultPoint>,
    /// Output format of `--dry-run`.
    #[arg(short = 'o', long = "output", value_enum, default_value_t = Format::Table)]
    pub format: Format,
    /// Kubeconfig file (default: KUBECONFIG, ~/.kube/config, or the pod's service account).
    #[arg(long, value_name = "FILE")]
    pub kubeconfig: Option<PathBuf>,
    /// Where the kubelet watches for plugin registration sockets.
    #[arg(
        long,
        value_name = "DIR",
        default_value = "/var/lib/kubelet/plugins_registry"
    )]
    pub plugin_registry_dir: PathBuf,
    /// Parent of the driver's DRA socket directory (`DIR/topoalign.dev/dra.sock`).
    #[arg(long, value_name = "DIR", default_value = "/var/lib/kubelet/plugins")]
    pub plugin_dir: PathBuf,
    /// Where CDI specs are written.
    #[arg(long, value_name = "DIR", default_value = "/var/run/cdi")]
    pub cdi_dir: PathBuf,
    /// Where the plugin keeps its checkpoint (default: the driver's plugin directory).
    #[arg(long, value_name = "DIR")]
    pub state_dir: Option<PathBuf>,
    /// Publish only; do not serve the kubelet plugin.
    #[arg(long)]
    pub no_plugin: bool,
    /// Address of /healthz, /readyz and /metrics.
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:9477")]
    pub metrics_addr: SocketAddr,
    /// Log line format (stderr); the level comes from TOPOALIGN_LOG (default info).
    #[arg(long, value_enum, default_value_t = LogFormatArg::Json)]
    pub log_format: LogFormatArg,
    /// How often the topology is rediscovered and the published pool checked
    /// (e.g. `60s`, `5m`, `500ms`).
    #[arg(long, value_name = "DURATION", default_value = "60s", value_parser = parse_interval)]
    pub rescan_interval: Duration,
    /// On SIGTERM/SIGINT, how long to keep trying to delete this node's ResourceSlices.
    #[arg(long, value_name = "DURATION", default_value = "15s", value_parser = parse_interval)]
    pub shutdown_timeout: Duration,
}

/// Reads `60s`, `5m`, `1h 30m`, `500ms`, `PT1M` (at least 100 ms).
fn parse_interval(text: &str) -> Result<Duration, String> {
    let d: jiff::SignedDuration = text
        .parse()
        .map_err(|e| format!("{text:?} is not a duration (expected e.g. 60s, 5m, 500ms): {e}"))?;
    let d = Duration::try_from(d).map_err(|_| format!("{text:?} is negative"))?;
    if d < Duration::from_millis(100) {
        return Err(format!("{text:?} is too short (at least 100ms)"));
    }
    Ok(d)
}

/// Runs the command.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    if args.dry_run {
        return with_errors(args.format, || dry(&args));
    }
    let source = args.topology.source(host_sysfs());
    let plugin = (!args.no_plugin).then(|| {
        let mut p = PluginConfig::new(args.node_name.clone());
        p.plugin_registry_dir = args.plugin_registry_dir.clone();
        p.state_dir = args
            .state_dir
            .clone()
            .unwrap_or_else(|| args.plugin_dir.join(topoalign_dra::DRIVER_NAME));
        p.plugin_dir = args.plugin_dir.clone();
        p.cdi_dir = args.cdi_dir.clone();
        p
    });
    let what = describe(&source);
    topoalign_driver::run_blocking(DriverConfig {
        kubeconfig: args.kubeconfig,
        node_name: args.node_name.clone(),
        source,
        options: PublishOptions {
            pairs_per_gpu: args.pairs_per_gpu,
            ..PublishOptions::default()
        },
        rescan_interval: args.rescan_interval,
        removal_timeout: args.shutdown_timeout,
        plugin,
        metrics_addr: args.metrics_addr,
        log_format: match args.log_format {
            LogFormatArg::Json => LogFormat::Json,
            LogFormatArg::Text => LogFormat::Text,
        },
        crash_at: args.crash_at,
    })
    .with_context(|| format!("driver for node {:?} ({what})", args.node_name))?;
    Ok(ExitCode::SUCCESS)
}

fn dry(args: &Args) -> anyhow::Result<ExitCode> {
    let d = args.topology.load(host_sysfs())?;
    let options = PublishOptions {
        pairs_per_gpu: args.pairs_per_gpu,
        ..PublishOptions::default()
    };
    let objects = dry_run::objects(&d.topology, &args.node_name, &options)
        .with_context(|| format!("node {:?}", args.node_name))?;
    match args.format {
        Format::Yaml => {
            let docs = objects
                .iter()
                .map(serde_saphyr::to_string)
                .collect::<Result<Vec<_>, _>>()
                .context("encoding YAML")?;
            write_stdout(&docs.join("---\n"))?;
        }
        Format::Json => print_structured(
            &serde_json::json!({ "apiVersion": "v1", "kind": "List", "items": objects }),
            Format::Json,
        )?,
        Format::Table => write_stdout(&table(&objects))?,
    }
    Ok(ExitCode::SUCCESS)
}

fn write_stdout(text: &str) -> anyhow::Result<()> {
    std::io::stdout()
        .lock()
        .write_all(text.as_bytes())
        .context("writing to stdout")
}

/// One line per object: kind, name, and what it holds.
fn table(objects: &[DriverObject]) -> String {
    let mut out = format!("{:<14} {:<52} {}\n", "KIND", "NAME", "CONTENT");
    for o in objects {
        let (kind, name, content) = match o {
            DriverObject::DeviceClass(c) => (
                "DeviceClass",
                c.metadata.name.clone().unwrap_or_default(),
                String::new(),
            ),
            DriverObject::ResourceSlice(s) => {
                let devices = s.spec.devices.as_ref().map_or(0, Vec::len);
                let sets = s.spec.shared_counters.as_ref().map_or(0, Vec::len);
                let what = if sets > 0 {
                    format!("{sets} counter sets")
                } else {
                    format!("{devices} devices")
                };
                (
                    "ResourceSlice",
                    s.metadata.name.clone().unwrap_or_default(),
                    format!(
                        "pool {} gen {}, {what}",
                        s.spec.pool.name, s.spec.pool.generation
                    ),
                )
            }
        };
        out.push_str(&format!("{kind:<14} {name:<52} {content}\n"));
    }
    out
}
