//! `topoalign rails`: what each NIC of a node is cabled to (LLDP neighbours, InfiniBand
//! ports and a saved fabric scan), the rails a rail file gives it, and the leaf label
//! derived from its neighbours.

use std::path::PathBuf;
use std::process::ExitCode;

use serde::Serialize;
use topoalign_discover::Source;
use topoalign_fabric::{LeafDecision, NicRails, derive_leaf, neighbour_switch};
use topoalign_node_facts::{WiringFlags, read_rails, read_wiring};
use topoalign_render::Table;
use topoalign_topology::{Neighbours, Topology};

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

/// One NIC as printed.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct NicRow {
    pci: String,
    name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    switch: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    rail: Option<u32>,
}

/// The document of `-o json|yaml`.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct Report<'a> {
    node: &'a str,
    nics: Vec<NicRow>,
    neighbours: &'a Neighbours,
    #[serde(skip_serializing_if = "Option::is_none")]
    rails: Option<&'a NicRails>,
    leaf: &'a LeafDecision,
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
    let leaf = derive_leaf(topo, neighbours, rails.as_ref());
    let report = Report {
        node: &topo.name,
        nics: rows(topo, neighbours, rails.as_ref()),
        neighbours,
        rails: rails.as_ref(),
        leaf: &leaf,
    };
    print(&report, args.format, || table(&report))?;
    Ok(ExitCode::SUCCESS)
}

/// Every physical NIC with its switch and rail.
fn rows(topo: &Topology, n: &Neighbours, rails: Option<&NicRails>) -> Vec<NicRow> {
    (0..topo.nics.len())
        .filter(|&i| !topo.nics[i].is_vf())
        .map(|i| {
            let bdf = topo.nic_bdf(i);
            let switch = n.of(bdf).map(|f| match neighbour_switch(f) {
                Ok(s) => s.unwrap_or_default(),
                Err(why) => format!("? ({why})"),
            });
            NicRow {
                pci: bdf.to_string(),
                name: topo.nics[i].label().unwrap_or("").to_string(),
                switch: switch.filter(|s| !s.is_empty()),
                rail: rails.and_then(|r| r.rail_of(bdf)),
            }
        })
        .collect()
}

fn table(r: &Report<'_>) -> String {
    let mut t = Table::new(&["NIC", "NAME", "SWITCH", "PORT", "SUBNET", "RAIL"]);
    for row in &r.nics {
        let facts = row.pci.parse().ok().and_then(|b| r.neighbours.of(b));
        let ib = facts.and_then(|f| f.ib.as_ref());
        let port = ib
            .and_then(|p| p.switch.as_ref().map(|s| s.port.to_string()))
            .or_else(|| facts.and_then(|f| f.lldp.first()?.port_id.clone()));
        t.row(vec![
            row.pci.clone(),
            row.name.clone(),
            row.switch.clone().unwrap_or_else(|| "-".into()),
            port.unwrap_or_else(|| "-".into()),
            ib.and_then(|p| p.subnet)
                .map_or_else(|| "-".into(), |s| s.to_string()),
            row.rail.map_or_else(|| "-".into(), |r| r.to_string()),
        ]);
    }
    let mut out = format!("node {}\n{}", r.node, t.render(0));
    if let Some(rails) = r.rails {
        out.push_str(&format!("rails: {} ({})\n", rails.rails, rails.source));
        for note in &rails.notes {
            out.push_str(&format!("  {note}\n"));
        }
    }
    match &r.leaf.value {
        Some(v) => out.push_str(&format!("leaf: {v} ({})\n", r.leaf.why)),
        None => out.push_str(&format!("leaf: none ({})\n", r.leaf.why)),
    }
    out
}
