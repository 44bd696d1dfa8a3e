//! `topoalign driver`'s flags (the `clap` feature): every flag defined once, here (those
//! every process takes in the process kit's group), and read once at start into a
//! [`Start`] by [`DriverArgs::start`].

use std::path::{Path, PathBuf};
use std::time::Duration;

use topoalign_discover::Source;
use topoalign_discover::TopologyArgs;
use topoalign_dra::publish::{PairsPerGpu, PublishOptions};
use topoalign_fabric::RailSource;
use topoalign_kubelet_plugin::{FaultPoint, PluginArgs};
use topoalign_node_facts::{
    FactSources, Follower, MigSource, ModeSource, NodeFacts, WiringFlags, attach_caps, read_facts,
    read_rail_source,
};
use topoalign_probes::{ProcessArgs, ProcessDefaults, Threads};
use topoalign_render::Format;
use topoalign_topology::Topology;

use crate::error::DriverError;
use crate::start::{DriverConfig, Start};

/// The driver's defaults among the flags every process takes.
#[derive(Debug, Clone)]
pub struct DriverProcess;

impl ProcessDefaults for DriverProcess {
    /// Probes on loopback (the chart sets `0.0.0.0`).
    const LISTEN: &'static str = "127.0.0.1:9477";
    /// `info`, without kube-client's own error lines (every failed call is logged by the
    /// driver with what it was doing).
    const LOG_FILTER: &'static str = "info,kube_client=off";
    const THREADS: Threads = crate::run::THREADS;
}

/// Arguments of `topoalign driver`.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Examples:\n  topoalign driver --node-name n1 --profile dgx-h100 --dry-run\n  topoalign driver --node-name n1 --profile dgx-h100 --mig-want 1g.10gb=14,4g.40gb=1,3g.40gb=1 --dry-run -o table\n  topoalign driver --node-name n1 --profile dgx-h100 --rails deploy/gang/rails.yaml --dry-run -o yaml\n  topoalign driver --node-name n1 --profile dgx-h100 --rails deploy/gang/rails.yaml --domains deploy/gang/domains.yaml --write-domain-labels --dry-run -o table\n  topoalign driver --node-name n1 --profile dgx-h100 --mig-dynamic --dry-run -o table",
    group = clap::ArgGroup::new("domain_source").multiple(true).args(["fabric_from", "domains", "lldp_from", "ib_sysfs"])
)]
pub struct DriverArgs {
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
    /// Static MIG: a directory of this node's saved `nvidia-smi` outputs, any of
    /// `list.txt` (`nvidia-smi -L`), `lgi.txt` (`nvidia-smi mig -lgi`), `lci.txt`
    /// (`mig -lci`), `lgipp.txt` (`mig -lgipp`), and `query.txt` (`nvidia-smi -q`:
    /// a pending MIG mode change is warned about). Its GPU instances are published as
    /// MIG devices and MIG×NIC pairs.
    #[arg(long, value_name = "DIR", conflicts_with_all = ["mig_want", "mig_from_host"])]
    pub mig_state: Option<PathBuf>,
    /// Static MIG on a live node: run `nvidia-smi -L`, `nvidia-smi mig -lgi` and
    /// `nvidia-smi mig -lci` at start ($TOPOALIGN_NVIDIA_SMI names another binary; each
    /// bounded to 20 s) and publish the GPU instances they list; `nvidia-smi -q` warns of
    /// a pending MIG mode change. A node without MIG
    /// ("No MIG-enabled devices found") publishes whole GPUs. Instances get their
    /// /dev/nvidia-caps nodes from /proc/driver/nvidia-caps/mig-minors.
    #[arg(long, conflicts_with = "mig_want")]
    pub mig_from_host: bool,
    /// Static MIG without hardware: the instances `topoalign mig plan --want` places on
    /// the node's GPUs (`1g.10gb=14,3g.40gb=2`), published as if created so.
    #[arg(long, value_name = "PROFILE=COUNT,...")]
    pub mig_want: Option<String>,
    /// Dynamic MIG: publish every placement (profile@start) of each GPU in MIG mode as
    /// a MIG device (with its MIG×NIC pairs; not the whole GPU, unusable in MIG mode), consuming the GPU's
    /// memory-slice counters; the kubelet plugin creates the instance at that placement
    /// at prepare (`nvidia-smi mig -cgi ID:START -C`, $TOPOALIGN_NVIDIA_SMI), checkpoints
    /// it and destroys it at unprepare. MIG mode from `query.txt` of `--mig-state` or
    /// the live `nvidia-smi -q` with `--mig-from-host`; else every GPU with a MIG table.
    #[arg(long, conflicts_with = "mig_want")]
    pub mig_dynamic: bool,
    /// The node's rail source (YAML or JSON): an operator map (`rails: 8`, `nics:
    /// {NIC: rail}`) or `rule: nearest-gpu`. Each NIC's rail is then published as the
    /// `rail` attribute of its NIC and pair devices, for claims pinned to a job's rails
    /// (`topoalign gang`).
    #[arg(long, value_name = "FILE")]
    pub rails: Option<PathBuf>,
    /// The NVLink clique: `nvidia-smi` runs `nvidia-smi -q` ($TOPOALIGN_NVIDIA_SMI names
    /// another binary), a path reads its saved output. Written as nvidia.com/gpu.clique
    /// where the node has no NVLink-domain label from another tool (with
    /// `--write-domain-labels`).
    #[arg(long, value_name = "nvidia-smi|FILE", requires = "write_domain_labels")]
    pub fabric_from: Option<String>,
    /// The operator's domain file (`labels: {KEY: VALUE}` or `nodes: {NODE: {KEY:
    /// VALUE}}`, keys of Topograph, GFD or older Topograph): written where the node has no
    /// label of that level from another tool (with `--write-domain-labels`).
    #[arg(long, value_name = "FILE", requires = "write_domain_labels")]
    pub domains: Option<PathBuf>,
    /// What the NICs are cabled to: the rails of `rule: switch` and `rule: ib-subnet`,
    /// and the leaf written with `--write-domain-labels`. Read at start and again with
    /// every rescan (a recabled NIC moves to its new rail; a failed read keeps the last
    /// good neighbours).
    #[command(flatten)]
    pub wiring: WiringFlags,
    /// Write the node's domain labels from `--fabric-from`, the NICs' neighbours and
    /// `--domains` on its Node,
    /// at start (the leaf again when a rescan finds the NICs recabled) and only for
    /// levels no other tool labels (server-side apply, field
    /// manager `topoalign.dev`; needs `patch` on nodes: Helm value
    /// `driver.domainLabels.enabled`). With `--dry-run` the Node patch is printed with the
    /// other objects, as on a node without domain labels.
    #[arg(long, requires = "domain_source")]
    pub write_domain_labels: bool,
    /// Fault testing only: abort at this write step of prepare/unprepare
    /// (`checkpoint-created` … `cdi-renamed`, `cdi-removed`).
    #[arg(long, value_name = "STEP", hide = true)]
    pub crash_at: Option<FaultPoint>,
    /// Output format of `--dry-run`.
    #[arg(short = 'o', long = "output", value_enum, default_value_t = Format::Table)]
    pub format: Format,
    /// The flags every process takes: `--kubeconfig`, `--listen` (/healthz, /readyz and
    /// /metrics), `--log-format`, `--log-filter`.
    #[command(flatten)]
    pub process: ProcessArgs<DriverProcess>,
    /// The kubelet plugin's directories.
    #[command(flatten)]
    pub plugin: PluginArgs,
    /// Publish only; do not serve the kubelet plugin.
    #[arg(long)]
    pub no_plugin: bool,
    /// How often the topology is rediscovered and the published pool checked
    /// (e.g. `60s`, `5m`, `500ms`).
    #[arg(long, value_name = "DURATION", default_value = "60s", value_parser = topoalign_probes::parse_interval)]
    pub rescan_interval: Duration,
    /// On SIGTERM/SIGINT, how long to keep trying to delete this node's ResourceSlices
    /// (the default leaves room for the probe port's 2 s grace, so that the driver exits
    /// within 10 s of the signal even while the API server is away).
    #[arg(long, value_name = "DURATION", default_value = "7s", value_parser = topoalign_probes::parse_interval)]
    pub shutdown_timeout: Duration,
}

impl DriverArgs {
    /// Where the topology is read from: the flags' source, else this host's sysfs.
    pub fn source(&self) -> Source {
        self.topology.source(Source::host())
    }

    /// Where the MIG instances come from.
    pub fn mig_source(&self) -> MigSource {
        match (&self.mig_state, &self.mig_want) {
            (state, _) if self.mig_dynamic => MigSource::Dynamic(match state {
                Some(dir) => ModeSource::State(dir.clone()),
                None if self.mig_from_host => ModeSource::Host,
                None => ModeSource::All,
            }),
            _ if self.mig_from_host => MigSource::Host,
            (Some(dir), _) => MigSource::State(dir.clone()),
            (None, Some(want)) => MigSource::Want(want.clone()),
            (None, None) => MigSource::None,
        }
    }

    /// Which devices are published (MIG instances aside: [`Self::mig_source`] gives them,
    /// once the topology is known).
    pub fn publish_options(&self) -> PublishOptions {
        PublishOptions {
            pairs_per_gpu: self.pairs_per_gpu,
            ..PublishOptions::default()
        }
    }

    /// The node read once at start: discovered from [`Self::source`] (as every rescan
    /// discovers it; warnings logged), then [`Self::start_on`].
    pub fn start(&self) -> Result<Start, DriverError> {
        let found = topoalign_discover::load(&self.source())?;
        for w in &found.warnings {
            tracing::warn!(warning = %w, "discovery");
        }
        self.start_on(found.topology)
    }

    /// The driver on `topology`: its MIG layout (the flags' source, else a built-in
    /// profile's geometry; on a sysfs source each instance with its `/dev/nvidia-caps`
    /// nodes), the rail file of `--rails` read once, and the node's facts: the NICs'
    /// neighbours, the rails resolved on them and the leaf they give, and with
    /// `--write-domain-labels` the clique of `--fabric-from` and this node's labels in
    /// the file of `--domains`. Errors name the flag, the file and the field; the node's
    /// slices are checked as every publishing round builds them.
    pub fn start_on(&self, topology: Topology) -> Result<Start, DriverError> {
        self.start_with(topology, |p| Ok(read_rail_source(p)?))
    }

    /// [`Self::start_on`] with the rail file read by `read` (at most once: tests count
    /// it).
    fn start_with(
        &self,
        topology: Topology,
        read: impl FnOnce(&Path) -> Result<RailSource, DriverError>,
    ) -> Result<Start, DriverError> {
        let mut config = self.config();
        let profile = match &config.source {
            Source::Profile(name) => Some(name.as_str()),
            _ => None,
        };
        let (mut mig, mut warnings) = self.mig_source().layout_on(&topology, profile)?;
        if let Source::Sysfs { root, .. } = &config.source {
            warnings.extend(attach_caps(&mut mig, &topology, root));
        }
        config.options.mig = mig;
        let rails = self.rails.as_deref().map(read).transpose()?;
        let facts = self.node_facts(&topology, rails.as_ref())?;
        let start = Start {
            config,
            topology,
            facts,
            follower: Follower::new(self.wiring.clone(), rails),
            warnings,
        };
        start.check()?;
        Ok(start)
    }

    /// The node's facts on `topo` with the rail source `rails` (already read).
    fn node_facts(
        &self,
        topo: &Topology,
        rails: Option<&RailSource>,
    ) -> Result<NodeFacts, DriverError> {
        let program = topoalign_discover::program_from_env();
        Ok(read_facts(
            &self.node_name,
            topo,
            FactSources {
                fabric_from: self.fabric_from.as_deref(),
                domains: self.domains.as_deref(),
                rails,
                wiring: &self.wiring,
                program: &program,
            },
        )?)
    }

    /// The node agent's configuration (the MIG layout aside: [`Self::start_on`] reads it
    /// on the topology).
    pub fn config(&self) -> DriverConfig {
        DriverConfig {
            node_name: self.node_name.clone(),
            source: self.source(),
            options: self.publish_options(),
            write_domain_labels: self.write_domain_labels,
            rescan_interval: self.rescan_interval,
            removal_timeout: self.shutdown_timeout,
            plugin: (!self.no_plugin).then(|| {
                let mut p = self.plugin.config(self.node_name.clone());
                // Dynamic MIG reads a new instance's access nodes from the host's
                // mig-minors table under the sysfs root, as static MIG does.
                if let Source::Sysfs { root, .. } = self.source() {
                    p.host_root = root;
                }
                p
            }),
            listen: self.process.listen,
            crash_at: self.crash_at,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_args(argv: &[&str]) -> Result<DriverArgs, clap::Error> {
        use clap::{Args, FromArgMatches};
        let cmd = DriverArgs::augment_args(clap::Command::new("driver"));
        DriverArgs::from_arg_matches(&cmd.try_get_matches_from(argv)?)
    }

    #[test]
    fn the_flags_become_one_config() {
        let cli = parse_args(&[
            "driver",
            "--node-name",
            "n1",
            "--profile",
            "gb300-4",
            "--plugin-dir",
            "/p",
            "--rescan-interval",
            "5m",
        ])
        .unwrap();
        let cfg = cli.config();
        assert_eq!(cfg.source, Source::Profile("gb300-4".into()));
        assert_eq!(cfg.rescan_interval, Duration::from_secs(300));
        assert_eq!(cfg.removal_timeout, Duration::from_secs(7));
        let plugin = cfg.plugin.unwrap();
        assert_eq!(plugin.state_dir, PathBuf::from("/p/topoalign.dev"));
        assert_eq!(plugin.cdi_dir, PathBuf::from("/var/run/cdi"));
        let dynamic = |extra: &[&str]| {
            let mut argv = vec!["driver", "--node-name", "n1", "--mig-dynamic"];
            argv.extend(extra);
            parse_args(&argv).map(|a| a.mig_source())
        };
        assert_eq!(dynamic(&[]).unwrap(), MigSource::Dynamic(ModeSource::All));
        assert_eq!(
            dynamic(&["--mig-from-host"]).unwrap(),
            MigSource::Dynamic(ModeSource::Host)
        );
        assert_eq!(
            dynamic(&["--mig-state", "/s"]).unwrap(),
            MigSource::Dynamic(ModeSource::State(PathBuf::from("/s")))
        );
        assert!(dynamic(&["--mig-want", "1g.10gb=1"]).is_err());
        let no_plugin = parse_args(&["driver", "--node-name", "n1", "--no-plugin"]).unwrap();
        assert!(no_plugin.config().plugin.is_none());
    }

    #[test]
    fn domain_labels_are_opt_in_and_need_a_source() {
        let base = ["driver", "--node-name", "n1"];
        let with = |extra: &[&str]| {
            let mut argv = base.to_vec();
            argv.extend(extra);
            parse_args(&argv)
        };
        // A source without the flag, or the flag without a source: usage errors.
        let e = with(&["--domains", "d.yaml"]).unwrap_err().to_string();
        assert!(e.contains("--write-domain-labels"), "{e}");
        let e = with(&["--fabric-from", "nvidia-smi"])
            .unwrap_err()
            .to_string();
        assert!(e.contains("--write-domain-labels"), "{e}");
        let e = with(&["--write-domain-labels"]).unwrap_err().to_string();
        assert!(
            e.contains("--fabric-from") || e.contains("--domains"),
            "{e}"
        );
        // Without the flag no fact is read and no label written.
        let topo = topoalign_profiles::get("dgx-h100").unwrap();
        let plain = with(&[]).unwrap().start_on(topo.clone()).unwrap();
        assert!(!plain.config.write_domain_labels);
        assert_eq!(plain.facts, NodeFacts::default());

        let dir = std::env::temp_dir().join(format!("ta-drv-facts-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let d = dir.join("d.yaml");
        std::fs::write(
            &d,
            "labels: {fabric.topograph.run/tier-1: spine-1}\nnodes:\n  n1: {fabric.topograph.run/tier-0: leaf-7}\n",
        )
        .unwrap();
        let args = with(&["--write-domain-labels", "--domains", d.to_str().unwrap()]).unwrap();
        let start = args.start_on(topo.clone()).unwrap();
        assert!(start.config.write_domain_labels);
        // The dry run ends with the Node patch of the labels; without the flag, no patch.
        let (objects, _) = crate::dry_run::of_start(&start, "n1").unwrap();
        let (bare, notes) = crate::dry_run::of_start(&plain, "n1").unwrap();
        let node =
            |o: &crate::dry_run::DriverObject| matches!(o, crate::dry_run::DriverObject::Node(_));
        assert!(objects.last().is_some_and(node) && !bare.iter().any(node));
        assert_eq!((objects.len(), notes.len()), (bare.len() + 1, 0));
        let facts = start.facts;
        let (labels, file) = facts.operator.unwrap();
        assert_eq!(file, d.display().to_string());
        assert_eq!(labels["fabric.topograph.run/tier-0"], "leaf-7");
        assert_eq!(labels["fabric.topograph.run/tier-1"], "spine-1");
        assert!(facts.clique.is_none());
        // Bad input names the flag, the file and the field, as the agent's does.
        std::fs::write(&d, "labels: {example.com/rack: r1}\n").unwrap();
        let e = with(&["--write-domain-labels", "--domains", d.to_str().unwrap()])
            .unwrap()
            .start_on(topo.clone())
            .unwrap_err()
            .to_string();
        assert!(e.contains("d.yaml: labels.\"example.com/rack\""), "{e}");
        let absent = dir.join("absent.txt");
        let e = with(&[
            "--write-domain-labels",
            "--fabric-from",
            absent.to_str().unwrap(),
        ])
        .unwrap()
        .start_on(topo)
        .unwrap_err()
        .to_string();
        assert!(
            e.starts_with("--fabric-from ") && e.contains("absent.txt"),
            "{e}"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// With a neighbour source and `--write-domain-labels` the rail file is read once:
    /// the rails the inventory publishes and those the leaf is derived on come from that
    /// one source.
    #[test]
    fn the_rail_file_is_read_once_for_the_inventory_and_the_facts() {
        let topo = topoalign_profiles::get("mi300x-8").unwrap();
        let gang = concat!(env!("CARGO_MANIFEST_DIR"), "/../../deploy/gang");
        let rails = format!("{gang}/rails-switch.yaml");
        let lldp = format!("{gang}/lldp-mi300x.json");
        let base = ["driver", "--node-name", "n1", "--profile", "mi300x-8"];
        let with = |extra: &[&str]| {
            let mut argv = base.to_vec();
            argv.extend(extra);
            parse_args(&argv).unwrap()
        };
        let args = with(&[
            "--rails",
            &rails,
            "--lldp-from",
            &lldp,
            "--write-domain-labels",
        ]);
        let reads = std::cell::Cell::new(0);
        let counted = |p: &Path| {
            reads.set(reads.get() + 1);
            Ok(read_rail_source(p)?)
        };
        let start = args.start_with(topo.clone(), counted).unwrap();
        assert_eq!(reads.get(), 1);
        let source = read_rail_source(Path::new(&rails)).unwrap();
        assert_eq!(source.file, rails);
        assert_eq!(
            start.follower,
            Follower::new(args.wiring.clone(), Some(source.clone()))
        );
        let facts = &start.facts;
        let wiring = facts.wiring.as_ref().unwrap();
        let resolved =
            topoalign_fabric::nic_rails_with(&topo, &source, &wiring.neighbours).unwrap();
        assert_eq!(facts.rails.as_ref(), Some(&resolved));
        assert!(facts.leaf.as_ref().unwrap().value.is_some(), "{facts:?}");
        // The inventory publishes those rails: 8 NICs, one on each rail.
        assert_eq!(start.inventory(), {
            let mut plain =
                topoalign_dra::publish::Inventory::new(&topo, &PublishOptions::default());
            plain.set_rails(|bdf| resolved.rail_of(bdf));
            plain
        });
        // Neighbours without labels: still one read, and the neighbours reach the rails.
        reads.set(0);
        let args = with(&["--rails", &rails, "--lldp-from", &lldp]);
        let start = args.start_with(topo.clone(), counted).unwrap();
        assert_eq!(reads.get(), 1);
        assert!(!start.config.write_domain_labels);
        assert_eq!(start.facts.wiring.unwrap().neighbours, wiring.neighbours);
        assert_eq!(start.facts.rails, Some(resolved));
        // No rail file: nothing read.
        reads.set(0);
        let start = with(&[]).start_with(topo.clone(), counted).unwrap();
        assert_eq!(reads.get(), 0);
        assert!(start.facts.rails.is_none());
        // A missing file is named with its flag.
        let e = with(&["--rails", "/nonexistent/rails.yaml"])
            .start_on(topo)
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("--rails /nonexistent/rails.yaml: "), "{e}");
    }

    #[test]
    fn a_map_naming_no_nic_of_the_node_is_an_error_naming_file_and_field() {
        let topo = topoalign_profiles::get("dgx-h100").unwrap();
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("r.yaml");
        std::fs::write(&file, "rails: 2\nnics: {mlx5_99: 0}\n").unwrap();
        let e = parse_args(&[
            "driver",
            "--node-name",
            "n1",
            "--rails",
            file.to_str().unwrap(),
        ])
        .unwrap()
        .start_on(topo)
        .unwrap_err()
        .to_string();
        let name = file.display();
        assert!(
            e.starts_with(&format!("--rails {name}: nics.mlx5_99: no such NIC")),
            "{e}"
        );
    }
}
