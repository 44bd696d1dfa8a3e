//! `topoalign kubelet-config`: show, change or roll back a KubeletConfiguration file.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::SystemTime;

use topoalign_kubelet::{
    ChangeRequest, DEFAULT_CPU_MANAGER_STATE, RollbackOptions, SetReport, ShowReport, apply_set,
    cpu_state_warning, plan_set, rollback,
};

use crate::output::{Format, exit, print, warn, with_errors};

/// Arguments.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(subcommand)]
    action: Action,
    /// Output format.
    #[arg(short, long, value_enum, default_value_t = Format::Table, global = true)]
    output: Format,
}

#[derive(Debug, clap::Subcommand)]
enum Action {
    /// Print the topology-relevant settings, kubelet defaults filled in and marked
    /// (exit 1 when the kubelet would refuse the file).
    Show {
        /// The KubeletConfiguration file (JSON or YAML).
        file: PathBuf,
    },
    /// Set the Topology Manager and CPU manager settings in one validated, atomic write.
    ///
    /// Every other field, and the file's order, is preserved (YAML comments too). The old
    /// content is saved as FILE.bak.<UTC timestamp> first; a symlinked file is replaced at
    /// its target. Invalid results are refused and the file is left untouched.
    Set(SetArgs),
    /// Restore the newest FILE.bak.* (or --backup PATH), backing up the current file first
    /// as FILE.bak.<UTC>.pre-rollback. A second rollback refuses to restore that copy
    /// (which would undo the first) unless --force or --backup names it.
    Rollback {
        /// The KubeletConfiguration file to restore.
        file: PathBuf,
        /// Restore this backup instead of the newest FILE.bak.*.
        #[arg(long, value_name = "PATH")]
        backup: Option<PathBuf>,
        /// Restore the newest backup even when the last rollback made it.
        #[arg(long)]
        force: bool,
        /// Remove the CPU manager checkpoint when the restored file has another CPU manager
        /// policy (default path /var/lib/kubelet/cpu_manager_state).
        #[arg(long, value_name = "PATH", num_args = 0..=1, default_missing_value = DEFAULT_CPU_MANAGER_STATE)]
        remove_cpu_manager_state: Option<PathBuf>,
    },
}

#[derive(Debug, clap::Args)]
struct SetArgs {
    /// The KubeletConfiguration file (JSON or YAML).
    file: PathBuf,
    /// topologyManagerPolicy: none | best-effort | restricted | single-numa-node.
    #[arg(long, value_name = "POLICY")]
    topology_manager_policy: Option<String>,
    /// topologyManagerScope: container | pod.
    #[arg(long, value_name = "SCOPE")]
    topology_manager_scope: Option<String>,
    /// A topologyManagerPolicyOptions entry NAME=VALUE (repeatable), e.g.
    /// prefer-closest-numa-nodes=true, max-allowable-numa-nodes=8. Merged into the existing options.
    #[arg(long = "topology-manager-option", value_name = "NAME=VALUE", value_parser = topoalign_tm::parse_option_arg)]
    topology_manager_options: Vec<(String, String)>,
    /// cpuManagerPolicy: none | static (static needs reserved CPUs).
    #[arg(long, value_name = "POLICY")]
    cpu_manager_policy: Option<String>,
    /// reservedSystemCPUs, a CPU list such as 0-1,96-97.
    #[arg(long, value_name = "LIST")]
    reserved_cpus: Option<String>,
    /// Remove the CPU manager checkpoint when the CPU manager policy changes
    /// (default path /var/lib/kubelet/cpu_manager_state).
    #[arg(long, value_name = "PATH", num_args = 0..=1, default_missing_value = DEFAULT_CPU_MANAGER_STATE)]
    remove_cpu_manager_state: Option<PathBuf>,
    /// Print the change as a unified diff and write nothing.
    #[arg(long)]
    dry_run: bool,
}

/// Runs the command.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let f = args.output;
    with_errors(f, || match args.action {
        Action::Show { file } => show(file, f),
        Action::Set(a) => set(a, f),
        Action::Rollback {
            file,
            backup,
            force,
            remove_cpu_manager_state,
        } => {
            let options = RollbackOptions {
                backup: backup.as_deref(),
                force,
                cpu_state: remove_cpu_manager_state.as_deref(),
            };
            let done = rollback(&file, options, SystemTime::now(), None)?;
            warn(&done.warnings);
            print(&done, f, || done.text(&file))?;
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
    let request = ChangeRequest {
        topology_manager_policy: a.topology_manager_policy,
        topology_manager_scope: a.topology_manager_scope,
        topology_manager_options: a.topology_manager_options,
        cpu_manager_policy: a.cpu_manager_policy,
        reserved_cpus: a.reserved_cpus,
    };
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
