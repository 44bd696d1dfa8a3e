//! What `set` changes: the requested settings turned into new top-level field values.

use serde_json::{Map, Value};

use topoalign_kube_types::kubelet_settings::keys;

/// The settings `topoalign kubelet-config set` was asked to change (`None` = leave alone).
/// With the `clap` feature it is also that command's flags (the doc comments are their help).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[cfg_attr(feature = "clap", derive(clap::Args))]
pub struct ChangeRequest {
    /// topologyManagerPolicy: none | best-effort | restricted | single-numa-node.
    #[cfg_attr(feature = "clap", arg(long, value_name = "POLICY"))]
    pub topology_manager_policy: Option<String>,
    /// topologyManagerScope: container | pod.
    #[cfg_attr(feature = "clap", arg(long, value_name = "SCOPE"))]
    pub topology_manager_scope: Option<String>,
    /// A topologyManagerPolicyOptions entry NAME=VALUE (repeatable), e.g.
    /// prefer-closest-numa-nodes=true, max-allowable-numa-nodes=8. Merged into the existing options.
    #[cfg_attr(
        feature = "clap",
        arg(long = "topology-manager-option", value_name = "NAME=VALUE", value_parser = topoalign_kube_types::kubelet_settings::parse_option_arg)
    )]
    pub topology_manager_options: Vec<(String, String)>,
    /// cpuManagerPolicy: none | static (static needs reserved CPUs).
    #[cfg_attr(feature = "clap", arg(long, value_name = "POLICY"))]
    pub cpu_manager_policy: Option<String>,
    /// reservedSystemCPUs, a CPU list such as 0-1,96-97.
    #[cfg_attr(feature = "clap", arg(long, value_name = "LIST"))]
    pub reserved_cpus: Option<String>,
}

impl ChangeRequest {
    /// True when nothing was asked for.
    pub fn is_empty(&self) -> bool {
        self == &ChangeRequest::default()
    }

    /// The top-level fields to write, in the order they are appended when new
    /// (the order of seed 000's patch), each with its full new value.
    pub fn field_updates(&self, current: &Map<String, Value>) -> Vec<(String, Value)> {
        let mut out = Vec::new();
        if let Some(p) = &self.topology_manager_policy {
            out.push((keys::TM_POLICY.to_string(), Value::String(p.clone())));
        }
        if let Some(s) = &self.topology_manager_scope {
            out.push((keys::TM_SCOPE.to_string(), Value::String(s.clone())));
        }
        if !self.topology_manager_options.is_empty() {
            let mut options = match current.get(keys::TM_OPTIONS) {
                Some(Value::Object(m)) => m.clone(),
                _ => Map::new(),
            };
            for (k, v) in &self.topology_manager_options {
                options.insert(k.clone(), Value::String(v.clone()));
            }
            out.push((keys::TM_OPTIONS.to_string(), Value::Object(options)));
        }
        if let Some(p) = &self.cpu_manager_policy {
            out.push((keys::CPU_POLICY.to_string(), Value::String(p.clone())));
        }
        if let Some(r) = &self.reserved_cpus {
            out.push((keys::RESERVED_CPUS.to_string(), Value::String(r.clone())));
        }
        out
    }
}

/// Applies `updates` to a copy of `fields`: existing keys keep their position, new keys
/// are appended in order. Only updates that change something are kept in the returned list.
pub(crate) fn apply_updates(
    fields: &Map<String, Value>,
    updates: &[(String, Value)],
) -> (Map<String, Value>, Vec<(String, Value)>) {
    let mut new = fields.clone();
    let mut effective = Vec::new();
    for (k, v) in updates {
        if fields.get(k) != Some(v) {
            new.insert(k.clone(), v.clone());
            effective.push((k.clone(), v.clone()));
        }
    }
    (new, effective)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use topoalign_kube_types::kubelet_settings::parse_option_arg;

    #[test]
    fn merges_options_and_keeps_positions() {
        let cur = json!({"a": 1, "topologyManagerPolicyOptions": {"max-allowable-numa-nodes": "8"}, "cpuManagerPolicy": "none"});
        let req = ChangeRequest {
            topology_manager_policy: Some("restricted".into()),
            topology_manager_options: vec![("prefer-closest-numa-nodes".into(), "true".into())],
            cpu_manager_policy: Some("none".into()),
            ..Default::default()
        };
        let ups = req.field_updates(cur.as_object().unwrap());
        let (new, eff) = apply_updates(cur.as_object().unwrap(), &ups);
        let keys: Vec<_> = new.keys().cloned().collect();
        assert_eq!(
            keys,
            [
                "a",
                "topologyManagerPolicyOptions",
                "cpuManagerPolicy",
                "topologyManagerPolicy"
            ]
        );
        assert_eq!(
            new["topologyManagerPolicyOptions"],
            json!({"max-allowable-numa-nodes": "8", "prefer-closest-numa-nodes": "true"})
        );
        // cpuManagerPolicy was already none: not an effective change.
        assert_eq!(eff.len(), 2);
    }

    #[test]
    fn parses_option_args() {
        assert_eq!(parse_option_arg("a=b").unwrap(), ("a".into(), "b".into()));
        assert!(parse_option_arg("ab").is_err());
        assert!(parse_option_arg("=b").is_err());
    }
}
