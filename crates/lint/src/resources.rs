//! Container resources: which names are GPUs/NICs/MIG slices, counts, and QoS.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Container;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity as ApiQuantity;
use serde_json::Value;
use topoalign_kube_types::{
    CPU, MEMORY, NotGuaranteed, Quantity, QuantityError, ResourceList, container_guaranteed,
};

/// A `requests` or `limits` list as the API types hold it.
pub(crate) type ApiList = BTreeMap<String, ApiQuantity>;

/// What a resource name stands for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ResourceKind {
    /// A whole GPU (`nvidia.com/gpu`, `amd.com/gpu`, ...).
    Gpu,
    /// A MIG slice (`nvidia.com/mig-<profile>`).
    Mig,
    /// An SR-IOV VF or RDMA device.
    Nic,
    /// An extended resource a DeviceClass backs (DRAExtendedResource): topoalign's
    /// (`topoalign.dev/gpu-nic-pair`, ...) or a class's implicit name
    /// (`deviceclass.resource.kubernetes.io/<class>`). The scheduler makes a claim for it;
    /// no device plugin and no Topology Manager hint is involved.
    Dra,
    /// Anything else.
    Other,
}

/// Classifies an extended resource name.
pub(crate) fn classify(name: &str) -> ResourceKind {
    let lower = name.to_ascii_lowercase();
    if dra_backed(&lower) {
        ResourceKind::Dra
    } else if lower.starts_with("nvidia.com/mig-") {
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

/// True for the extended resources topoalign's DeviceClasses back and for every class's
/// implicit name.
pub(crate) fn dra_backed(lower: &str) -> bool {
    use topoalign_kube_types::extended;
    [extended::PAIR, extended::GPU, extended::NIC].contains(&lower)
        || lower.starts_with(extended::MIG_PREFIX)
        || lower.starts_with(extended::IMPLICIT_PREFIX)
}

/// True when a NIC resource name denotes SR-IOV virtual functions.
pub(crate) fn is_vf_resource(name: &str) -> bool {
    let lower = name.to_ascii_lowercase();
    lower.contains("sriov") || lower.contains("vf")
}

/// Reads a quantity as written (`"500m"`, or a number the YAML gave, e.g. `16`).
fn parse(q: &ApiQuantity) -> Result<Quantity, QuantityError> {
    q.0.parse()
}

/// Reads a CPU amount: a quantity without a binary suffix (the kube-types rule).
fn parse_cpu(q: &ApiQuantity) -> Result<Quantity, QuantityError> {
    Quantity::cpu_from_json(&Value::String(q.0.clone()))
}

/// A whole-number resource count (`4`, `"4"`, `1k`); `None` when it is not a
/// non-negative whole quantity.
pub(crate) fn count(q: &ApiQuantity) -> Option<u64> {
    parse(q)
        .ok()
        .filter(Quantity::is_integer)
        .and_then(|q| u64::try_from(q.value()).ok())
}

/// The text of `list[res]` as written (empty when absent).
fn text_of(list: &ApiList, res: &str) -> String {
    list.get(res)
        .map(|q| q.0.trim().to_string())
        .unwrap_or_default()
}

/// Parses the cpu and memory entries of `requests` or `limits` (the ones QoS reads).
fn qos_list(list: &ApiList, what: &str) -> Result<ResourceList, String> {
    let mut out = ResourceList::new();
    for res in [CPU, MEMORY] {
        let Some(v) = list.get(res) else { continue };
        let parsed = if res == CPU { parse_cpu(v) } else { parse(v) };
        let q = parsed.map_err(|e| format!("{res} {what} {e}"))?;
        out.insert(res.to_string(), q);
    }
    Ok(out)
}

/// The resources of one container.
#[derive(Debug, Clone, Default)]
pub(crate) struct ContainerResources {
    /// `resources.limits`.
    pub limits: ApiList,
    /// `resources.requests`.
    pub requests: ApiList,
}

impl ContainerResources {
    /// Reads `container.resources`.
    pub(crate) fn of(container: &Container) -> ContainerResources {
        let r = container.resources.as_ref();
        ContainerResources {
            limits: r.and_then(|r| r.limits.clone()).unwrap_or_default(),
            requests: r.and_then(|r| r.requests.clone()).unwrap_or_default(),
        }
    }

    /// Extended resources with their counts (limits win; requests alone also count).
    pub(crate) fn devices(&self) -> Vec<(String, u64)> {
        let mut out: Vec<(String, u64)> = Vec::new();
        for (name, v) in self.limits.iter().chain(self.requests.iter()) {
            let kind = classify(name);
            if matches!(kind, ResourceKind::Other | ResourceKind::Dra)
                || out.iter().any(|(n, _)| n == name)
            {
                continue;
            }
            if let Some(c) = count(v) {
                out.push((name.clone(), c));
            }
        }
        out
    }

    /// Every `limits`/`requests` entry that is not a valid amount for its resource, as
    /// (`limits` or `requests`, resource name, what is wrong): cpu a non-negative decimal
    /// quantity, memory a whole number of bytes, extended resources (`vendor/name`) a
    /// whole number of devices, anything else a non-negative quantity.
    pub(crate) fn quantity_problems(&self) -> Vec<(&'static str, String, String)> {
        let mut out = Vec::new();
        for (list_name, list) in [("limits", &self.limits), ("requests", &self.requests)] {
            for (res, v) in list {
                let parsed = if res == CPU { parse_cpu(v) } else { parse(v) };
                let why = match parsed {
                    Err(e) => Some(e.to_string()),
                    Ok(q) if res == MEMORY && !q.is_integer() => {
                        Some(format!("`{}` is not a whole number of bytes", v.0.trim()))
                    }
                    Ok(q) if res.contains('/') && !q.is_integer() => Some(format!(
                        "`{}` is not a whole number of devices (extended resources are counted)",
                        v.0.trim()
                    )),
                    Ok(_) => None,
                };
                if let Some(why) = why {
                    out.push((list_name, res.clone(), why));
                }
            }
        }
        out
    }

    /// Why this container is not Guaranteed with whole CPUs (`None` when it is): the QoS
    /// rule of [`container_guaranteed`], then the static CPU manager's whole-CPU rule.
    pub(crate) fn guaranteed_problem(&self) -> Option<String> {
        let requests = match qos_list(&self.requests, "request") {
            Ok(l) => l,
            Err(why) => return Some(why),
        };
        let limits = match qos_list(&self.limits, "limit") {
            Ok(l) => l,
            Err(why) => return Some(why),
        };
        if let Err(why) = container_guaranteed(&requests, &limits) {
            return Some(match why {
                NotGuaranteed::RequestDiffers { resource, .. } => format!(
                    "{resource} request {} differs from its limit {}",
                    text_of(&self.requests, resource),
                    text_of(&self.limits, resource)
                ),
                other => other.to_string(),
            });
        }
        match limits.get(CPU) {
            Some(cpu) if cpu.is_integer() => None,
            _ => Some(format!(
                "cpu {} is not a whole number of CPUs",
                text_of(&self.limits, CPU)
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// The resources of a container with `resources: v`, read through the API types.
    fn res(v: Value) -> ContainerResources {
        let c: Container = serde_json::from_value(json!({"name": "c", "resources": v})).unwrap();
        ContainerResources::of(&c)
    }

    fn q(v: Value) -> ApiQuantity {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn classifies_names() {
        assert_eq!(classify("nvidia.com/gpu"), ResourceKind::Gpu);
        assert_eq!(classify("amd.com/gpu"), ResourceKind::Gpu);
        assert_eq!(classify("nvidia.com/mig-1g.10gb"), ResourceKind::Mig);
        assert_eq!(classify("nvidia.com/sriov-rdma-vf"), ResourceKind::Nic);
        assert_eq!(classify("rdma/hca_shared_devices_a"), ResourceKind::Nic);
        assert_eq!(classify("openshift.io/mlnx_sriov_rdma"), ResourceKind::Nic);
        assert_eq!(classify("memory"), ResourceKind::Other);
        assert_eq!(classify("topoalign.dev/gpu-nic-pair"), ResourceKind::Dra);
        assert_eq!(classify("topoalign.dev/gpu"), ResourceKind::Dra);
        assert_eq!(classify("topoalign.dev/mig-1g.10gb"), ResourceKind::Dra);
        assert_eq!(
            classify("deviceclass.resource.kubernetes.io/gpu.nvidia.com"),
            ResourceKind::Dra
        );
        assert!(is_vf_resource("nvidia.com/sriov-rdma-vf"));
        assert!(!is_vf_resource("rdma/hca_shared_devices_a"));
    }

    #[test]
    fn guaranteed_needs_equal_requests_and_whole_cpus() {
        let c = res;
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
    fn guaranteed_compares_amounts_not_spellings() {
        let c = res;
        assert_eq!(
            c(json!({"limits": {"cpu": "2", "memory": "1Gi"}, "requests": {"cpu": "2000m", "memory": "1073741824"}}))
                .guaranteed_problem(),
            None
        );
        let zero = c(json!({"limits": {"cpu": "0", "memory": "1Gi"}}))
            .guaranteed_problem()
            .unwrap();
        assert!(zero.contains("cpu limit is 0"), "{zero}");
        let bad = c(json!({"limits": {"cpu": "4", "memory": "64Gb"}}))
            .guaranteed_problem()
            .unwrap();
        assert!(
            bad.contains("memory limit `64Gb` is not a quantity"),
            "{bad}"
        );
        let gi = c(json!({"limits": {"cpu": "1Gi", "memory": "1Gi"}}))
            .guaranteed_problem()
            .unwrap();
        assert!(gi.contains("cpu limit `1Gi`"), "{gi}");
        let differs =
            c(json!({"limits": {"cpu": "4", "memory": "64Gi"}, "requests": {"memory": "32Gi"}}))
                .guaranteed_problem()
                .unwrap();
        assert_eq!(differs, "memory request 32Gi differs from its limit 64Gi");
    }

    #[test]
    fn counts_are_whole_quantities() {
        assert_eq!(count(&q(json!(4))), Some(4));
        assert_eq!(count(&q(json!("4"))), Some(4));
        assert_eq!(count(&q(json!("1k"))), Some(1000));
        assert_eq!(count(&q(json!(-1))), None);
        assert_eq!(count(&q(json!("1.5"))), None);
        assert_eq!(count(&q(json!(1.5))), None);
        assert_eq!(count(&q(json!("four"))), None);
    }

    #[test]
    fn invalid_quantities_are_named() {
        // (A value that is not a string or number is refused by the API types already,
        // see `typed`.)
        let r = res(json!({
            "limits": {"amd.com/gpu": "lots", "cpu": "-1", "memory": 1.5, "nvidia.com/gpu": 2},
            "requests": {"memory": "1Gi", "example.com/nic": "0.5", "cpu": "1Gi"}}));
        let got: Vec<(&str, String)> = r
            .quantity_problems()
            .into_iter()
            .map(|(l, n, _)| (l, n))
            .collect();
        assert_eq!(
            got,
            [
                ("limits", "amd.com/gpu".to_string()),
                ("limits", "cpu".to_string()),
                ("limits", "memory".to_string()),
                ("requests", "cpu".to_string()),
                ("requests", "example.com/nic".to_string()),
            ]
        );
    }

    #[test]
    fn device_counts() {
        let r =
            res(json!({"limits": {"amd.com/gpu": 4, "nvidia.com/sriov-rdma-vf": "4", "cpu": 8}}));
        assert_eq!(
            r.devices(),
            vec![
                ("amd.com/gpu".to_string(), 4),
                ("nvidia.com/sriov-rdma-vf".to_string(), 4)
            ]
        );
    }
}
