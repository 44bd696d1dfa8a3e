//! `topoalign verify`: run inside a pod (or on a host) to report each visible GPU's best
//! visible NIC. It fails (exit 1) when no GPU is visible; with `--require CLASS` it is a
//! readiness probe / CI gate (exit 1 when any GPU's best NIC is worse than CLASS, or when
//! no NIC is visible).

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use topoalign_topology::PcieClass;

use crate::output::{Format, exit, print, warn, with_errors};

/// Arguments.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The directory that plays `/` for sysfs and procfs (a pod sees the host's /sys).
    #[arg(long, value_name = "DIR", default_value = "/")]
    pub sysfs_root: PathBuf,
    /// Where the device nodes given to this pod live.
    #[arg(long, value_name = "DIR", default_value = "/dev")]
    pub dev_root: PathBuf,
    /// Fail (exit 1) when any visible GPU's best visible NIC is worse than this class
    /// (PIX, PXB, PHB, NODE, SYS), or when no NIC is visible.
    #[arg(long, value_name = "CLASS", value_parser = clap::value_parser!(PcieClass))]
    pub require: Option<PcieClass>,
    /// Output format.
    #[arg(short = 'o', long, value_enum, default_value_t = Format::Table)]
    pub output: Format,
}

/// Runs the command.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    with_errors(args.output, || {
        let report = topoalign_verify::verify(&args.sysfs_root, &args.dev_root, std::env::vars())
            .with_context(|| {
            format!(
                "verifying devices (sysfs under {})",
                args.sysfs_root.display()
            )
        })?;
        warn(&report.warnings);
        print(&report, args.output, || report.table())?;
        let failures = report.gate(args.require);
        if let Some(require) = args.require
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
