//! `topoalign kubelet-config`'s subcommands and flags (the `clap` feature), each defined
//! once: `set`'s settings are [`ChangeRequest`] itself.

use std::path::PathBuf;

use crate::{ChangeRequest, DEFAULT_CPU_MANAGER_STATE, RollbackOptions};

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
}
