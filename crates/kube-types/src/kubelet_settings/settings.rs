//! The kubelet settings the Topology Manager, CPU manager and memory manager read, by
//! their `KubeletConfiguration` names, with the kubelet's defaults.

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::Value;
use topoalign_topology::CpuSet;

use super::error::ConfigError;
use super::keys;
use super::policy::{Policy, Scope};
use crate::quantity::Quantity;

/// `cpuManagerPolicy`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum CpuPolicy {
    /// `none` (default): no exclusive CPUs, no hints.
    #[default]
    None,
    /// `static`: exclusive CPUs for Guaranteed pods with integer CPUs.
    Static,
}

impl std::str::FromStr for CpuPolicy {
    type Err = ConfigError;
    /// Exactly as the kubelet's CPU manager matches it (`cpumanager.NewManager`): `Static`
    /// is refused there with `unknown policy: "Static"`, so it is here.
    fn from_str(p: &str) -> Result<Self, ConfigError> {
        match p {
            "none" => Ok(CpuPolicy::None),
            "static" => Ok(CpuPolicy::Static),
            _ => Err(ConfigError::UnknownCpuPolicy(p.to_string())),
        }
    }
}

#[cfg(test)]
mod policy_name_tests {
    use super::*;

    /// The kubelet matches policy names exactly: lower case for the CPU manager, capitalised
    /// for the memory manager.
    #[test]
    fn policy_names_are_matched_as_the_kubelet_matches_them() {
        assert_eq!("static".parse::<CpuPolicy>().unwrap(), CpuPolicy::Static);
        for wrong in ["Static", "STATIC", "None"] {
            let e = wrong.parse::<CpuPolicy>().unwrap_err();
            assert_eq!(
                e.to_string(),
                format!(
                    "cpuManagerPolicy: unknown policy `{wrong}` (expected none or static; the kubelet matches it exactly)"
                )
            );
        }
        assert_eq!(
            "Static".parse::<MemoryPolicy>().unwrap(),
            MemoryPolicy::Static
        );
        assert!("static".parse::<MemoryPolicy>().is_err());
        let cfg = serde_json::json!({"cpuManagerPolicy": "Static", "reservedSystemCPUs": "0"});
        let e = Settings::from_kubelet_config(&cfg).unwrap_err();
        assert!(e.to_string().contains("unknown policy `Static`"), "{e}");
    }
}

/// `memoryManagerPolicy`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub enum MemoryPolicy {
    /// `None` (default).
    #[default]
    None,
    /// `Static`: NUMA-pinned memory for Guaranteed pods.
    Static,
}

impl std::str::FromStr for MemoryPolicy {
    type Err = ConfigError;
    fn from_str(p: &str) -> Result<Self, ConfigError> {
        match p {
            "None" => Ok(MemoryPolicy::None),
            "Static" => Ok(MemoryPolicy::Static),
            _ => Err(ConfigError::UnknownMemoryPolicy(p.to_string())),
        }
    }
}

/// The settings, with kubelet defaults for what is missing.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Settings {
    /// `topologyManagerPolicy`.
    pub topology_manager_policy: Policy,
    /// `topologyManagerScope`.
    pub topology_manager_scope: Scope,
    /// `topologyManagerPolicyOptions`.
    pub topology_manager_policy_options: BTreeMap<String, String>,
    /// `cpuManagerPolicy`.
    pub cpu_manager_policy: CpuPolicy,
    /// `memoryManagerPolicy`.
    pub memory_manager_policy: MemoryPolicy,
    /// `reservedSystemCPUs`.
    pub reserved_system_cpus: Option<CpuSet>,
    /// `kubeReserved.cpu` + `systemReserved.cpu`, in milli-CPUs.
    pub reserved_cpu_millis: u64,
    /// `reservedMemory`: NUMA node → bytes.
    pub reserved_memory: BTreeMap<u32, u64>,
}

fn field_err(field: &str, reason: impl Into<String>) -> ConfigError {
    ConfigError::Field {
        field: field.to_string(),
        reason: reason.into(),
    }
}

fn string_field<'a>(cfg: &'a Value, key: &str) -> Result<Option<&'a str>, ConfigError> {
    match cfg.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(_) => Err(field_err(key, "expected a string")),
    }
}

fn quantity_of(v: &Value, field: &str) -> Result<Quantity, ConfigError> {
    Quantity::from_json(v).map_err(|e| field_err(field, e.to_string()))
}

impl Settings {
    /// Reads the fields from a decoded `KubeletConfiguration` (other fields ignored).
    pub fn from_kubelet_config(cfg: &Value) -> Result<Settings, ConfigError> {
        if !cfg.is_object() {
            return Err(field_err(
                "KubeletConfiguration",
                "expected a mapping of fields",
            ));
        }
        let mut s = Settings::default();
        if let Some(p) = string_field(cfg, keys::TM_POLICY)? {
            s.topology_manager_policy = p.parse()?;
        }
        if let Some(p) = string_field(cfg, keys::TM_SCOPE)? {
            s.topology_manager_scope = p.parse()?;
        }
        match cfg.get(keys::TM_OPTIONS) {
            None | Some(Value::Null) => {}
            Some(Value::Object(o)) => {
                for (k, v) in o {
                    let Value::String(text) = v else {
                        return Err(field_err(
                            &format!("topologyManagerPolicyOptions.{k}"),
                            "expected a string (the kubelet reads map[string]string; quote it)",
                        ));
                    };
                    s.topology_manager_policy_options
                        .insert(k.clone(), text.clone());
                }
            }
            Some(_) => {
                return Err(field_err(
                    "topologyManagerPolicyOptions",
                    "expected a map of option name to string",
                ));
            }
        }
        if let Some(p) = string_field(cfg, keys::CPU_POLICY)? {
            s.cpu_manager_policy = p.parse()?;
        }
        if let Some(p) = string_field(cfg, keys::MEMORY_POLICY)? {
            s.memory_manager_policy = p.parse()?;
        }
        if let Some(c) = string_field(cfg, keys::RESERVED_CPUS)? {
            let set: CpuSet = c
                .parse()
                .map_err(|e| field_err("reservedSystemCPUs", format!("{e}")))?;
            s.reserved_system_cpus = Some(set);
        }
        for key in [keys::KUBE_RESERVED, keys::SYSTEM_RESERVED] {
            if let Some(v) = cfg.get(key).and_then(|r| r.get("cpu")) {
                let q = quantity_of(v, &format!("{key}.cpu"))?;
                s.reserved_cpu_millis += u64::try_from(q.milli_value()).unwrap_or(0);
            }
        }
        match cfg.get("reservedMemory") {
            None | Some(Value::Null) => {}
            Some(Value::Array(list)) => {
                for (i, item) in list.iter().enumerate() {
                    let at = format!("reservedMemory[{i}]");
                    let node = item
                        .get("numaNode")
                        .and_then(Value::as_u64)
                        .and_then(|n| u32::try_from(n).ok())
                        .ok_or_else(|| {
                            field_err(&format!("{at}.numaNode"), "expected a NUMA id")
                        })?;
                    let mem = item
                        .pointer("/limits/memory")
                        .ok_or_else(|| field_err(&format!("{at}.limits.memory"), "missing"))?;
                    let q = quantity_of(mem, &format!("{at}.limits.memory"))?;
                    let bytes = u64::try_from(q.value()).unwrap_or(u64::MAX);
                    *s.reserved_memory.entry(node).or_insert(0) += bytes;
                }
            }
            Some(_) => return Err(field_err("reservedMemory", "expected a list")),
        }
        Ok(s)
    }

    /// How many CPUs the static policy reserves: `reservedSystemCPUs`, else the rounded-up
    /// sum of the kube and system reservations.
    pub fn reserved_cpu_count(&self) -> u64 {
        match &self.reserved_system_cpus {
            Some(set) => set.len() as u64,
            None => self.reserved_cpu_millis.div_ceil(1000),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn reads_the_seed_fix() {
        let s = Settings::from_kubelet_config(&json!({
            "kind": "KubeletConfiguration",
            "topologyManagerPolicy": "restricted",
            "topologyManagerScope": "container",
            "topologyManagerPolicyOptions": {"prefer-closest-numa-nodes": "true"},
            "cpuManagerPolicy": "static",
            "kubeReserved": {"cpu": "637m"}
        }))
        .unwrap();
        assert_eq!(s.topology_manager_policy, Policy::Restricted);
        assert_eq!(s.cpu_manager_policy, CpuPolicy::Static);
        assert_eq!(s.reserved_cpu_count(), 1);
    }

    #[test]
    fn names_the_bad_field() {
        let e = Settings::from_kubelet_config(&json!({"topologyManagerPolicy": "strict"}))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("topologyManagerPolicy") && e.contains("strict"),
            "{e}"
        );
        let e = Settings::from_kubelet_config(&json!({"kubeReserved": {"cpu": "lots"}}))
            .unwrap_err()
            .to_string();
        assert!(e.contains("kubeReserved.cpu"), "{e}");
    }
}
