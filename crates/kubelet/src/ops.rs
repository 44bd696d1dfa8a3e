//! The `set` and `rollback` operations: plan (validate, render, verify), then apply.

use std::fs;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use serde_json::{Map, Value};

use topoalign_atomic::{Hook, WriteOptions, write_with};

use crate::backup::{BackupKind, list_backups, write_backup};
use crate::change::{ChangeRequest, apply_updates};
use crate::diff::unified_diff;
use crate::document::{ConfigDocument, ConfigFormat, check_kubelet_config, parse_value};
use crate::edit_yaml::YamlLayout;
use crate::error::ConfigError;
use crate::validate::validate;
use topoalign_kube_types::kubelet_settings::keys;

/// Where the static CPU manager keeps its checkpoint.
pub const DEFAULT_CPU_MANAGER_STATE: &str = "/var/lib/kubelet/cpu_manager_state";

/// The effective `cpuManagerPolicy` of a configuration (`none` when unset).
pub(crate) fn cpu_policy(fields: &Map<String, Value>) -> String {
    fields
        .get(keys::CPU_POLICY)
        .and_then(Value::as_str)
        .unwrap_or("none")
        .to_string()
}

/// A validated, rendered and verified change, not yet written.
#[derive(Debug, Clone)]
pub struct SetPlan {
    /// The file as read.
    pub document: ConfigDocument,
    /// The full new text.
    pub new_text: String,
    /// The top-level fields that actually change, with their new values.
    pub changes: Vec<(String, Value)>,
    /// Accepted-but-suspicious settings.
    pub warnings: Vec<String>,
    /// `cpuManagerPolicy` before and after.
    pub cpu_policy: (String, String),
}

impl SetPlan {
    /// True when the file already has every requested value.
    pub fn is_noop(&self) -> bool {
        self.changes.is_empty()
    }

    /// True when the CPU manager policy changes (the checkpoint must then go).
    pub fn cpu_policy_changes(&self) -> bool {
        self.cpu_policy.0 != self.cpu_policy.1
    }

    /// A unified diff of the change.
    pub fn diff(&self) -> String {
        let name = self.document.path.display().to_string();
        unified_diff(
            &self.document.text,
            &self.new_text,
            &name,
            &format!("{name} (new)"),
            3,
        )
    }
}

/// Reads `path`, applies `request`, validates the result like the kubelet would, renders
/// it in the file's own style and checks the rendering re-parses to exactly the intended
/// configuration. Nothing is written.
pub fn plan_set(path: &Path, request: &ChangeRequest) -> Result<SetPlan, ConfigError> {
    let document = ConfigDocument::read(path)?;
    let updates = request.field_updates(&document.fields);
    let (intended, changes) = apply_updates(&document.fields, &updates);
    let validation = validate(&intended);
    if !validation.errors.is_empty() {
        return Err(ConfigError::Invalid {
            path: path.to_path_buf(),
            problems: validation.errors,
        });
    }
    let new_text = if changes.is_empty() {
        document.text.clone()
    } else {
        render(&document, &intended, &changes)?
    };
    let reparsed = parse_value(path, document.format, &new_text)
        .and_then(|v| check_kubelet_config(path, v))
        .map_err(|e| ConfigError::VerifyFailed {
            path: path.to_path_buf(),
            why: e.to_string(),
        })?;
    if reparsed != intended {
        let differing: Vec<&String> = intended
            .keys()
            .chain(reparsed.keys())
            .filter(|k| intended.get(*k) != reparsed.get(*k))
            .collect();
        return Err(ConfigError::VerifyFailed {
            path: path.to_path_buf(),
            why: format!("fields {differing:?} would not read back as intended"),
        });
    }
    let cpu_policy = (cpu_policy(&document.fields), cpu_policy(&intended));
    Ok(SetPlan {
        document,
        new_text,
        changes,
        warnings: validation.warnings,
        cpu_policy,
    })
}

fn render(
    document: &ConfigDocument,
    intended: &Map<String, Value>,
    changes: &[(String, Value)],
) -> Result<String, ConfigError> {
    match document.format {
        ConfigFormat::Json => crate::edit_json::render(&document.text, intended).map_err(|e| {
            ConfigError::VerifyFailed {
                path: document.path.clone(),
                why: e.to_string(),
            }
        }),
        ConfigFormat::Yaml => {
            let layout =
                YamlLayout::parse(&document.text).map_err(|e| ConfigError::UnsupportedLayout {
                    path: document.path.clone(),
                    why: e.0,
                })?;
            Ok(layout.apply(changes))
        }
    }
}

/// What a write did.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Applied {
    /// The backup of the previous content.
    pub backup: PathBuf,
    /// The CPU manager checkpoint removed, when one was.
    pub removed_cpu_state: Option<PathBuf>,
    /// What the operator must still do (e.g. remove the CPU manager checkpoint).
    pub warnings: Vec<String>,
}

/// The warning due when `cpuManagerPolicy` changes from `from` to `to` and the CPU
/// manager checkpoint is not removed (`handled` false): the kubelet refuses to start with
/// a checkpoint written under another policy.
pub fn cpu_state_warning(from: &str, to: &str, handled: bool) -> Option<String> {
    (from != to && !handled).then(|| {
        format!(
            "cpuManagerPolicy changes {from} -> {to} but the CPU manager checkpoint is kept: \
             the kubelet refuses to start with a checkpoint of another policy; remove \
             {DEFAULT_CPU_MANAGER_STATE} before restarting (or pass --remove-cpu-manager-state)"
        )
    })
}

/// Removes the CPU manager checkpoint at `state` when the policy changes; a missing file
/// is fine (the kubelet recreates it).
fn remove_cpu_state(state: Option<&Path>, changes: bool) -> Result<Option<PathBuf>, ConfigError> {
    let Some(state) = state.filter(|_| changes) else {
        return Ok(None);
    };
    match fs::remove_file(state) {
        Ok(()) => Ok(Some(state.to_path_buf())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(ConfigError::io("removing", state, e)),
    }
}

/// The mode of the file `path` resolves to.
fn mode_of(path: &Path) -> Result<u32, ConfigError> {
    use std::os::unix::fs::MetadataExt;
    fs::metadata(path)
        .map(|m| m.mode() & 0o7777)
        .map_err(|e| ConfigError::io("reading metadata of", path, e))
}

/// Writes a plan: checks the file did not change since it was read, writes the backup,
/// replaces the file atomically (through a symlink to its target, keeping mode and owner),
/// then removes the CPU manager checkpoint `cpu_state` if the CPU manager policy changed.
/// `hook` (tests) is called at every step of both writes.
pub fn apply_set(
    plan: &SetPlan,
    cpu_state: Option<&Path>,
    now: SystemTime,
    hook: Option<Hook<'_>>,
) -> Result<Applied, ConfigError> {
    let path = &plan.document.path;
    let current = fs::read(path).map_err(|e| ConfigError::io("re-reading", path, e))?;
    if current != plan.document.text.as_bytes() {
        return Err(ConfigError::VerifyFailed {
            path: path.clone(),
            why: "the file changed while it was being edited; run the command again".into(),
        });
    }
    let mode = mode_of(path)?;
    let backup = write_backup(path, &current, now, BackupKind::Set, hook)?;
    write_with(
        path,
        plan.new_text.as_bytes(),
        WriteOptions {
            mode: Some(mode),
            hook,
        },
    )?;
    let removed_cpu_state = remove_cpu_state(cpu_state, plan.cpu_policy_changes())?;
    let warnings = cpu_state_warning(&plan.cpu_policy.0, &plan.cpu_policy.1, cpu_state.is_some())
        .into_iter()
        .collect();
    Ok(Applied {
        backup,
        removed_cpu_state,
        warnings,
    })
}

/// What `rollback` restores, and how.
#[derive(Debug, Clone, Copy, Default)]
pub struct RollbackOptions<'a> {
    /// This backup instead of the newest one.
    pub backup: Option<&'a Path>,
    /// Restore the newest backup even when it is the copy the last rollback made.
    pub force: bool,
    /// Remove this CPU manager checkpoint when the CPU manager policy changes.
    pub cpu_state: Option<&'a Path>,
}

/// One top-level field that a rollback changes.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct FieldChange {
    /// The field.
    pub field: String,
    /// Its value now (absent: not set).
    pub from: Option<Value>,
    /// Its value after the rollback (absent: not set).
    pub to: Option<Value>,
}

/// What a rollback did.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RolledBack {
    /// The backup restored.
    pub restored: PathBuf,
    /// Who made that backup.
    pub restored_kind: BackupKind,
    /// The backup of the content it replaced (absent when the file did not exist).
    pub backup_of_current: Option<PathBuf>,
    /// The top-level fields that changed (empty when the current file was unreadable).
    pub changes: Vec<FieldChange>,
    /// The CPU manager checkpoint removed, when one was.
    pub removed_cpu_state: Option<PathBuf>,
    /// What the operator must still do.
    pub warnings: Vec<String>,
}

/// Chooses the backup to restore: the given one, else the newest, refusing a
/// pre-rollback copy (it would undo the last rollback) unless `force`.
fn choose_backup(file: &Path, options: &RollbackOptions<'_>) -> Result<PathBuf, ConfigError> {
    if let Some(b) = options.backup {
        return Ok(b.to_path_buf());
    }
    let all = list_backups(file)?;
    let newest = all.last().cloned().ok_or_else(|| ConfigError::NoBackup {
        pattern: format!("{}.bak.*", file.display()),
    })?;
    if BackupKind::of(&newest) == BackupKind::PreRollback && !options.force {
        let older = all
            .iter()
            .rev()
            .find(|b| BackupKind::of(b) == BackupKind::Set)
            .cloned();
        return Err(ConfigError::WouldUndoRollback {
            backup: newest,
            older,
        });
    }
    Ok(newest)
}

/// The top-level fields that differ between `from` and `to`, in `from`'s order then `to`'s.
fn field_changes(from: &Map<String, Value>, to: &Map<String, Value>) -> Vec<FieldChange> {
    let mut keys: Vec<&String> = from.keys().collect();
    keys.extend(to.keys().filter(|k| !from.contains_key(*k)));
    keys.into_iter()
        .filter(|k| from.get(*k) != to.get(*k))
        .map(|k| FieldChange {
            field: k.clone(),
            from: from.get(k).cloned(),
            to: to.get(k).cloned(),
        })
        .collect()
}

/// Restores a backup (see [`RollbackOptions`]) over `file` atomically, after backing up the
/// current content as a pre-rollback copy. The backup must itself be a valid
/// KubeletConfiguration.
pub fn rollback(
    file: &Path,
    options: RollbackOptions<'_>,
    now: SystemTime,
    hook: Option<Hook<'_>>,
) -> Result<RolledBack, ConfigError> {
    let restored = choose_backup(file, &options)?;
    let bytes = fs::read(&restored).map_err(|e| ConfigError::io("reading", &restored, e))?;
    let text = String::from_utf8(bytes.clone()).map_err(|_| ConfigError::NotKubeletConfig {
        path: restored.clone(),
        why: "not UTF-8 text".into(),
    })?;
    let format = ConfigFormat::detect(file, &text);
    let restored_doc = ConfigDocument::parse(&restored, format, text)?;
    let (current, mode) = match fs::read(file) {
        Ok(c) => (Some(c), mode_of(file)?),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => (None, mode_of(&restored)?),
        Err(e) => return Err(ConfigError::io("reading", file, e)),
    };
    let current_fields = current
        .as_deref()
        .and_then(|c| std::str::from_utf8(c).ok())
        .and_then(|t| parse_value(file, format, t).ok())
        .and_then(|v| match v {
            Value::Object(m) => Some(m),
            _ => None,
        })
        .unwrap_or_default();
    let backup_of_current = match &current {
        Some(c) => Some(write_backup(file, c, now, BackupKind::PreRollback, hook)?),
        None => None,
    };
    write_with(
        file,
        &bytes,
        WriteOptions {
            mode: Some(mode),
            hook,
        },
    )?;
    let (from, to) = (
        cpu_policy(&current_fields),
        cpu_policy(&restored_doc.fields),
    );
    let removed_cpu_state = remove_cpu_state(options.cpu_state, from != to)?;
    let warnings = cpu_state_warning(&from, &to, options.cpu_state.is_some())
        .into_iter()
        .collect();
    Ok(RolledBack {
        restored_kind: BackupKind::of(&restored),
        restored,
        backup_of_current,
        changes: field_changes(&current_fields, &restored_doc.fields),
        removed_cpu_state,
        warnings,
    })
}
