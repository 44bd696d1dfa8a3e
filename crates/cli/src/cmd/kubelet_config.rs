//! `topoalign kubelet-config`: show, change or roll back a KubeletConfiguration file.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::SystemTime;

use topoalign_kubelet::{Action, ShowReport, rollback};

use crate::output::{Format, exit, print, warn, with_errors};

/// Arguments.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    #[command(subcommand)]
    action: Action,
    /// Output format.
    #[arg(short, long, value_enum, default_value_t = Format::Table, global = true)]
    output: Format,
}

/// Runs the command.
pub(crate) fn run(args: Args) -> anyhow::Result<ExitCode> {
    let f = args.output;
    with_errors(f, || match args.action {
        Action::Show { file } => show(file, f),
        Action::Set(a) => {
            let (report, applied) = a.run(SystemTime::now(), &mut |w| warn(w))?;
            print(&report, f, || report.text(applied.as_ref()))?;
            Ok(ExitCode::SUCCESS)
        }
        Action::Rollback(a) => {
            let done = rollback(&a.file, a.options(), SystemTime::now(), None)?;
            warn(&done.warnings);
            print(&done, f, || done.text(&a.file))?;
            Ok(ExitCode::SUCCESS)
        }
    })
}

fn show(file: PathBuf, f: Format) -> anyhow::Result<ExitCode> {
    let report = ShowReport::read(&file)?;
    print(&report, f, || report.text())?;
    for e in &report.errors {
        eprintln!("error: {}: {e}", file.display());
    }
    warn(&report.warnings);
    Ok(exit(report.errors.is_empty()))
}
