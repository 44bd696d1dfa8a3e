//! `topoalign driver`: the node agent. Publishes this node's GPUs, NICs and GPU+NIC pairs
//! as ResourceSlices and serves the kubelet DRA plugin; `--dry-run` prints every object
//! it would create instead (a stable interface: `-o yaml` is one kubectl-applicable YAML
//! stream, `-o json` a `v1` List; with `--write-domain-labels` the Node patch of the
//! node's domain labels comes last, and what would not be written is noted on stderr).
//! The flags are `topoalign_driver::DriverArgs`; the node is read once, at start
//! (`DriverArgs::start`).

use std::process::ExitCode;

use anyhow::Context;
use topoalign_driver::dry_run;
use topoalign_probes::shutdown_signals;

use crate::output::{Format, print_structured, print_yaml_stream, with_errors, write_stdout};
use crate::source::load;

/// Arguments.
pub(crate) type Args = topoalign_driver::DriverArgs;

/// Runs the command.
pub(crate) fn run(args: Args) -> anyhow::Result<ExitCode> {
    if args.dry_run {
        return with_errors(args.format, || dry(&args));
    }
    let what = format!(
        "driver for node {:?} ({})",
        args.node_name,
        args.source().describe()
    );
    let start = args.start().context(what.clone())?;
    crate::output::warn(&start.warnings);
    let rt = args
        .process
        .runtime()
        .context("starting the async runtime")?;
    rt.block_on(async {
        let signalled = shutdown_signals().context("installing the SIGTERM/SIGINT handlers")?;
        let client = args.process.client().await?;
        topoalign_driver::run(start, client, signalled).await?;
        anyhow::Ok(())
    })
    .context(what)?;
    Ok(ExitCode::SUCCESS)
}

fn dry(args: &Args) -> anyhow::Result<ExitCode> {
    let d = load(&args.topology, args.source())?;
    let start = args.start_on(d.topology)?;
    crate::output::warn(&start.warnings);
    let (objects, notes) = dry_run::of_start(&start, &args.node_name)
        .with_context(|| format!("node {:?}", args.node_name))?;
    for n in &notes {
        eprintln!("note: {n}");
    }
    match args.format {
        Format::Yaml => print_yaml_stream(&objects)?,
        Format::Json => print_structured(&dry_run::list(&objects), Format::Json)?,
        Format::Table => write_stdout(&dry_run::table(&objects))?,
    }
    Ok(ExitCode::SUCCESS)
}
