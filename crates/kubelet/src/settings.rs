//! The topology-relevant settings of a KubeletConfiguration, with kubelet defaults filled.

use serde::Serialize;
use serde_json::{Map, Value};

/// One displayed setting.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Setting {
    /// Field path, e.g. `kubeReserved.cpu` or `featureGates.DynamicResourceAllocation`.
    pub field: String,
    /// The value (from the file, or the kubelet default).
    pub value: Value,
    /// True when the file does not set it and the value is the kubelet's default.
    pub default: bool,
}

/// Feature gates shown by `show`: DRA and the resource managers' option gates.
pub(crate) fn is_relevant_gate(name: &str) -> bool {
    name == "DynamicResourceAllocation"
        || name.starts_with("DRA")
        || name.starts_with("TopologyManager")
        || name.starts_with("CPUManager")
        || name.starts_with("MemoryManager")
}

fn setting(field: &str, found: Option<&Value>, default: Value) -> Setting {
    match found {
        Some(v) => Setting {
            field: field.to_string(),
            value: v.clone(),
            default: false,
        },
        None => Setting {
            field: field.to_string(),
            value: default,
            default: true,
        },
    }
}

/// The topology-relevant settings of `fields`, in a fixed order, defaults filled.
pub fn topology_settings(fields: &Map<String, Value>) -> Vec<Setting> {
    use topoalign_kube_types::kubelet_settings::keys::*;
    let mut out = vec![
        setting(TM_POLICY, fields.get(TM_POLICY), "none".into()),
        setting(TM_SCOPE, fields.get(TM_SCOPE), "container".into()),
    ];
    let options = fields.get(TM_OPTIONS).and_then(Value::as_object);
    for (name, default) in [
        ("prefer-closest-numa-nodes", "false"),
        ("max-allowable-numa-nodes", "8"),
    ] {
        out.push(setting(
            &format!("{TM_OPTIONS}.{name}"),
            options.and_then(|o| o.get(name)),
            default.into(),
        ));
    }
    if let Some(o) = options {
        for (name, v) in o {
            if name != "prefer-closest-numa-nodes" && name != "max-allowable-numa-nodes" {
                out.push(setting(
                    &format!("{TM_OPTIONS}.{name}"),
                    Some(v),
                    Value::Null,
                ));
            }
        }
    }
    out.push(setting(CPU_POLICY, fields.get(CPU_POLICY), "none".into()));
    out.push(setting(
        MEMORY_POLICY,
        fields.get(MEMORY_POLICY),
        "None".into(),
    ));
    out.push(setting(RESERVED_CPUS, fields.get(RESERVED_CPUS), "".into()));
    for section in [KUBE_RESERVED, SYSTEM_RESERVED] {
        let cpu = fields
            .get(section)
            .and_then(Value::as_object)
            .and_then(|m| m.get("cpu"));
        out.push(setting(&format!("{section}.cpu"), cpu, "0".into()));
    }
    let gates = fields.get(FEATURE_GATES).and_then(Value::as_object);
    let has_dra = gates.is_some_and(|g| g.contains_key("DynamicResourceAllocation"));
    if let Some(g) = gates {
        for (name, v) in g.iter().filter(|(n, _)| is_relevant_gate(n)) {
            out.push(setting(
                &format!("{FEATURE_GATES}.{name}"),
                Some(v),
                Value::Null,
            ));
        }
    }
    if !has_dra {
        out.push(setting(
            &format!("{FEATURE_GATES}.DynamicResourceAllocation"),
            None,
            "true since 1.34 (GA), false before".into(),
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn fills_defaults_and_marks_them() {
        let fields = json!({
            "kubeReserved": {"cpu": "637m", "memory": "1Gi"},
            "featureGates": {"DynamicResourceAllocation": true, "RotateKubeletServerCertificate": true},
            "topologyManagerPolicy": "restricted"
        });
        let s = topology_settings(fields.as_object().unwrap());
        let get = |f: &str| s.iter().find(|x| x.field == f).unwrap().clone();
        assert_eq!(get("topologyManagerPolicy").value, json!("restricted"));
        assert!(!get("topologyManagerPolicy").default);
        assert!(get("topologyManagerScope").default);
        assert_eq!(get("cpuManagerPolicy").value, json!("none"));
        assert_eq!(get("kubeReserved.cpu").value, json!("637m"));
        assert!(get("systemReserved.cpu").default);
        assert_eq!(
            get("featureGates.DynamicResourceAllocation").value,
            json!(true)
        );
        assert!(!s.iter().any(|x| x.field.contains("Rotate")));
    }
}
