//! `topoalign verify`: run inside a pod (or on a host) to report each visible GPU's best
//! visible NIC. It fails (exit 1) when no GPU is visible; with `--require CLASS` it is a
//! readiness probe / CI gate (exit 1 when any GPU's best NIC is worse than CLASS, or when
//! no NIC is visible).

use std::process::ExitCode;

use anyhow::Context;
use topoalign_verify::VerifyArgs;

use crate::output::{Format, exit, print, warn, with_errors};

/// Arguments.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    #[command(flatten)]
    pub verify: VerifyArgs,
    /// Output format.
    #[arg(short = 'o', long, value_enum, default_value_t = Format::Table)]
    pub output: Format,
}

/// Runs the command.
pub(crate) fn run(args: Args) -> anyhow::Result<ExitCode> {
    let root = args.verify.sysfs_root.display();
    with_errors(args.output, || {
        let report = (args.verify.verify(std::env::vars()))
            .with_context(|| format!("verifying devices (sysfs under {root})"))?;
        warn(&report.warnings);
        print(&report, args.output, || report.table())?;
        let failures = report.gate(args.verify.require);
        if let Some(require) = args.verify.require
            && failures.is_empty()
        {
            eprintln!("ok: every visible GPU has a {require}-or-better NIC");
        }
        for f in &failures {
            eprintln!("FAIL: {f}");
        }
        Ok(exit(failures.is_empty()))
    })
}
