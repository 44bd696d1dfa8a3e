//! `topoalign matrix`: the pair matrix in `nvidia-smi topo -m` layout, for any vendor.

use std::process::ExitCode;

use topoalign_discover::Source;
use topoalign_node_facts::MigViewFlags;
use topoalign_render::{MatrixFormat, WithMig};
use topoalign_render::{MatrixStyle, render_matrix_with_mig};
use topoalign_topology::MatrixOptions;
use topoalign_topology::PairMatrix;

use crate::output::{print_structured, write_stdout};
use crate::source::{TopologyArgs, load, mig_overlay};

/// Arguments.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Examples:\n  topoalign matrix --profile gb300-4\n  topoalign matrix --profile dgx-h100-mig --aligned"
)]
pub(crate) struct Args {
    /// Where to read the topology (default: sysfs of this host, `/`).
    #[command(flatten)]
    pub topology: TopologyArgs,
    /// MIG instances to add as rows (`MIG0`, …: the parent GPU's classes; default: a
    /// built-in profile's own geometry).
    #[command(flatten)]
    pub mig: MigViewFlags,
    /// Also list SR-IOV virtual functions as NIC columns.
    #[arg(long)]
    pub vfs: bool,
    /// Also list NICs without an RDMA device (nvidia-smi omits them).
    #[arg(long)]
    pub all_nics: bool,
    /// Pad columns with spaces instead of separating them with tabs.
    #[arg(long)]
    pub aligned: bool,
    /// Output format.
    #[arg(short = 'o', long = "output", value_enum, default_value_t = MatrixFormat::Table)]
    pub format: MatrixFormat,
}

/// Runs the command.
pub(crate) fn run(args: Args) -> anyhow::Result<ExitCode> {
    let d = load(&args.topology, Source::host())?;
    let opts = MatrixOptions {
        include_vfs: args.vfs,
        include_non_rdma: args.all_nics,
    };
    let m = PairMatrix::build(&d.topology, opts);
    let mig = mig_overlay(&args.mig, args.topology.profile.as_deref(), &d.topology)?;
    let rows = mig.matrix_rows(&d.topology, &m);
    let style = match args.aligned {
        true => MatrixStyle::Aligned,
        false => MatrixStyle::Tabs,
    };
    match args.format.structured() {
        None => write_stdout(&render_matrix_with_mig(&m, style, &rows))?,
        Some(f) => print_structured(
            &WithMig {
                value: &m,
                mig: &rows,
            },
            f,
        )?,
    }
    Ok(ExitCode::SUCCESS)
}
