//! Parsing a KubeletConfiguration file (JSON or YAML) into a generic, order-preserving map.

use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

use crate::error::ConfigError;

/// The API group every KubeletConfiguration `apiVersion` belongs to.
pub(crate) const API_GROUP: &str = "kubelet.config.k8s.io";
/// The `kind` of a KubeletConfiguration.
pub(crate) const KIND: &str = "KubeletConfiguration";

/// The syntax a KubeletConfiguration file is written in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ConfigFormat {
    /// JSON, as OKE's `/etc/kubernetes/kubelet-config.json`.
    Json,
    /// YAML, as kubeadm's `/var/lib/kubelet/config.yaml`.
    Yaml,
}

impl ConfigFormat {
    /// Guesses the format: `.json` → JSON, `.yaml`/`.yml` → YAML, otherwise JSON when the
    /// first non-blank character is `{`, else YAML.
    pub fn detect(path: &Path, text: &str) -> ConfigFormat {
        match path.extension().and_then(|e| e.to_str()) {
            Some(e) if e.eq_ignore_ascii_case("json") => ConfigFormat::Json,
            Some(e) if e.eq_ignore_ascii_case("yaml") || e.eq_ignore_ascii_case("yml") => {
                ConfigFormat::Yaml
            }
            _ if text.trim_start().starts_with('{') => ConfigFormat::Json,
            _ => ConfigFormat::Yaml,
        }
    }
}

/// A parsed KubeletConfiguration file: its exact text and its top-level mapping.
#[derive(Debug, Clone)]
pub struct ConfigDocument {
    /// Where it was read from (used in messages and for writing back).
    pub path: PathBuf,
    /// JSON or YAML.
    pub format: ConfigFormat,
    /// The file's bytes as read (UTF-8).
    pub text: String,
    /// The top-level mapping, in file order.
    pub fields: Map<String, Value>,
}

impl ConfigDocument {
    /// Reads and parses `path`.
    pub fn read(path: &Path) -> Result<ConfigDocument, ConfigError> {
        let bytes = std::fs::read(path).map_err(|e| ConfigError::io("reading", path, e))?;
        ConfigDocument::from_bytes(path, bytes)
    }

    /// Parses the bytes of a file (`path` names it in errors and picks the syntax).
    pub fn from_bytes(path: &Path, bytes: Vec<u8>) -> Result<ConfigDocument, ConfigError> {
        let text = String::from_utf8(bytes).map_err(|e| ConfigError::NotKubeletConfig {
            path: path.to_path_buf(),
            why: format!(
                "not UTF-8 text (invalid byte at offset {})",
                e.utf8_error().valid_up_to()
            ),
        })?;
        let format = ConfigFormat::detect(path, &text);
        ConfigDocument::parse(path, format, text)
    }

    /// Parses `text` as a KubeletConfiguration in `format`; `path` only names it in errors.
    pub fn parse(
        path: &Path,
        format: ConfigFormat,
        text: String,
    ) -> Result<ConfigDocument, ConfigError> {
        let value = parse_value(path, format, &text)?;
        let fields = check_kubelet_config(path, value)?;
        Ok(ConfigDocument {
            path: path.to_path_buf(),
            format,
            text,
            fields,
        })
    }

    /// The settings the Topology Manager reads: the one interpretation of a
    /// KubeletConfiguration's topology fields ([`topoalign_kube_types::kubelet_settings::Settings`]).
    pub fn tm_settings(
        &self,
    ) -> Result<
        topoalign_kube_types::kubelet_settings::Settings,
        topoalign_kube_types::kubelet_settings::ConfigError,
    > {
        topoalign_kube_types::kubelet_settings::Settings::from_kubelet_config(&Value::Object(
            self.fields.clone(),
        ))
    }

    /// The Topology Manager settings of the KubeletConfiguration at `path`: the one
    /// reading behind every `--kubelet-config` flag.
    pub fn read_tm_settings(
        path: &Path,
    ) -> Result<topoalign_kube_types::kubelet_settings::Settings, ConfigError> {
        ConfigDocument::read(path)?
            .tm_settings()
            .map_err(|why| ConfigError::TmSettings {
                path: path.to_path_buf(),
                why,
            })
    }

    /// The string value of a top-level field, when it is a string.
    pub fn str_field(&self, key: &str) -> Option<&str> {
        self.fields.get(key).and_then(Value::as_str)
    }
}

/// Parses text in either syntax to a generic value.
pub(crate) fn parse_value(
    path: &Path,
    format: ConfigFormat,
    text: &str,
) -> Result<Value, ConfigError> {
    match format {
        ConfigFormat::Json => serde_json::from_str(text).map_err(|e| ConfigError::Json {
            path: path.to_path_buf(),
            line: e.line(),
            column: e.column(),
            message: e.to_string(),
        }),
        ConfigFormat::Yaml => {
            if text.trim().is_empty() {
                return Ok(Value::Null);
            }
            serde_saphyr::from_str::<Value>(text).map_err(|e| ConfigError::Yaml {
                path: path.to_path_buf(),
                message: topoalign_kube_types::yaml_error(&e),
            })
        }
    }
}

/// Checks that `value` is a mapping whose `kind`/`apiVersion` (when present) are a
/// KubeletConfiguration's, and returns the mapping.
pub(crate) fn check_kubelet_config(
    path: &Path,
    value: Value,
) -> Result<Map<String, Value>, ConfigError> {
    let not = |why: String| ConfigError::NotKubeletConfig {
        path: path.to_path_buf(),
        why,
    };
    let fields = match value {
        Value::Object(m) => m,
        Value::Null => return Err(not("the file is empty; expected a mapping".into())),
        other => {
            return Err(not(format!(
                "the top level is {}, expected a mapping",
                kind_of(&other)
            )));
        }
    };
    match fields.get("kind") {
        None => {}
        Some(Value::String(k)) if k == KIND => {}
        Some(other) => return Err(not(format!("`kind` is {other}, expected \"{KIND}\""))),
    }
    match fields.get("apiVersion") {
        None => {}
        Some(Value::String(v)) if v.split('/').next() == Some(API_GROUP) && v.contains('/') => {}
        Some(other) => {
            return Err(not(format!(
                "`apiVersion` is {other}, expected \"{API_GROUP}/v1beta1\""
            )));
        }
    }
    Ok(fields)
}

/// A short name for a value's type, for messages.
pub(crate) fn kind_of(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "a mapping",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(format: ConfigFormat, text: &str) -> Result<ConfigDocument, ConfigError> {
        ConfigDocument::parse(Path::new("t"), format, text.to_string())
    }

    #[test]
    fn accepts_json_without_kind() {
        let d = parse(ConfigFormat::Json, r#"{"cpuManagerPolicy":"none","a":1}"#).unwrap();
        assert_eq!(d.str_field("cpuManagerPolicy"), Some("none"));
        assert_eq!(
            d.fields.keys().collect::<Vec<_>>(),
            ["cpuManagerPolicy", "a"]
        );
    }

    #[test]
    fn rejects_wrong_kind_and_api_version() {
        let e = parse(ConfigFormat::Yaml, "kind: Pod\napiVersion: v1\n").unwrap_err();
        assert!(e.to_string().contains("`kind` is \"Pod\""), "{e}");
        let e = parse(
            ConfigFormat::Yaml,
            "kind: KubeletConfiguration\napiVersion: kubeproxy.config.k8s.io/v1alpha1\n",
        )
        .unwrap_err();
        assert!(e.to_string().contains("apiVersion"), "{e}");
    }

    #[test]
    fn rejects_non_mapping_and_syntax_errors() {
        let e = parse(ConfigFormat::Yaml, "- a\n- b\n").unwrap_err();
        assert!(e.to_string().contains("a list, expected a mapping"), "{e}");
        let e = parse(ConfigFormat::Json, "{\"a\": 1,\n \"b\": }").unwrap_err();
        assert!(matches!(e, ConfigError::Json { line: 2, .. }), "{e}");
        let e = parse(ConfigFormat::Yaml, "a: [1, 2\nb: c\n").unwrap_err();
        assert!(matches!(e, ConfigError::Yaml { .. }), "{e}");
    }

    #[test]
    fn tm_settings_from_a_file_name_the_file_when_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("k.yaml");
        let head = "kind: KubeletConfiguration\napiVersion: kubelet.config.k8s.io/v1beta1\n";
        std::fs::write(&path, format!("{head}topologyManagerPolicy: restricted\n")).unwrap();
        let s = ConfigDocument::read_tm_settings(&path).unwrap();
        assert_eq!(
            s.topology_manager_policy,
            topoalign_kube_types::kubelet_settings::Policy::Restricted
        );
        std::fs::write(&path, format!("{head}topologyManagerPolicy: tidy\n")).unwrap();
        let e = ConfigDocument::read_tm_settings(&path).unwrap_err();
        assert!(matches!(e, ConfigError::TmSettings { .. }), "{e}");
        assert!(
            e.to_string().starts_with(&format!("{}: ", path.display())),
            "{e}"
        );
    }

    #[test]
    fn yaml_scalars_keep_their_types() {
        let d = parse(
            ConfigFormat::Yaml,
            "a: \"true\"\nb: true\nc: 637m\nd: 8\ne: \"0-1\"\n",
        )
        .unwrap();
        assert_eq!(d.fields["a"], Value::String("true".into()));
        assert_eq!(d.fields["b"], Value::Bool(true));
        assert_eq!(d.fields["c"], Value::String("637m".into()));
        assert_eq!(d.fields["d"], serde_json::json!(8));
    }

    #[test]
    fn detects_format() {
        assert_eq!(
            ConfigFormat::detect(Path::new("x.json"), "a: b"),
            ConfigFormat::Json
        );
        assert_eq!(
            ConfigFormat::detect(Path::new("config.yaml"), "{}"),
            ConfigFormat::Yaml
        );
        assert_eq!(
            ConfigFormat::detect(Path::new("config"), " {\"a\":1}"),
            ConfigFormat::Json
        );
        assert_eq!(
            ConfigFormat::detect(Path::new("config"), "a: 1"),
            ConfigFormat::Yaml
        );
    }
}
