//! `topoalign verify`: run inside a pod (or on a host) to report each visible GPU's best
//! visible NIC; with `--require CLASS` it is a readiness probe / CI gate (exit 1 when any
//! GPU's best NIC is worse than CLASS, or when no GPU or no NIC is visible).

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use topoalign_topology::PcieClass;

use crate::output::{Format, print_structured};

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
    /// (PIX, PXB, PHB, NODE, SYS), or when no GPU or no NIC is visible.
    #[arg(long, value_name = "CLASS", value_parser = parse_class)]
    pub require: Option<PcieClass>,
    /// Output format.
    #[arg(short = 'o', long, value_enum, default_value_t = Format::Table)]
    pub output: Format,
}

/// Parses a class name for clap.
fn parse_class(s: &str) -> Result<PcieClass, String> {
    s.parse::<PcieClass>().map_err(|e| e.to_string())
}

/// Runs the command.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let report = topoalign_verify::verify(&args.sysfs_root, &args.dev_root, std::env::vars())
        .with_context(|| {
            format!(
                "verifying devices (sysfs under {}, device nodes under {})",
                args.sysfs_root.display(),
                args.dev_root.display()
            )
        })?;
    for w in &report.warnings {
        eprintln!("warning: {w}");
    }
    match args.output {
        Format::Table => print!("{}", report.table()),
        f => print_structured(&report, f)?,
    }
    let Some(require) = args.require else {
        return Ok(ExitCode::SUCCESS);
    };
    let failures = report.failures(require);
    if failures.is_empty() {
        eprintln!("ok: every visible GPU has a {require}-or-better NIC");
        Ok(ExitCode::SUCCESS)
    } else {
        for f in &failures {
            eprintln!("FAIL: {f}");
        }
        Ok(ExitCode::from(1))
    }
}
