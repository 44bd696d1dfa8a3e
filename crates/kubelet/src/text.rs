//! What `topoalign kubelet-config` prints after a change: values as the file spells them,
//! what a rollback restored, and the steps that remain.

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::ops::{Applied, RolledBack};

/// What is left to do after any write.
pub const NEXT_STEPS: &str = "next steps:
  1. restart the kubelet so it reads the file: systemctl restart kubelet
  2. the node goes NotReady briefly while the kubelet restarts: drain it first if it runs workloads
  3. apply the same change to every GPU node (managed node pools may reset it on update)
";

/// A value as a person reads it: strings bare (`""` when empty), the rest as JSON.
pub fn display_value(v: &Value) -> String {
    match v {
        Value::String(s) if s.is_empty() => "\"\"".to_string(),
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

fn removed(state: &Option<PathBuf>) -> String {
    state.as_ref().map_or(String::new(), |p| {
        format!("removed the CPU manager checkpoint {}\n", p.display())
    })
}

impl Applied {
    /// The backup, the changes (`field=value`), the checkpoint removed and the next steps.
    pub fn text(&self, file: &Path, changes: &[String]) -> String {
        format!(
            "backed up the old file to {}\nwrote {}: {}\n{}{NEXT_STEPS}",
            self.backup.display(),
            file.display(),
            changes.join(", "),
            removed(&self.removed_cpu_state)
        )
    }
}

impl RolledBack {
    /// What was backed up and restored (and who made that backup), each field that
    /// changed, the checkpoint removed and the next steps.
    pub fn text(&self, file: &Path) -> String {
        let mut s = String::new();
        if let Some(b) = &self.backup_of_current {
            s += &format!("backed up the current file to {}\n", b.display());
        }
        let by = match self.restored_kind {
            crate::backup::BackupKind::Set => "set",
            crate::backup::BackupKind::PreRollback => "rollback",
        };
        s += &format!(
            "restored {} from {} (made by {by})\n",
            file.display(),
            self.restored.display()
        );
        for c in &self.changes {
            let show = |v: &Option<Value>| v.as_ref().map_or("(unset)".into(), display_value);
            s += &format!("  {}: {} -> {}\n", c.field, show(&c.from), show(&c.to));
        }
        s + &removed(&self.removed_cpu_state) + NEXT_STEPS
    }
}
