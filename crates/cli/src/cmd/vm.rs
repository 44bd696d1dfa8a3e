//! `topoalign vm`: rewrite a libvirt domain XML so passed-through GPUs and NICs sit on the
//! guest NUMA cell of their host node (one pcie-expander-bus per cell) and, with
//! `--mirror-switches`, behind a guest PCIe switch when they share one on the host.

use std::process::ExitCode;

use topoalign_discover::Source;
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

/// Runs the command.
pub(crate) fn run(Args { topology, vm: args }: Args) -> anyhow::Result<ExitCode> {
    let inputs = args.read_inputs()?;
    let d = load(&topology, Source::host())?;
    let out = args.rewrite_on(inputs, &d.topology)?;
    let rw = &out.rewrite;
    warn(&rw.warnings());
    if args.explain {
        print(&rw.explained(), args.format, || rw.explain_text())?;
    } else if args.output_file.is_none() {
        write_stdout(&out.xml)?;
    }
    Ok(ExitCode::SUCCESS)
}
