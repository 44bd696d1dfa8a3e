//! `topoalign matrix`: the pair matrix in `nvidia-smi topo -m` layout, for any vendor.

use std::process::ExitCode;

use topoalign_render::matrix::{MatrixStyle, render};
use topoalign_topology::PairMatrix;
use topoalign_topology::matrix::MatrixOptions;

use crate::cmd::discover::host_sysfs;
use crate::output::{Format, print_structured, write_stdout};
use crate::source::TopologyArgs;

/// How the matrix is printed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum MatrixFormat {
    /// The `nvidia-smi topo -m` text (tab-separated unless `--aligned`).
    #[default]
    Table,
    /// The classified matrix as JSON (`numaAffinity` null when unknown).
    Json,
    /// The classified matrix as YAML.
    Yaml,
}

/// Arguments.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Where to read the topology (default: sysfs of this host, `/`).
    #[command(flatten)]
    pub topology: TopologyArgs,
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
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let d = args.topology.load(host_sysfs())?;
    let opts = MatrixOptions {
        include_vfs: args.vfs,
        include_non_rdma: args.all_nics,
    };
    let m = PairMatrix::build(&d.topology, opts);
    let style = match args.aligned {
        true => MatrixStyle::Aligned,
        false => MatrixStyle::Tabs,
    };
    match args.format {
        MatrixFormat::Table => write_stdout(&render(&m, style))?,
        MatrixFormat::Json => print_structured(&m, Format::Json)?,
        MatrixFormat::Yaml => print_structured(&m, Format::Yaml)?,
    }
    Ok(ExitCode::SUCCESS)
}
