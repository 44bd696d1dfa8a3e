//! `topoalign kubelet-config`: show, change or roll back a KubeletConfiguration file.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::SystemTime;

use topoalign_kubelet::{Action, SetArgs};
use topoalign_kubelet::{SetReport, ShowReport, apply_set, cpu_state_warning, plan_set, rollback};

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
        Action::Set(a) => set(a, f),
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

fn set(a: SetArgs, f: Format) -> anyhow::Result<ExitCode> {
    let request = a.request;
    if request.is_empty() {
        anyhow::bail!(
            "nothing to set: give --topology-manager-policy, --topology-manager-scope, --topology-manager-option, --cpu-manager-policy or --reserved-cpus"
        );
    }
    let plan = plan_set(&a.file, &request)?;
    warn(&plan.warnings);
    let state = a.remove_cpu_manager_state.as_deref();
    if plan.is_noop() || a.dry_run {
        let (from, to) = &plan.cpu_policy;
        warn(&Vec::from_iter(cpu_state_warning(
            from,
            to,
            state.is_some(),
        )));
        let report = SetReport::planned(&a.file, &plan);
        print(&report, f, || report.text(None))?;
        return Ok(ExitCode::SUCCESS);
    }
    let applied = apply_set(&plan, state, SystemTime::now(), None)?;
    warn(&applied.warnings);
    let report = SetReport::written(&a.file, &plan, &applied);
    print(&report, f, || report.text(Some(&applied)))?;
    Ok(ExitCode::SUCCESS)
}
