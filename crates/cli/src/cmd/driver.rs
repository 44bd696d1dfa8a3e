//! `topoalign driver`: the node agent. Publishes this node's GPUs, NICs and GPU+NIC pairs
//! as ResourceSlices and serves the kubelet DRA plugin; `--dry-run` prints every object
//! it would create instead (a stable interface: `-o yaml` is one kubectl-applicable YAML
//! stream, `-o json` a `v1` List). The flags are `topoalign_driver::args::DriverArgs`.

use std::process::ExitCode;

use anyhow::Context;
use topoalign_driver::dry_run;

use crate::output::{Format, print_structured, print_yaml_stream, with_errors, write_stdout};
use crate::source::load;

/// Arguments.
pub type Args = topoalign_driver::args::DriverArgs;

/// Runs the command.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    if args.dry_run {
        return with_errors(args.format, || dry(&args));
    }
    let what = args.source().describe();
    topoalign_driver::run_blocking(args.config())
        .with_context(|| format!("driver for node {:?} ({what})", args.node_name))?;
    Ok(ExitCode::SUCCESS)
}

fn dry(args: &Args) -> anyhow::Result<ExitCode> {
    let d = load(&args.topology, args.source())?;
    let objects = dry_run::objects(&d.topology, &args.node_name, &args.publish_options())
        .with_context(|| format!("node {:?}", args.node_name))?;
    match args.format {
        Format::Yaml => print_yaml_stream(&objects)?,
        Format::Json => print_structured(&dry_run::list(&objects), Format::Json)?,
        Format::Table => write_stdout(&dry_run::table(&objects))?,
    }
    Ok(ExitCode::SUCCESS)
}
