//! The agent loop and its one-shot form.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::time::Duration;

use serde::Serialize;
use serde_json::Value;
use topoalign_fabric::DomainLabels;
use topoalign_kube_types::kubelet_settings::Settings;
use topoalign_topology::Topology;

use crate::labels::wanted;
use crate::nrt::{add_facts, nrt_object};
use crate::podresources::{PodResourcesClient, PodResourcesError};
use crate::publish::PublishError;
use crate::report::{Report, build};
#[cfg(feature = "clap")]
use topoalign_node_facts::FactsError;
use topoalign_node_facts::{Follower, NodeFacts};

/// How the agent runs.
#[derive(Debug, Clone)]
pub struct Config {
    /// The node's name (the NRT object's name).
    pub node: String,
    /// The node's topology.
    pub topology: Topology,
    /// The kubelet's Topology Manager settings.
    pub settings: Settings,
    /// The pod-resources socket.
    pub socket: PathBuf,
    /// Seconds between kubelet reads.
    pub interval: Duration,
    /// Publish at least this often even without change (the extender's staleness clock).
    pub heartbeat: Duration,
    /// How long a label change must hold before it is written.
    pub label_hold: Duration,
    /// Timeout of each kubelet call.
    pub timeout: Duration,
    /// The node's clique, operator domain labels, rails, NICs' neighbours and leaf (read
    /// at start; the neighbours, rails and leaf again through `follower`).
    pub facts: NodeFacts,
    /// Where the NICs' neighbours are read again (none without a neighbour source), and
    /// the rail source resolved again on them.
    pub follower: Follower,
    /// How often the NICs' neighbours are read again.
    pub rescan_interval: Duration,
}

/// The agent's defaults among the flags every process takes.
#[cfg(feature = "clap")]
#[derive(Debug, Clone)]
pub struct AgentProcess;

#[cfg(feature = "clap")]
impl topoalign_probes::ProcessDefaults for AgentProcess {
    /// Probes on loopback (the chart sets `0.0.0.0`).
    const LISTEN: &'static str = "127.0.0.1:9478";
    /// Warnings and errors: each round that works is said by the metrics, not the log.
    const LOG_FILTER: &'static str = "warn";
    const THREADS: topoalign_probes::Threads = topoalign_probes::Threads::PerCpu;
}

/// The flags of `topoalign agent` besides the topology source and `-o` (the `clap`
/// feature), turned into a [`Config`] by [`AgentArgs::config`].
#[cfg(feature = "clap")]
#[derive(Debug, Clone, clap::Args)]
pub struct AgentArgs {
    /// This node's name (the NodeResourceTopology object's name; default: $NODE_NAME).
    #[arg(long)]
    pub node: Option<String>,
    /// The kubelet's pod-resources socket.
    #[arg(long, default_value = crate::podresources::DEFAULT_SOCKET)]
    pub socket: PathBuf,
    /// Read topologyManagerPolicy/Scope/PolicyOptions from this KubeletConfiguration.
    #[arg(long, value_name = "FILE")]
    pub kubelet_config: Option<PathBuf>,
    /// topologyManagerPolicy (overrides --kubelet-config).
    #[arg(long)]
    pub policy: Option<String>,
    /// topologyManagerScope (overrides --kubelet-config).
    #[arg(long)]
    pub scope: Option<String>,
    /// Seconds between kubelet reads.
    #[arg(long, default_value_t = 10)]
    pub interval: u64,
    /// Publish at least every this many seconds (keeps the extender from calling the data
    /// stale; keep it well under the extender's --stale-after).
    #[arg(long, default_value_t = 60)]
    pub heartbeat: u64,
    /// Seconds a label change must hold before it is written (no flapping).
    #[arg(long, default_value_t = 120)]
    pub label_hold: u64,
    /// Seconds per kubelet call.
    #[arg(long, default_value_t = 5)]
    pub timeout: u64,
    /// Read the kubelet once, print what would be published, and exit.
    #[arg(long)]
    pub once: bool,
    /// The flags every process takes: `--kubeconfig`, `--listen` (/healthz, /readyz and
    /// /metrics), `--log-format`, `--log-filter`.
    #[command(flatten)]
    pub process: topoalign_probes::ProcessArgs<AgentProcess>,
    /// The NVLink clique: `nvidia-smi` runs `nvidia-smi -q` ($TOPOALIGN_NVIDIA_SMI names
    /// another binary), a path reads its saved output. Written as nvidia.com/gpu.clique
    /// where the node has no NVLink-domain label from another tool.
    #[arg(long, value_name = "nvidia-smi|FILE")]
    pub fabric_from: Option<String>,
    /// The operator's domain file (`labels: {KEY: VALUE}` or `nodes: {NODE: {KEY:
    /// VALUE}}`, keys of Topograph, GFD or older Topograph): written where the node has no
    /// label of that level from another tool.
    #[arg(long, value_name = "FILE")]
    pub domains: Option<PathBuf>,
    /// The node's rail source (as `topoalign driver --rails`): each NIC's rail, published
    /// in the NodeResourceTopology object.
    #[arg(long, value_name = "FILE")]
    pub rails: Option<PathBuf>,
    /// What the NICs are cabled to. Read at start and again every --rescan-interval (a
    /// recabled NIC moves to its new rail and the leaf follows; a failed read keeps the
    /// last good neighbours).
    #[command(flatten)]
    pub wiring: topoalign_node_facts::WiringFlags,
    /// How often the NICs' neighbours (--lldp-from, --ib-sysfs, --ibnetdiscover) are
    /// read again after start (e.g. `60s`, `5m`, or seconds; as the driver's flag).
    #[arg(long, value_name = "DURATION", default_value = "60s", value_parser = topoalign_probes::parse_interval)]
    pub rescan_interval: Duration,
}

/// A flag value the agent cannot run with.
#[cfg(feature = "clap")]
#[derive(Debug, thiserror::Error)]
pub enum AgentArgsError {
    /// Neither `--node` nor `NODE_NAME`.
    #[error("--node: missing (give the node's name, or set NODE_NAME)")]
    NoNode,
    /// `--policy` is not a Topology Manager policy.
    #[error("--policy: {0}")]
    Policy(topoalign_kube_types::kubelet_settings::ConfigError),
    /// `--scope` is not a Topology Manager scope.
    #[error("--scope: {0}")]
    Scope(topoalign_kube_types::kubelet_settings::ConfigError),
    /// `--fabric-from`, `--domains`, `--rails` or a neighbour source could not be read or
    /// does not fit.
    #[error(transparent)]
    Facts(#[from] Box<FactsError>),
}

#[cfg(feature = "clap")]
impl AgentArgs {
    /// The agent's configuration on `topology`, with `settings` (those of
    /// `--kubelet-config`, read by the caller, else the defaults) under `--policy` and
    /// `--scope`, and the node's name from `--node`, else `node_name_env` ($NODE_NAME).
    pub fn config(
        &self,
        topology: Topology,
        mut settings: Settings,
        node_name_env: Option<String>,
    ) -> Result<Config, AgentArgsError> {
        let node = match self.node.clone().or(node_name_env) {
            Some(n) if !n.is_empty() => n,
            _ => return Err(AgentArgsError::NoNode),
        };
        if let Some(p) = &self.policy {
            settings.topology_manager_policy = p.parse().map_err(AgentArgsError::Policy)?;
        }
        if let Some(s) = &self.scope {
            settings.topology_manager_scope = s.parse().map_err(AgentArgsError::Scope)?;
        }
        let program = topoalign_discover::program_from_env();
        let rails = (self.rails.as_deref())
            .map(topoalign_node_facts::read_rail_source)
            .transpose()
            .map_err(Box::new)?;
        let facts = topoalign_node_facts::read_facts(
            &node,
            &topology,
            topoalign_node_facts::FactSources {
                fabric_from: self.fabric_from.as_deref(),
                domains: self.domains.as_deref(),
                rails: rails.as_ref(),
                wiring: &self.wiring,
                program: &program,
            },
        )
        .map_err(Box::new)?;
        let follower = Follower::new(self.wiring.clone(), rails);
        Ok(Config {
            node,
            topology,
            settings,
            socket: self.socket.clone(),
            interval: Duration::from_secs(self.interval.max(1)),
            heartbeat: Duration::from_secs(self.heartbeat.max(1)),
            label_hold: Duration::from_secs(self.label_hold),
            timeout: Duration::from_secs(self.timeout.max(1)),
            facts,
            follower,
            rescan_interval: self.rescan_interval,
        })
    }
}

/// Errors of the agent.
#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    /// The metrics address cannot be listened on, or its server failed.
    #[error("--listen/--metrics-addr {addr}: {source}")]
    Serve {
        /// The address.
        addr: std::net::SocketAddr,
        /// Why.
        source: std::io::Error,
    },
    /// Reading the kubelet failed.
    #[error(transparent)]
    Kubelet(#[from] PodResourcesError),
    /// Writing to the API server failed.
    #[error(transparent)]
    Publish(#[from] PublishError),
}

/// What one round would publish (the `--once` output).
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Output {
    /// The kubelet's answers.
    pub kubelet: crate::podresources::KubeletView,
    /// The derived report.
    pub report: Report,
    /// The NodeResourceTopology object.
    pub node_resource_topology: Value,
    /// The node labels (the domain labels among them).
    pub labels: BTreeMap<String, String>,
    /// The domain labels: those written, their sources, and what was left alone.
    pub domains: DomainLabels,
}

impl Output {
    /// The `--once` table: pods and devices in use, free counts per NUMA zone, the best
    /// free pair, the fabric and the labels.
    pub fn table(&self) -> String {
        use std::fmt::Write as _;
        let r = &self.report;
        let mut t = String::new();
        let _ = writeln!(t, "pods holding devices: {}", r.pods.len());
        let (gpus, nics) = (r.used.gpus.len(), r.used.nics.len());
        let _ = writeln!(t, "GPUs in use: {gpus}   NICs in use: {nics}");
        for (res, zones) in &r.zones {
            for (numa, c) in zones {
                let (free, all) = (c.available, c.allocatable);
                let _ = writeln!(t, "  {res:<28} numa {numa:>2}: {free} of {all} free");
            }
        }
        let best = r.best_pair.map_or("none", |c| c.as_str());
        let _ = writeln!(t, "best free pair: {best}");
        let _ = writeln!(t, "GPU fabric: {}", r.fabric);
        for (k, v) in &self.labels {
            let _ = writeln!(t, "label {k}={v}");
        }
        for (k, source) in &self.domains.sources {
            let _ = writeln!(t, "  {k} from {source}");
        }
        for n in &self.domains.notes {
            let _ = writeln!(t, "note: {n}");
        }
        if !r.unknown_ids.is_empty() {
            let ids = unknown_summary(&r.unknown_ids);
            let _ = writeln!(t, "warning: device IDs not on this topology: {ids}");
        }
        t
    }
}

/// Unknown device IDs shown in a log line or report: at most this many, then the count.
pub(crate) const UNKNOWN_SAMPLE: usize = 5;

/// `ids` in one short line: their count and the first [`UNKNOWN_SAMPLE`] of them.
pub(crate) fn unknown_summary(ids: &[String]) -> String {
    let shown: Vec<&str> = ids
        .iter()
        .take(UNKNOWN_SAMPLE)
        .map(String::as_str)
        .collect();
    if ids.len() <= UNKNOWN_SAMPLE {
        shown.join(", ")
    } else {
        format!("{} IDs, e.g. {} …", ids.len(), shown.join(", "))
    }
}

pub(crate) fn now_rfc3339() -> String {
    jiff::Timestamp::now()
        .round(jiff::Unit::Second)
        .map_or_else(|_| jiff::Timestamp::now().to_string(), |t| t.to_string())
}

/// Reads the kubelet once and builds what would be published (domain labels as on a
/// node that has none: `--once` does not read the node).
pub async fn once(cfg: &Config) -> Result<Output, AgentError> {
    let mut client = PodResourcesClient::connect(&cfg.socket, cfg.timeout).await?;
    let view = client.snapshot().await?;
    let domains = cfg.facts.labels(&BTreeMap::new(), &BTreeSet::new());
    Ok(output(cfg, view, &domains, &now_rfc3339()))
}

/// Builds the output for a kubelet view at a time, with the node's domain labels.
pub(crate) fn output(
    cfg: &Config,
    view: crate::podresources::KubeletView,
    domains: &DomainLabels,
    at: &str,
) -> Output {
    let report = build(&cfg.topology, &view);
    let mut object = nrt_object(&cfg.node, &cfg.topology, &report, &cfg.settings, at);
    add_facts(&mut object, &domains.write, cfg.facts.rails.as_ref());
    let mut labels = wanted(&report);
    labels.extend(domains.write.clone());
    Output {
        kubelet: view,
        report,
        node_resource_topology: object,
        labels,
        domains: domains.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::podresources::{Devices, KubeletView, PodDevices};

    #[test]
    fn the_once_table_counts_free_devices_per_zone_and_names_unknown_ids() {
        let topology = topoalign_profiles::get("mi300x-8").unwrap();
        let gpu = |i: usize| topology.gpu_bdf(i).to_string();
        let cfg = Config {
            node: "n1".into(),
            topology: topology.clone(),
            settings: Settings::default(),
            socket: PathBuf::from("/nonexistent.sock"),
            interval: Duration::from_secs(10),
            heartbeat: Duration::from_secs(60),
            label_hold: Duration::from_secs(120),
            timeout: Duration::from_secs(5),
            facts: NodeFacts::default(),
            follower: Follower::default(),
            rescan_interval: Duration::from_secs(60),
        };
        let gpus = |ids: Vec<String>| Devices {
            resource: "amd.com/gpu".into(),
            ids,
            numa: vec![0],
        };
        let view = KubeletView {
            allocatable: vec![gpus(vec![gpu(0), gpu(1), "ghost".into()])],
            allocatable_cpus: Vec::new(),
            pods: vec![PodDevices {
                namespace: "ml".into(),
                name: "train".into(),
                devices: vec![gpus(vec![gpu(0)])],
                cpus: Vec::new(),
            }],
        };
        let table = output(&cfg, view, &DomainLabels::default(), "2026-01-01T00:00:00Z").table();
        let lines: Vec<&str> = table.lines().collect();
        assert_eq!(lines[0], "pods holding devices: 1");
        assert_eq!(lines[1], "GPUs in use: 1   NICs in use: 0");
        assert_eq!(
            lines[2],
            format!("  {:<28} numa  0: 2 of 3 free", "amd.com/gpu")
        );
        assert!(lines[3].starts_with("best free pair: "), "{table}");
        assert!(lines[4].starts_with("GPU fabric: "), "{table}");
        let last = lines.last().unwrap();
        assert_eq!(*last, "warning: device IDs not on this topology: ghost");
    }

    #[test]
    fn many_unknown_ids_are_a_count_and_a_few_samples() {
        let ids: Vec<String> = (0..100_000).map(|i| format!("ghost-{i:06}")).collect();
        let s = unknown_summary(&ids);
        assert_eq!(
            s,
            "100000 IDs, e.g. ghost-000000, ghost-000001, ghost-000002, ghost-000003, ghost-000004 …"
        );
        assert!(s.len() < 200);
        assert_eq!(unknown_summary(&ids[..2]), "ghost-000000, ghost-000001");
    }
}
