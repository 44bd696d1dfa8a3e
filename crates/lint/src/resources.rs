//! Container resources: which names are GPUs/NICs/MIG slices, counts, and QoS.

use serde_json::{Map, Value};

/// What a resource name stands for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResourceKind {
    /// A whole GPU (`nvidia.com/gpu`, `amd.com/gpu`, ...).
    Gpu,
    /// A MIG slice (`nvidia.com/mig-<profile>`).
    Mig,
    /// An SR-IOV VF or RDMA device.
    Nic,
    /// Anything else.
    Other,
}

/// Classifies an extended resource name.
pub fn classify(name: &str) -> ResourceKind {
    let lower = name.to_ascii_lowercase();
    if lower.starts_with("nvidia.com/mig-") {
        ResourceKind::Mig
    } else if lower.ends_with("/gpu")
        || lower == "gpu.intel.com/i915"
        || lower == "gpu.intel.com/xe"
    {
        ResourceKind::Gpu
    } else if lower.starts_with("rdma/") || lower.contains("rdma") || lower.contains("sriov") {
        ResourceKind::Nic
    } else {
        ResourceKind::Other
    }
}

/// True when a NIC resource name denotes SR-IOV virtual functions.
pub fn is_vf_resource(name: &str) -> bool {
    let lower = name.to_ascii_lowercase();
    lower.contains("sriov") || lower.contains("vf")
}

/// A whole-number resource count (`4`, `"4"`); `None` when not a non-negative integer.
pub fn count(v: &Value) -> Option<u64> {
    match v {
        Value::Number(n) => n.as_u64(),
        Value::String(s) => s.trim().parse().ok(),
        _ => None,
    }
}

/// A CPU quantity in millicores (`16`, `"500m"`, `0.5`).
pub fn cpu_millis(v: &Value) -> Option<i64> {
    match v {
        Value::Number(n) => n
            .as_i64()
            .map(|i| i * 1000)
            .or_else(|| n.as_f64().map(|f| (f * 1000.0).ceil() as i64)),
        Value::String(s) => {
            let s = s.trim();
            if let Some(m) = s.strip_suffix('m') {
                m.parse().ok()
            } else {
                s.parse::<f64>().ok().map(|f| (f * 1000.0).ceil() as i64)
            }
        }
        _ => None,
    }
}

/// Normalises a quantity for equality (`"16"` and `16` are equal; `64Gi` stays text).
fn quantity_text(v: &Value) -> String {
    match v {
        Value::String(s) => s.trim().to_string(),
        other => other.to_string(),
    }
}

/// The resources of one container.
#[derive(Debug, Clone, Default)]
pub struct ContainerResources {
    /// `resources.limits`.
    pub limits: Map<String, Value>,
    /// `resources.requests`.
    pub requests: Map<String, Value>,
}

impl ContainerResources {
    /// Reads `container.resources`.
    pub fn of(container: &Value) -> ContainerResources {
        let get = |k: &str| {
            container
                .get("resources")
                .and_then(|r| r.get(k))
                .and_then(Value::as_object)
                .cloned()
                .unwrap_or_default()
        };
        ContainerResources {
            limits: get("limits"),
            requests: get("requests"),
        }
    }

    /// Extended resources with their counts (limits win; requests alone also count).
    pub fn devices(&self) -> Vec<(String, u64)> {
        let mut out: Vec<(String, u64)> = Vec::new();
        for (name, v) in self.limits.iter().chain(self.requests.iter()) {
            if classify(name) == ResourceKind::Other || out.iter().any(|(n, _)| n == name) {
                continue;
            }
            if let Some(c) = count(v) {
                out.push((name.clone(), c));
            }
        }
        out
    }

    /// Why this container is not Guaranteed with whole CPUs (`None` when it is).
    pub fn guaranteed_problem(&self) -> Option<String> {
        for res in ["cpu", "memory"] {
            let Some(limit) = self.limits.get(res) else {
                return Some(format!("no {res} limit"));
            };
            if let Some(req) = self.requests.get(res)
                && quantity_text(req) != quantity_text(limit)
                && !(res == "cpu" && cpu_millis(req) == cpu_millis(limit))
            {
                return Some(format!(
                    "{res} request {} differs from its limit {}",
                    quantity_text(req),
                    quantity_text(limit)
                ));
            }
        }
        let cpu = self.limits.get("cpu").and_then(cpu_millis);
        match cpu {
            Some(m) if m > 0 && m % 1000 == 0 => None,
            _ => Some(format!(
                "cpu {} is not a whole number of CPUs",
                self.limits
                    .get("cpu")
                    .map(quantity_text)
                    .unwrap_or_default()
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn classifies_names() {
        assert_eq!(classify("nvidia.com/gpu"), ResourceKind::Gpu);
        assert_eq!(classify("amd.com/gpu"), ResourceKind::Gpu);
        assert_eq!(classify("nvidia.com/mig-1g.10gb"), ResourceKind::Mig);
        assert_eq!(classify("nvidia.com/sriov-rdma-vf"), ResourceKind::Nic);
        assert_eq!(classify("rdma/hca_shared_devices_a"), ResourceKind::Nic);
        assert_eq!(classify("openshift.io/mlnx_sriov_rdma"), ResourceKind::Nic);
        assert_eq!(classify("memory"), ResourceKind::Other);
        assert!(is_vf_resource("nvidia.com/sriov-rdma-vf"));
        assert!(!is_vf_resource("rdma/hca_shared_devices_a"));
    }

    #[test]
    fn guaranteed_needs_equal_requests_and_whole_cpus() {
        let c = |v: Value| ContainerResources::of(&json!({"resources": v}));
        assert_eq!(c(json!({"limits": {"cpu": "16", "memory": "64Gi"}, "requests": {"cpu": 16, "memory": "64Gi"}})).guaranteed_problem(), None);
        assert_eq!(
            c(json!({"limits": {"cpu": "16000m", "memory": "64Gi"}})).guaranteed_problem(),
            None
        );
        assert!(
            c(json!({"limits": {"memory": "1Gi"}}))
                .guaranteed_problem()
                .unwrap()
                .contains("no cpu limit")
        );
        assert!(
            c(json!({"limits": {"cpu": "2", "memory": "1Gi"}, "requests": {"cpu": "1"}}))
                .guaranteed_problem()
                .unwrap()
                .contains("differs")
        );
        assert!(
            c(json!({"limits": {"cpu": "1500m", "memory": "1Gi"}}))
                .guaranteed_problem()
                .unwrap()
                .contains("whole")
        );
    }

    #[test]
    fn device_counts() {
        let r = ContainerResources::of(
            &json!({"resources": {"limits": {"amd.com/gpu": 4, "nvidia.com/sriov-rdma-vf": "4", "cpu": 8}}}),
        );
        assert_eq!(
            r.devices(),
            vec![
                ("amd.com/gpu".to_string(), 4),
                ("nvidia.com/sriov-rdma-vf".to_string(), 4)
            ]
        );
    }
}
