//! `topoalign rails`: what each NIC of a node is cabled to (LLDP neighbours, InfiniBand
//! ports and a saved fabric scan), the rails a rail file gives it, and the leaf label
//! derived from its neighbours.

use std::path::PathBuf;
use std::process::ExitCode;

use topoalign_discover::Source;
use topoalign_fabric::RailsReport;
use topoalign_node_facts::{WiringFlags, read_rails, read_wiring};
use topoalign_render::rails_table;

use crate::output::{Format, print, warn};
use crate::source::{TopologyArgs, load};

/// Arguments.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Examples:\n  topoalign rails --profile mi300x-8 --lldp-from deploy/gang/lldp-mi300x.json --rails deploy/gang/rails-switch.yaml\n  topoalign rails --profile mi300x-8 --lldp-from deploy/gang/lldp-mi300x.json -o json\n\nRail files: deploy/gang/rails.yaml (nearest-gpu or an operator map) and\ndeploy/gang/rails-switch.yaml (rule: switch, switches or switchPattern; rule: ib-subnet)."
)]
pub(crate) struct Args {
    /// Where to read the topology (default: sysfs of this host, `/`).
    #[command(flatten)]
    topology: TopologyArgs,
    /// What the NICs are cabled to, as `topoalign agent` and `topoalign driver` read it
    /// (`--ib-sysfs` defaults to the `--sysfs-root`, when given).
    #[command(flatten)]
    wiring: WiringFlags,
    /// A rail source (YAML or JSON): an operator map, or a rule (nearest-gpu, switch,
    /// ib-subnet).
    #[arg(long, value_name = "FILE")]
    rails: Option<PathBuf>,
    /// Output format.
    #[arg(short = 'o', long = "output", value_enum, default_value_t = Format::Table)]
    format: Format,
}

/// Runs the command.
pub(crate) fn run(args: Args) -> anyhow::Result<ExitCode> {
    let d = load(&args.topology, Source::host())?;
    let topo = &d.topology;
    let mut flags = args.wiring.clone();
    if flags.ib_sysfs.is_none() {
        flags.ib_sysfs = args.topology.sysfs_root.clone();
    }
    let wiring = read_wiring(&flags, topo)?.unwrap_or_default();
    warn(&wiring.warnings);
    let neighbours = &wiring.neighbours;
    let rails = (args.rails.as_deref())
        .map(|path| read_rails(path, topo, Some(&wiring)).map_err(anyhow::Error::from))
        .transpose()?;
    let report = RailsReport::new(topo, neighbours, rails.as_ref());
    print(&report, args.format, || rails_table(&report))?;
    Ok(ExitCode::SUCCESS)
}
