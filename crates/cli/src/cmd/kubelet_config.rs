//! `topoalign kubelet-config`: show, change or roll back a KubeletConfiguration file.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::SystemTime;

use anyhow::Context;
use serde_json::Value;
use topoalign_kubelet::{
    ChangeRequest, ConfigDocument, DEFAULT_CPU_MANAGER_STATE, NoHook, apply_set, parse_option_arg,
    plan_set, rollback, topology_settings, validate,
};

use crate::output::{Format, print_structured};

/// Arguments.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(subcommand)]
    action: Action,
}

#[derive(Debug, clap::Subcommand)]
enum Action {
    /// Print the topology-relevant settings, kubelet defaults filled in and marked.
    Show(ShowArgs),
    /// Set the Topology Manager and CPU manager settings in one validated, atomic write.
    ///
    /// Every other field, and the file's order, is preserved (YAML comments too). The old
    /// content is saved as FILE.bak.<UTC timestamp> first. Invalid results are refused
    /// and the file is left untouched.
    Set(SetArgs),
    /// Restore the newest FILE.bak.* (or --backup PATH), backing up the current file first.
    Rollback(RollbackArgs),
}

#[derive(Debug, clap::Args)]
struct ShowArgs {
    /// The KubeletConfiguration file (JSON or YAML).
    file: PathBuf,
    /// Output format.
    #[arg(short, long, value_enum, default_value_t = Format::Table)]
    output: Format,
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
    #[arg(long = "topology-manager-option", value_name = "NAME=VALUE")]
    topology_manager_options: Vec<String>,
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

#[derive(Debug, clap::Args)]
struct RollbackArgs {
    /// The KubeletConfiguration file to restore.
    file: PathBuf,
    /// Restore this backup instead of the newest FILE.bak.*.
    #[arg(long, value_name = "PATH")]
    backup: Option<PathBuf>,
    /// Remove the CPU manager checkpoint when the restored file has another CPU manager
    /// policy (default path /var/lib/kubelet/cpu_manager_state).
    #[arg(long, value_name = "PATH", num_args = 0..=1, default_missing_value = DEFAULT_CPU_MANAGER_STATE)]
    remove_cpu_manager_state: Option<PathBuf>,
}

/// Runs the command.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    match args.action {
        Action::Show(a) => show(a),
        Action::Set(a) => set(a),
        Action::Rollback(a) => roll_back(a),
    }
}

fn display_value(v: &Value) -> String {
    match v {
        Value::String(s) if s.is_empty() => "\"\"".to_string(),
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

fn show(a: ShowArgs) -> anyhow::Result<ExitCode> {
    let doc = ConfigDocument::read(&a.file)?;
    let settings = topology_settings(&doc.fields);
    let validation = validate(&doc.fields);
    if a.output != Format::Table {
        let report = serde_json::json!({
            "file": a.file.display().to_string(),
            "format": doc.format,
            "settings": settings,
            "errors": validation.errors,
            "warnings": validation.warnings,
        });
        print_structured(&report, a.output)?;
        return Ok(ExitCode::SUCCESS);
    }
    let width = settings.iter().map(|s| s.field.len()).max().unwrap_or(0);
    println!("{} ({})", a.file.display(), format_name(&doc));
    for s in &settings {
        let mark = if s.default { "  (default)" } else { "" };
        println!("  {:width$}  {}{mark}", s.field, display_value(&s.value));
    }
    for e in &validation.errors {
        println!("error: {e}");
    }
    for w in &validation.warnings {
        println!("warning: {w}");
    }
    Ok(ExitCode::SUCCESS)
}

fn format_name(doc: &ConfigDocument) -> &'static str {
    match doc.format {
        topoalign_kubelet::ConfigFormat::Json => "JSON",
        topoalign_kubelet::ConfigFormat::Yaml => "YAML",
    }
}

fn set(a: SetArgs) -> anyhow::Result<ExitCode> {
    let options = a
        .topology_manager_options
        .iter()
        .map(|o| parse_option_arg(o).map_err(anyhow::Error::msg))
        .collect::<anyhow::Result<Vec<_>>>()
        .context("--topology-manager-option")?;
    let request = ChangeRequest {
        topology_manager_policy: a.topology_manager_policy,
        topology_manager_scope: a.topology_manager_scope,
        topology_manager_options: options,
        cpu_manager_policy: a.cpu_manager_policy,
        reserved_cpus: a.reserved_cpus,
    };
    if request.is_empty() {
        anyhow::bail!(
            "nothing to set: give --topology-manager-policy, --topology-manager-scope, --topology-manager-option, --cpu-manager-policy or --reserved-cpus"
        );
    }
    let plan = plan_set(&a.file, &request)?;
    for w in &plan.warnings {
        eprintln!("warning: {w}");
    }
    if plan.is_noop() {
        println!("{}: already set, nothing to change", a.file.display());
        return Ok(ExitCode::SUCCESS);
    }
    if a.dry_run {
        print!("{}", plan.diff());
        if plan.cpu_policy_changes() {
            println!(
                "(dry run) the CPU manager policy changes {} -> {}: its checkpoint {} would be removed",
                plan.cpu_policy.0,
                plan.cpu_policy.1,
                a.remove_cpu_manager_state
                    .as_deref()
                    .map(|p| p.display().to_string())
                    .unwrap_or_else(|| "(not asked: --remove-cpu-manager-state)".into())
            );
        }
        println!("(dry run) nothing written");
        return Ok(ExitCode::SUCCESS);
    }
    let applied = apply_set(
        &plan,
        a.remove_cpu_manager_state.as_deref(),
        SystemTime::now(),
        &NoHook,
    )?;
    println!("backed up the old file to {}", applied.backup.display());
    let summary: Vec<String> = plan
        .changes
        .iter()
        .map(|(k, v)| format!("{k}={}", display_value(v)))
        .collect();
    println!("wrote {}: {}", a.file.display(), summary.join(", "));
    report_cpu_state(
        plan.cpu_policy_changes(),
        applied.removed_cpu_state,
        a.remove_cpu_manager_state.is_some(),
    );
    print_restart_reminder();
    Ok(ExitCode::SUCCESS)
}

fn report_cpu_state(changes: bool, removed: Option<PathBuf>, asked: bool) {
    match removed {
        Some(p) => println!("removed the CPU manager checkpoint {}", p.display()),
        None if changes && !asked => println!(
            "warning: the CPU manager policy changed; remove {DEFAULT_CPU_MANAGER_STATE} before restarting \
             (or pass --remove-cpu-manager-state), the kubelet refuses a checkpoint of another policy"
        ),
        None => {}
    }
}

fn print_restart_reminder() {
    println!("next steps:");
    println!("  1. restart the kubelet so it reads the file: systemctl restart kubelet");
    println!(
        "  2. the node goes NotReady briefly while the kubelet restarts: drain it first if it runs workloads"
    );
    println!(
        "  3. apply the same change to every GPU node (managed node pools may reset it on update)"
    );
}

fn roll_back(a: RollbackArgs) -> anyhow::Result<ExitCode> {
    let done = rollback(
        &a.file,
        a.backup.as_deref(),
        a.remove_cpu_manager_state.as_deref(),
        SystemTime::now(),
        &NoHook,
    )?;
    if let Some(b) = &done.backup_of_current {
        println!("backed up the current file to {}", b.display());
    }
    println!(
        "restored {} from {}",
        a.file.display(),
        done.restored.display()
    );
    if let Some(p) = &done.removed_cpu_state {
        println!("removed the CPU manager checkpoint {}", p.display());
    }
    print_restart_reminder();
    Ok(ExitCode::SUCCESS)
}
