//! `topoalign vm`: rewrite a libvirt domain XML so passed-through GPUs and NICs sit on the
//! guest NUMA cell of their host node (one pcie-expander-bus per cell) and, with
//! `--mirror-switches`, behind a guest PCIe switch when they share one on the host.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;
use topoalign_render::table::Table;
use topoalign_vm::{HostView, Options, Report, Rewrite};

use crate::cmd::discover::host_sysfs;
use crate::output::{Format, print_structured};
use crate::source::TopologyArgs;

/// Arguments.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Where to read the host topology (default: sysfs of this host, `/`).
    #[command(flatten)]
    pub topology: TopologyArgs,
    /// libvirt `virsh capabilities` XML: its NUMA cells replace the topology's node → CPU
    /// map (KubeVirt keeps it at /var/lib/kubevirt-node-labeller/capabilities.xml).
    #[arg(long, value_name = "FILE")]
    pub capabilities: Option<PathBuf>,
    /// The libvirt domain XML to rewrite (as virt-launcher renders it, or `virsh dumpxml`).
    #[arg(long, value_name = "FILE")]
    pub domain: PathBuf,
    /// A KubeVirt VirtualMachineInstance (JSON): its `topoalign.io/mirror-switches`
    /// annotation sets --mirror-switches, its device names label the explanation.
    #[arg(long, value_name = "FILE")]
    pub vmi: Option<PathBuf>,
    /// Give devices that share a host PCIe switch one guest switch (PIX in the guest).
    #[arg(long)]
    pub mirror_switches: bool,
    /// One pcie-expander-bus per host bridge (not per guest cell): devices under different
    /// host bridges of one node are NODE in the guest as on the host, not PHB.
    #[arg(long)]
    pub mirror_host_bridges: bool,
    /// Print the host → guest table instead of the XML (the XML still goes to
    /// --output-file when given).
    #[arg(long)]
    pub explain: bool,
    /// Write the XML atomically to FILE instead of stdout.
    #[arg(long, value_name = "FILE")]
    pub output_file: Option<PathBuf>,
    /// Replace each passed-through device by an emulated one at its new guest address
    /// (e1000e for NICs with the host address in the MAC, virtio-gpu for GPUs): boots the
    /// layout under QEMU without the hardware.
    #[arg(long)]
    pub stand_ins: bool,
    /// Also draw the guest's predicted topology as SVG into FILE.
    #[arg(long, value_name = "FILE")]
    pub draw_guest: Option<PathBuf>,
    /// Format of --explain.
    #[arg(short = 'o', long = "output", value_enum, default_value_t = Format::Table)]
    pub format: Format,
}

/// Reads a file, naming it and the flag in the error.
fn read(path: &Path, flag: &str) -> anyhow::Result<String> {
    std::fs::read_to_string(path).with_context(|| format!("reading {flag} {}", path.display()))
}

/// Runs the command.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let domain_xml = read(&args.domain, "--domain")?;
    let vmi = match &args.vmi {
        Some(p) => Some(
            topoalign_vm::vmi::parse(&read(p, "--vmi")?)
                .with_context(|| format!("--vmi {}", p.display()))?,
        ),
        None => None,
    };
    let d = args.topology.load(host_sysfs())?;
    let mut host = HostView::from_topology(&d.topology);
    if let Some(c) = &args.capabilities {
        host = host
            .with_capabilities(&read(c, "--capabilities")?)
            .with_context(|| format!("--capabilities {}", c.display()))?;
    }
    let opts = Options {
        mirror_switches: args.mirror_switches
            || vmi
                .as_ref()
                .and_then(|v| v.mirror_switches)
                .unwrap_or(false),
        mirror_host_bridges: args.mirror_host_bridges
            || vmi
                .as_ref()
                .and_then(|v| v.mirror_host_bridges)
                .unwrap_or(false),
    };
    let mut rw = topoalign_vm::rewrite(&domain_xml, &host, opts)
        .with_context(|| format!("rewriting --domain {}", args.domain.display()))?;
    if let Some(v) = &vmi {
        for dev in &mut rw.report.devices {
            if let Some(name) = dev.alias.as_ref().and_then(|a| v.devices.get(a)) {
                dev.label = format!("{name}: {}", dev.label)
                    .trim_end_matches(": ")
                    .to_string();
            }
        }
    }
    let xml = if args.stand_ins {
        topoalign_vm::standin::stand_ins(&rw.xml, &host).context("building stand-ins")?
    } else {
        rw.xml.clone()
    };
    if let Some(path) = &args.draw_guest {
        let topo =
            rw.guest.topology.as_ref().context(
                "--draw-guest: no device was moved, so there is no guest PCIe tree to draw",
            )?;
        topoalign_atomic::write(path, topoalign_render::svg::render(topo).as_bytes())
            .with_context(|| format!("writing --draw-guest {}", path.display()))?;
    }
    if let Some(path) = &args.output_file {
        topoalign_atomic::write(path, xml.as_bytes())
            .with_context(|| format!("writing --output-file {}", path.display()))?;
    }
    for dev in rw.report.devices.iter().filter(|d| d.left.is_some()) {
        eprintln!(
            "warning: {} (host {}) left in place: {}",
            dev.element,
            dev.host_address,
            dev.left.as_deref().unwrap_or("")
        );
    }
    if args.explain {
        explain(&rw, args.format)?;
    } else if args.output_file.is_none() {
        std::io::stdout()
            .lock()
            .write_all(xml.as_bytes())
            .context("writing to stdout")?;
    }
    Ok(ExitCode::SUCCESS)
}

/// What `--explain -o json|yaml` prints.
#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct Explained<'a> {
    #[serde(flatten)]
    report: &'a Report,
    guest: &'a topoalign_vm::guest::GuestTopology,
}

fn explain(rw: &Rewrite, format: Format) -> anyhow::Result<()> {
    if format != Format::Table {
        return print_structured(
            &Explained {
                report: &rw.report,
                guest: &rw.guest,
            },
            format,
        );
    }
    let r = &rw.report;
    let mirrored = match (r.mirror_switches, r.mirror_host_bridges) {
        (true, true) => " (switches and host bridges mirrored)",
        (true, false) => " (switches mirrored)",
        (false, true) => " (host bridges mirrored)",
        (false, false) => "",
    };
    let mut out = format!("host {}: guest cells → host NUMA nodes{mirrored}\n", r.host);
    let mut cells = Table::new(&["CELL", "VCPUS", "HOST NODE", "EVIDENCE"]);
    for c in &r.cells {
        cells.row(vec![
            c.cell.to_string(),
            c.vcpus.clone(),
            c.host_node.map_or("-".into(), |n| n.to_string()),
            c.evidence.clone(),
        ]);
    }
    out.push_str(&cells.render(2));
    out.push_str("\ndevices:\n");
    let mut t = Table::new(&[
        "DEVICE",
        "HOST",
        "HOST NUMA",
        "HOST SWITCH",
        "GUEST CELL",
        "GUEST",
        "CONTROLLER CHAIN",
    ]);
    for d in &r.devices {
        let guest_bdf = rw
            .guest
            .devices
            .iter()
            .find(|g| g.host == d.host_address)
            .map(|g| g.guest.to_string());
        t.row(vec![
            if d.label.is_empty() {
                d.alias.clone().unwrap_or_else(|| d.element.clone())
            } else {
                d.label.clone()
            },
            d.host_address.to_string(),
            d.host_numa.map_or("-".into(), |n| n.to_string()),
            d.host_switch.map_or("-".into(), |s| s.to_string()),
            d.guest_cell.map_or("-".into(), |c| c.to_string()),
            guest_bdf.unwrap_or_else(|| "-".into()),
            if d.chain.is_empty() {
                format!("left in place: {}", d.left.as_deref().unwrap_or(""))
            } else {
                format!("pcie.0 → {}", d.chain.join(" → "))
            },
        ]);
    }
    out.push_str(&t.render(2));
    if !rw.guest.pairs.is_empty() {
        out.push_str("\nGPU ↔ NIC (nvidia-smi topo -m class):\n");
        let mut p = Table::new(&["GPU", "NIC", "HOST", "GUEST"]);
        for pair in &rw.guest.pairs {
            p.row(vec![
                pair.gpu.to_string(),
                pair.nic.to_string(),
                pair.host.clone().unwrap_or_else(|| "-".into()),
                pair.guest.clone(),
            ]);
        }
        out.push_str(&p.render(2));
    }
    if !r.expanders.is_empty() {
        out.push_str(&format!(
            "\nexpander bus ranges (pcie.0 may use buses up to {}):\n",
            r.pcie0_floor
        ));
        let mut e = Table::new(&["CELL", "INDEX", "BUSNR", "LAST BUS"]);
        for x in &r.expanders {
            e.row(vec![
                x.cell.to_string(),
                x.index.to_string(),
                x.bus_nr.to_string(),
                x.last_bus.to_string(),
            ]);
        }
        out.push_str(&e.render(2));
    }
    std::io::stdout()
        .lock()
        .write_all(out.as_bytes())
        .context("writing to stdout")?;
    Ok(())
}
