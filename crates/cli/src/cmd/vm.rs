//! `topoalign vm`: rewrite a libvirt domain XML so passed-through GPUs and NICs sit on the
//! guest NUMA cell of their host node (one pcie-expander-bus per cell) and, with
//! `--mirror-switches`, behind a guest PCIe switch when they share one on the host.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;
use topoalign_vm::{HostView, Options};

use crate::cmd::discover::host_sysfs;
use crate::output::{Format, print, warn, write_stdout};
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

/// Writes a file atomically, naming it and the flag in the error.
fn write(path: &Path, flag: &str, text: &str) -> anyhow::Result<()> {
    topoalign_atomic::write(path, text.as_bytes())
        .with_context(|| format!("writing {flag} {}", path.display()))
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
        mirror_switches: args.mirror_switches,
        mirror_host_bridges: args.mirror_host_bridges,
    };
    let mut rw = topoalign_vm::rewrite(&domain_xml, &host, opts.with_vmi(vmi.as_ref()))
        .with_context(|| format!("rewriting --domain {}", args.domain.display()))?;
    if let Some(v) = &vmi {
        rw.label_with(v);
    }
    let xml = match args.stand_ins {
        true => topoalign_vm::standin::stand_ins(&rw.xml, &host).context("building stand-ins")?,
        false => rw.xml.clone(),
    };
    if let Some(path) = &args.draw_guest {
        let topo =
            rw.guest.topology.as_ref().context(
                "--draw-guest: no device was moved, so there is no guest PCIe tree to draw",
            )?;
        write(path, "--draw-guest", &topoalign_render::svg::render(topo))?;
    }
    if let Some(path) = &args.output_file {
        write(path, "--output-file", &xml)?;
    }
    warn(&rw.warnings());
    if args.explain {
        print(&rw.explained(), args.format, || rw.explain_text())?;
    } else if args.output_file.is_none() {
        write_stdout(&xml)?;
    }
    Ok(ExitCode::SUCCESS)
}
