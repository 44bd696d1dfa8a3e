//! What `kubelet-config show` and `set` report, as one document each for JSON/YAML and
//! as text: the topology settings with the kubelet's defaults marked, the validation
//! result, and for a change the fields set, the diff or the backup written.

use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::document::{ConfigDocument, ConfigFormat};
use crate::error::ConfigError;
use crate::ops::{Applied, SetPlan};
use crate::settings::{Setting, topology_settings};
use crate::text::display_value;
use crate::validate::validate;

/// `show`: a file's topology settings and whether the kubelet would accept it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ShowReport {
    /// The file.
    pub file: PathBuf,
    /// Its syntax.
    pub format: ConfigFormat,
    /// The topology-relevant settings, defaults filled in and marked.
    pub settings: Vec<Setting>,
    /// Why the kubelet would refuse the file (empty: it would accept it).
    pub errors: Vec<String>,
    /// What is allowed but probably not meant.
    pub warnings: Vec<String>,
}

impl ShowReport {
    /// Reads and checks `file`.
    pub fn read(file: &Path) -> Result<ShowReport, ConfigError> {
        let doc = ConfigDocument::read(file)?;
        let v = validate(&doc.fields);
        Ok(ShowReport {
            file: file.to_path_buf(),
            format: doc.format,
            settings: topology_settings(&doc.fields),
            errors: v.errors,
            warnings: v.warnings,
        })
    }

    /// The file and its syntax, then one aligned `field  value` line per setting.
    pub fn text(&self) -> String {
        let width = self.settings.iter().map(|s| s.field.len()).max();
        let width = width.unwrap_or(0);
        let syntax = match self.format {
            ConfigFormat::Json => "JSON",
            ConfigFormat::Yaml => "YAML",
        };
        let mut s = format!("{} ({syntax})\n", self.file.display());
        for st in &self.settings {
            let mark = if st.default { "  (default)" } else { "" };
            let value = display_value(&st.value);
            s += &format!("  {:width$}  {value}{mark}\n", st.field);
        }
        s
    }
}

/// `set`: what was (or would be) changed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SetReport {
    /// The file.
    pub file: PathBuf,
    /// Each change as `field=value`.
    pub changes: Vec<String>,
    /// Whether the file was written.
    pub written: bool,
    /// The change as a unified diff (when not written).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub diff: Option<String>,
    /// The backup and checkpoint (when written).
    #[serde(flatten)]
    pub applied: Option<WrittenFiles>,
}

/// The files a written change touched besides the configuration.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct WrittenFiles {
    /// The backup of the previous content.
    pub backup: PathBuf,
    /// The CPU manager checkpoint removed, when one was.
    pub removed_cpu_manager_state: Option<PathBuf>,
}

impl SetReport {
    /// The report of `plan` for `file` before (or instead of) writing it.
    pub fn planned(file: &Path, plan: &SetPlan) -> SetReport {
        SetReport {
            file: file.to_path_buf(),
            changes: plan
                .changes
                .iter()
                .map(|(k, v)| format!("{k}={}", display_value(v)))
                .collect(),
            written: false,
            diff: Some(plan.diff()),
            applied: None,
        }
    }

    /// The report of `plan` for `file` once written as `applied` says.
    pub fn written(file: &Path, plan: &SetPlan, applied: &Applied) -> SetReport {
        SetReport {
            written: true,
            diff: None,
            applied: Some(WrittenFiles {
                backup: applied.backup.clone(),
                removed_cpu_manager_state: applied.removed_cpu_state.clone(),
            }),
            ..SetReport::planned(file, plan)
        }
    }

    /// The text: nothing to change, the dry run's diff, or what was written.
    pub fn text(&self, applied: Option<&Applied>) -> String {
        match (applied, &self.diff) {
            (Some(a), _) => a.text(&self.file, &self.changes),
            (None, _) if self.changes.is_empty() => {
                format!("{}: already set, nothing to change\n", self.file.display())
            }
            (None, diff) => diff.clone().unwrap_or_default() + "(dry run) nothing written\n",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ChangeRequest;
    use crate::ops::plan_set;

    fn config(text: &str) -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("config.yaml");
        std::fs::write(&path, text).unwrap();
        (dir, path)
    }

    const CONFIG: &str = "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n";

    #[test]
    fn show_marks_defaults_and_keeps_the_document_order() {
        let (_dir, path) = config(CONFIG);
        let r = ShowReport::read(&path).unwrap();
        assert!(r.errors.is_empty(), "{:?}", r.errors);
        let text = r.text();
        assert!(text.starts_with(&format!("{} (YAML)\n", path.display())));
        let policy = text.lines().nth(1).unwrap();
        assert!(policy.starts_with("  topologyManagerPolicy "), "{text}");
        assert!(policy.ends_with(" none  (default)"), "{text}");
        let json = serde_json::to_string(&r).unwrap();
        let keys = [
            "\"file\"",
            "\"format\"",
            "\"settings\"",
            "\"errors\"",
            "\"warnings\"",
        ];
        let at: Vec<usize> = keys.iter().map(|k| json.find(k).unwrap()).collect();
        assert!(at.windows(2).all(|w| w[0] < w[1]), "{json}");
    }

    #[test]
    fn a_plan_reports_its_diff_and_nothing_written() {
        let (_dir, path) = config(CONFIG);
        let request = ChangeRequest {
            topology_manager_policy: Some("restricted".into()),
            ..ChangeRequest::default()
        };
        let plan = plan_set(&path, &request).unwrap();
        let r = SetReport::planned(&path, &plan);
        assert_eq!(r.changes, ["topologyManagerPolicy=restricted"]);
        assert!(r.text(None).ends_with("(dry run) nothing written\n"));
        let v = serde_json::to_value(&r).unwrap();
        assert_eq!(v["written"], false);
        assert!(v.get("backup").is_none());
        let applied = Applied {
            backup: path.with_extension("bak"),
            removed_cpu_state: None,
            warnings: vec![],
        };
        let w = serde_json::to_value(SetReport::written(&path, &plan, &applied)).unwrap();
        assert_eq!(w["written"], true);
        assert!(w.get("diff").is_none());
        assert!(w["removedCpuManagerState"].is_null());
    }
}
