//! `topoalign kubelet-config`'s subcommands and flags (the `clap` feature), each defined
//! once: `set`'s settings are [`ChangeRequest`] itself.

use std::path::PathBuf;
use std::time::SystemTime;

use crate::{Applied, ChangeRequest, ConfigError, DEFAULT_CPU_MANAGER_STATE, RollbackOptions};
use crate::{SetReport, apply_set, cpu_state_warning, plan_set};

/// The `kubelet-config` subcommands.
#[derive(Debug, clap::Subcommand)]
pub enum Action {
    /// Print the topology-relevant settings, kubelet defaults filled in and marked
    /// (exit 1 when the kubelet would refuse the file).
    Show {
        /// The KubeletConfiguration file (JSON or YAML).
        file: PathBuf,
    },
    /// Set the Topology Manager and CPU manager settings in one validated, atomic write.
    ///
    /// Every other field, and the file's order, is preserved (YAML comments too). The old
    /// content is saved as `FILE.bak.<UTC timestamp>` first; a symlinked file is replaced at
    /// its target. Invalid results are refused and the file is left untouched.
    Set(SetArgs),
    /// Restore the newest FILE.bak.* (or --backup PATH), backing up the current file first
    /// as `FILE.bak.<UTC>.pre-rollback`. A second rollback refuses to restore that copy
    /// (which would undo the first) unless --force or --backup names it.
    Rollback(RollbackArgs),
}

/// The flags of `kubelet-config rollback`.
#[derive(Debug, clap::Args)]
pub struct RollbackArgs {
    /// The KubeletConfiguration file to restore.
    pub file: PathBuf,
    /// Restore this backup instead of the newest FILE.bak.*.
    #[arg(long, value_name = "PATH")]
    pub backup: Option<PathBuf>,
    /// Restore the newest backup even when the last rollback made it.
    #[arg(long)]
    pub force: bool,
    /// Remove the CPU manager checkpoint when the restored file has another CPU manager
    /// policy (default path /var/lib/kubelet/cpu_manager_state).
    #[arg(long, value_name = "PATH", num_args = 0..=1, default_missing_value = DEFAULT_CPU_MANAGER_STATE)]
    pub remove_cpu_manager_state: Option<PathBuf>,
}

impl RollbackArgs {
    /// What [`crate::rollback`] is asked to do.
    pub fn options(&self) -> RollbackOptions<'_> {
        RollbackOptions {
            backup: self.backup.as_deref(),
            force: self.force,
            cpu_state: self.remove_cpu_manager_state.as_deref(),
        }
    }
}

/// The flags of `kubelet-config set`.
#[derive(Debug, clap::Args)]
pub struct SetArgs {
    /// The KubeletConfiguration file (JSON or YAML).
    pub file: PathBuf,
    /// The settings to change.
    #[command(flatten)]
    pub request: ChangeRequest,
    /// Remove the CPU manager checkpoint when the CPU manager policy changes
    /// (default path /var/lib/kubelet/cpu_manager_state).
    #[arg(long, value_name = "PATH", num_args = 0..=1, default_missing_value = DEFAULT_CPU_MANAGER_STATE)]
    pub remove_cpu_manager_state: Option<PathBuf>,
    /// Print the change as a unified diff and write nothing.
    #[arg(long)]
    pub dry_run: bool,
}

impl SetArgs {
    /// `kubelet-config set`: plans the change, then (unless it changes nothing or this is
    /// a dry run) writes it at `now`; the report, with what was written. `warn` gets
    /// each batch of warnings when it is known: the plan's, then the write's (or, not
    /// writing, the CPU manager checkpoint's).
    pub fn run(
        &self,
        now: SystemTime,
        warn: &mut dyn FnMut(&[String]),
    ) -> Result<(SetReport, Option<Applied>), ConfigError> {
        if self.request.is_empty() {
            return Err(ConfigError::NothingToSet);
        }
        let plan = plan_set(&self.file, &self.request)?;
        warn(&plan.warnings);
        let state = self.remove_cpu_manager_state.as_deref();
        if plan.is_noop() || self.dry_run {
            let (from, to) = &plan.cpu_policy;
            warn(&Vec::from_iter(cpu_state_warning(
                from,
                to,
                state.is_some(),
            )));
            return Ok((SetReport::planned(&self.file, &plan), None));
        }
        let applied = apply_set(&plan, state, now, None)?;
        warn(&applied.warnings);
        let report = SetReport::written(&self.file, &plan, &applied);
        Ok((report, Some(applied)))
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(clap::Parser)]
    struct Cli {
        #[command(subcommand)]
        action: Action,
    }

    #[test]
    fn set_flags_are_the_change_request_and_the_state_path_has_a_default() {
        let cli = Cli::try_parse_from([
            "kc",
            "set",
            "k.yaml",
            "--topology-manager-policy",
            "restricted",
            "--topology-manager-option",
            "prefer-closest-numa-nodes=true",
            "--remove-cpu-manager-state",
        ])
        .unwrap();
        let Action::Set(a) = cli.action else {
            panic!("not set");
        };
        assert_eq!(
            a.request.topology_manager_policy.as_deref(),
            Some("restricted")
        );
        let option = ("prefer-closest-numa-nodes".into(), "true".into());
        assert_eq!(a.request.topology_manager_options, vec![option]);
        let state = a.remove_cpu_manager_state.unwrap();
        assert_eq!(state, PathBuf::from(DEFAULT_CPU_MANAGER_STATE));
        assert!(
            Cli::try_parse_from(["kc", "set", "k.yaml", "--topology-manager-option", "x"]).is_err()
        );
    }

    #[test]
    fn rollback_flags_become_the_options() {
        let cli = Cli::try_parse_from(["kc", "rollback", "k.yaml", "--force"]).unwrap();
        let Action::Rollback(a) = cli.action else {
            panic!("not rollback");
        };
        let o = a.options();
        assert!(o.force && o.backup.is_none() && o.cpu_state.is_none());
        let argv = [
            "kc",
            "rollback",
            "k.yaml",
            "--backup",
            "b",
            "--remove-cpu-manager-state",
        ];
        let Action::Rollback(a) = Cli::try_parse_from(argv).unwrap().action else {
            panic!("not rollback");
        };
        let o = a.options();
        assert_eq!(o.backup, Some(std::path::Path::new("b")));
        assert_eq!(
            o.cpu_state,
            Some(std::path::Path::new(DEFAULT_CPU_MANAGER_STATE))
        );
    }

    fn set(argv: &[&str]) -> SetArgs {
        let Action::Set(a) = Cli::try_parse_from(argv).unwrap().action else {
            panic!("not set");
        };
        a
    }

    #[test]
    fn set_runs_dry_writes_and_refuses_nothing_to_set() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("k.yaml");
        let text = "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n";
        std::fs::write(&file, text).unwrap();
        let f = file.to_str().unwrap();
        let mut said = Vec::new();
        let mut warn = |w: &[String]| said.push(w.to_vec());
        let e = set(&["kc", "set", f]).run(SystemTime::now(), &mut warn);
        assert!(matches!(e, Err(ConfigError::NothingToSet)), "{e:?}");
        let policy = ["--topology-manager-policy", "restricted"];
        let dry = set(&[&["kc", "set", f, "--dry-run"][..], &policy].concat());
        let (report, applied) = dry.run(SystemTime::now(), &mut warn).unwrap();
        assert!(!report.written && applied.is_none());
        assert_eq!(
            std::fs::read_to_string(&file).unwrap(),
            text,
            "a dry run writes nothing"
        );
        let (report, applied) = set(&[&["kc", "set", f][..], &policy].concat())
            .run(SystemTime::now(), &mut warn)
            .unwrap();
        assert!(report.written && applied.is_some());
        assert!(
            std::fs::read_to_string(&file)
                .unwrap()
                .contains("restricted")
        );
        assert_eq!(
            said.len(),
            4,
            "plan and checkpoint, plan and write: {said:?}"
        );
    }
}
