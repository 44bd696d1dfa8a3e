//! `topoalign vm`: rewrite a libvirt domain XML so passed-through GPUs and NICs sit on the
//! guest NUMA cell of their host node (one pcie-expander-bus per cell) and, with
//! `--mirror-switches`, behind a guest PCIe switch when they share one on the host.

use std::path::Path;
use std::process::ExitCode;

use anyhow::Context;
use topoalign_discover::Source;
use topoalign_vm::HostView;
use topoalign_vm::VmArgs;

use crate::output::{print, warn, write_stdout};
use crate::source::{TopologyArgs, load};

/// Arguments.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Examples:\n  topoalign vm --profile mi300x-8 --domain d.xml --mirror-switches --explain\n  topoalign vm --profile mi300x-8 --domain d.xml --vmi deploy/kubevirt/vmi-example.yaml"
)]
pub(crate) struct Args {
    /// Where to read the host topology (default: sysfs of this host, `/`).
    #[command(flatten)]
    pub topology: TopologyArgs,
    #[command(flatten)]
    pub vm: VmArgs,
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
pub(crate) fn run(Args { topology, vm: args }: Args) -> anyhow::Result<ExitCode> {
    let domain_xml = read(&args.domain, "--domain")?;
    let vmi = match &args.vmi {
        Some(p) => Some(
            topoalign_vm::parse_vmi(&read(p, "--vmi")?)
                .with_context(|| format!("--vmi {}", p.display()))?,
        ),
        None => None,
    };
    let d = load(&topology, Source::host())?;
    let mut host = HostView::from_topology(&d.topology);
    if let Some(c) = &args.capabilities {
        host = host
            .with_capabilities(&read(c, "--capabilities")?)
            .with_context(|| format!("--capabilities {}", c.display()))?;
    }
    let opts = args.options.with_vmi(vmi.as_ref());
    let mut rw = topoalign_vm::rewrite(&domain_xml, &host, opts)
        .with_context(|| format!("rewriting --domain {}", args.domain.display()))?;
    if let Some(v) = &vmi {
        rw.label_with(v);
    }
    let xml = match args.stand_ins {
        true => topoalign_vm::stand_ins(&rw.xml, &host).context("building stand-ins")?,
        false => rw.xml.clone(),
    };
    if let Some(path) = &args.draw_guest {
        let topo =
            rw.guest.topology.as_ref().context(
                "--draw-guest: no device was moved, so there is no guest PCIe tree to draw",
            )?;
        write(path, "--draw-guest", &topoalign_render::render_svg(topo))?;
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
