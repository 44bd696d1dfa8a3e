//! Safe editing of KubeletConfiguration files (JSON or YAML): show, set with validation,
//! atomic write with backup, rollback.
//!
//! - [`ConfigDocument`] reads a file and checks it is a KubeletConfiguration.
//! - [`topology_settings`] lists the topology-relevant settings, defaults marked.
//! - [`plan_set`] validates a [`ChangeRequest`] the way the kubelet would, renders the
//!   new file (JSON: same key order and indent; YAML: only changed top-level entries are
//!   rewritten, so comments survive) and proves it re-parses to the intended values;
//!   [`apply_set`] writes it (backup `FILE.bak.<UTC>`, then `topoalign_atomic`: through
//!   symlinks, mode and owner kept, temp file + fsync + rename + directory fsync).
//! - [`rollback`] restores the newest (or a given) backup the same way, saying what changes,
//!   and refuses to undo the previous rollback unless forced.

#[cfg(feature = "clap")]
mod args;
mod backup;
mod change;
mod diff;
mod document;
mod edit_json;
mod edit_yaml;
mod error;
mod ops;
mod reports;
mod settings;
mod text;
mod timestamp;
mod validate;

#[cfg(feature = "clap")]
pub use args::{Action, SetArgs};
pub use backup::BackupKind;
pub use backup::list_backups;
pub use change::ChangeRequest;
pub use document::{ConfigDocument, ConfigFormat};
pub use edit_yaml::YamlLayout;
pub use error::ConfigError;
pub use ops::{
    Applied, DEFAULT_CPU_MANAGER_STATE, FieldChange, RollbackOptions, RolledBack, SetPlan,
    apply_set, cpu_state_warning, plan_set, rollback,
};
pub use reports::{SetReport, ShowReport};
pub use settings::{Setting, topology_settings};
pub use text::{NEXT_STEPS, display_value};
pub use topoalign_atomic::{Hook, WriteStep};
pub use validate::{Validation, validate};
