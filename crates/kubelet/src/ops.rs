//! The `set` and `rollback` operations: plan (validate, render, verify), then apply.

use std::fs;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use serde_json::{Map, Value};

use crate::atomic::{WriteHook, write_atomic};
use crate::backup::{newest_backup, write_backup};
use crate::change::{ChangeRequest, apply_updates};
use crate::diff::unified_diff;
use crate::document::{ConfigDocument, ConfigFormat, check_kubelet_config, parse_value};
use crate::edit_yaml::YamlLayout;
use crate::error::ConfigError;
use crate::settings::keys;
use crate::validate::validate;

/// Where the static CPU manager keeps its checkpoint.
pub const DEFAULT_CPU_MANAGER_STATE: &str = "/var/lib/kubelet/cpu_manager_state";

/// The effective `cpuManagerPolicy` of a configuration (`none` when unset).
pub fn cpu_policy(fields: &Map<String, Value>) -> String {
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
            let layout = YamlLayout::parse(&document.text).map_err(|why| {
                ConfigError::UnsupportedLayout {
                    path: document.path.clone(),
                    why,
                }
            })?;
            Ok(layout.apply(changes))
        }
    }
}

/// What a write did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Applied {
    /// The backup of the previous content.
    pub backup: PathBuf,
    /// The CPU manager checkpoint removed, when one was.
    pub removed_cpu_state: Option<PathBuf>,
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

/// Writes a plan: checks the file did not change since it was read, writes the backup,
/// replaces the file atomically (keeping its permissions), then removes the CPU manager
/// checkpoint `cpu_state` if the CPU manager policy changed.
pub fn apply_set(
    plan: &SetPlan,
    cpu_state: Option<&Path>,
    now: SystemTime,
    hook: &dyn WriteHook,
) -> Result<Applied, ConfigError> {
    let path = &plan.document.path;
    let current = fs::read(path).map_err(|e| ConfigError::io("re-reading", path, e))?;
    if current != plan.document.text.as_bytes() {
        return Err(ConfigError::VerifyFailed {
            path: path.clone(),
            why: "the file changed while it was being edited; run the command again".into(),
        });
    }
    let permissions = fs::metadata(path)
        .map_err(|e| ConfigError::io("reading metadata of", path, e))?
        .permissions();
    let backup = write_backup(path, &current, now)?;
    write_atomic(path, plan.new_text.as_bytes(), Some(permissions), hook)?;
    let removed_cpu_state = remove_cpu_state(cpu_state, plan.cpu_policy_changes())?;
    Ok(Applied {
        backup,
        removed_cpu_state,
    })
}

/// What a rollback did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RolledBack {
    /// The backup restored.
    pub restored: PathBuf,
    /// The backup of the content it replaced (absent when the file did not exist).
    pub backup_of_current: Option<PathBuf>,
    /// The CPU manager checkpoint removed, when one was.
    pub removed_cpu_state: Option<PathBuf>,
}

/// Restores `backup` (or the newest `FILE.bak.*`) over `file` atomically, after backing up
/// the current content. The backup must itself be a valid KubeletConfiguration.
pub fn rollback(
    file: &Path,
    backup: Option<&Path>,
    cpu_state: Option<&Path>,
    now: SystemTime,
    hook: &dyn WriteHook,
) -> Result<RolledBack, ConfigError> {
    let restored = match backup {
        Some(b) => b.to_path_buf(),
        None => newest_backup(file)?,
    };
    let bytes = fs::read(&restored).map_err(|e| ConfigError::io("reading", &restored, e))?;
    let text = String::from_utf8(bytes.clone()).map_err(|_| ConfigError::NotKubeletConfig {
        path: restored.clone(),
        why: "not UTF-8 text".into(),
    })?;
    let format = ConfigFormat::detect(file, &text);
    let restored_doc = ConfigDocument::parse(&restored, format, text)?;
    let (current, permissions) = match fs::read(file) {
        Ok(c) => {
            let meta =
                fs::metadata(file).map_err(|e| ConfigError::io("reading metadata of", file, e))?;
            (Some(c), meta.permissions())
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let meta = fs::metadata(&restored)
                .map_err(|e| ConfigError::io("reading metadata of", &restored, e))?;
            (None, meta.permissions())
        }
        Err(e) => return Err(ConfigError::io("reading", file, e)),
    };
    let current_policy = current
        .as_deref()
        .and_then(|c| std::str::from_utf8(c).ok())
        .and_then(|t| parse_value(file, format, t).ok())
        .and_then(|v| v.as_object().map(cpu_policy))
        .unwrap_or_else(|| "none".to_string());
    let backup_of_current = match &current {
        Some(c) => Some(write_backup(file, c, now)?),
        None => None,
    };
    write_atomic(file, &bytes, Some(permissions), hook)?;
    let changes = current_policy != cpu_policy(&restored_doc.fields);
    let removed_cpu_state = remove_cpu_state(cpu_state, changes)?;
    Ok(RolledBack {
        restored,
        backup_of_current,
        removed_cpu_state,
    })
}
