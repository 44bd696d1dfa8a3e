//! The pod as the kubelet's resource managers see it: containers with requests and
//! limits, init containers (sidecars when `restartPolicy: Always`), and the QoS class
//! (`pkg/apis/core/helper/qos.GetPodQOS`, computed by [`topoalign_kube_types::pod_qos`]).

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::Value;
pub use topoalign_kube_types::QosClass;
pub(crate) use topoalign_kube_types::{CPU, MEMORY};

use crate::error::InputError;
use topoalign_kube_types::Quantity;

/// One container's resources.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Container {
    /// Its name.
    pub name: String,
    /// `resources.requests` after API defaulting (a missing request takes the limit).
    pub requests: BTreeMap<String, Quantity>,
    /// `resources.limits`.
    pub limits: BTreeMap<String, Quantity>,
    /// An init container with `restartPolicy: Always` (a sidecar).
    pub restartable: bool,
}

/// A pod.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Pod {
    /// `metadata.name`.
    pub name: String,
    /// `spec.initContainers`.
    pub init_containers: Vec<Container>,
    /// `spec.containers`.
    pub containers: Vec<Container>,
}

impl Container {
    /// A container whose requests equal its limits.
    pub fn with_limits(name: &str, limits: BTreeMap<String, Quantity>) -> Self {
        Container {
            name: name.to_string(),
            requests: limits.clone(),
            limits,
            restartable: false,
        }
    }

    /// The integer value of the limit of `resource` (0 when absent): what the device
    /// manager reads (`int(quantity.Value())` over `Resources.Limits`).
    pub fn limit_value(&self, resource: &str) -> u64 {
        self.limits
            .get(resource)
            .map_or(0, |q| u64::try_from(q.value()).unwrap_or(u64::MAX))
    }
}

fn is_native(name: &str) -> bool {
    !name.contains('/') || name.starts_with("kubernetes.io/") || name.starts_with("requests.")
}

impl Pod {
    /// Every container in the kubelet's admission order: init containers, then app ones.
    pub fn all_containers(&self) -> impl Iterator<Item = &Container> {
        self.init_containers.iter().chain(self.containers.iter())
    }

    /// Mirrors `GetPodQOS` over cpu and memory.
    pub fn qos(&self) -> QosClass {
        topoalign_kube_types::pod_qos(self.all_containers().map(|c| (&c.requests, &c.limits))).class
    }

    /// The pod-level amount of a per-container amount, as `resource.PodLimits` and the
    /// CPU manager's `podGuaranteedCPUs` compute it: the larger of the biggest init
    /// container (plus the sidecars started before it) and the sum of app containers and
    /// sidecars.
    pub fn pod_level(&self, amount: impl Fn(&Container) -> u64) -> u64 {
        let mut init_max = 0u64;
        let mut sidecars = 0u64;
        for c in &self.init_containers {
            let v = amount(c);
            if c.restartable {
                sidecars += v;
            } else {
                init_max = init_max.max(sidecars + v);
            }
        }
        let apps: u64 = self.containers.iter().map(&amount).sum();
        init_max.max(apps + sidecars)
    }

    /// Extended (device) resources requested anywhere, by name.
    pub fn extended_resources(&self) -> Vec<String> {
        let mut names: Vec<String> = self
            .all_containers()
            .flat_map(|c| c.limits.keys())
            .filter(|k| !is_native(k))
            .cloned()
            .collect();
        names.sort();
        names.dedup();
        names
    }

    /// Reads a Pod manifest (already decoded from JSON or YAML): `metadata.name`,
    /// `spec.initContainers[]`, `spec.containers[]` with `resources.{requests,limits}`.
    pub fn from_manifest(v: &Value) -> Result<Pod, InputError> {
        if let Some(kind) = v.get("kind").and_then(Value::as_str)
            && kind != "Pod"
        {
            return Err(InputError::field(
                "kind",
                format!("`{kind}` is not a Pod (give a Pod manifest)"),
            ));
        }
        let name = v
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or("pod")
            .to_string();
        let spec = v.get("spec").ok_or_else(|| {
            InputError::field("spec", "missing (expected a Pod with spec.containers)")
        })?;
        let init_containers = containers(spec, "initContainers", false)?;
        let containers = containers(spec, "containers", true)?;
        if containers.is_empty() {
            return Err(InputError::field(
                "spec.containers",
                "empty (a pod needs a container)",
            ));
        }
        Ok(Pod {
            name,
            init_containers,
            containers,
        })
    }

    /// A single-container pod from flags: device counts as limits; with `cpus` the pod is
    /// Guaranteed (requests = limits), which needs `memory` too.
    pub fn from_flags(
        devices: &[(String, u64)],
        cpus: Option<Quantity>,
        memory: Option<Quantity>,
    ) -> Result<Pod, InputError> {
        let mut limits = BTreeMap::new();
        for (name, count) in devices {
            if *count > 0 {
                let n = i64::try_from(*count)
                    .map_err(|_| InputError::field(name.clone(), "count too large"))?;
                limits.insert(name.clone(), Quantity::from_units(n));
            }
        }
        match (cpus, memory) {
            (Some(c), Some(m)) => {
                limits.insert(CPU.to_string(), c);
                limits.insert(MEMORY.to_string(), m);
            }
            (Some(_), None) => {
                return Err(InputError::field(
                    "--memory",
                    "required with --cpus: a Guaranteed pod sets both cpu and memory",
                ));
            }
            (None, Some(m)) => {
                limits.insert(MEMORY.to_string(), m);
            }
            (None, None) => {}
        }
        Ok(Pod {
            name: "pod".to_string(),
            init_containers: Vec::new(),
            containers: vec![Container::with_limits("main", limits)],
        })
    }
}

fn containers(spec: &Value, key: &str, required: bool) -> Result<Vec<Container>, InputError> {
    let path = format!("spec.{key}");
    let list = match spec.get(key) {
        None | Some(Value::Null) if !required => return Ok(Vec::new()),
        None | Some(Value::Null) => {
            return Err(InputError::field(
                path,
                "missing (expected a list of containers)",
            ));
        }
        Some(Value::Array(a)) => a,
        Some(_) => return Err(InputError::field(path, "expected a list of containers")),
    };
    let mut out = Vec::new();
    for (i, c) in list.iter().enumerate() {
        let at = format!("{path}[{i}]");
        let name = c
            .get("name")
            .and_then(Value::as_str)
            .ok_or_else(|| InputError::field(format!("{at}.name"), "missing (expected a string)"))?
            .to_string();
        let limits = quantities(
            c.pointer("/resources/limits"),
            &format!("{at}.resources.limits"),
        )?;
        let mut requests = quantities(
            c.pointer("/resources/requests"),
            &format!("{at}.resources.requests"),
        )?;
        for (k, v) in &limits {
            requests.entry(k.clone()).or_insert(*v);
        }
        for (k, v) in &requests {
            if is_native(k) {
                continue;
            }
            match limits.get(k) {
                None => {
                    return Err(InputError::field(
                        format!("{at}.resources.limits.{k}"),
                        "missing: an extended resource must set limits (equal to requests)",
                    ));
                }
                Some(l) if l != v => {
                    return Err(InputError::field(
                        format!("{at}.resources.requests.{k}"),
                        "must equal the limit (extended resources cannot be overcommitted)",
                    ));
                }
                Some(_) => {}
            }
        }
        let restartable = c.get("restartPolicy").and_then(Value::as_str) == Some("Always");
        out.push(Container {
            name,
            requests,
            limits,
            restartable,
        });
    }
    Ok(out)
}

fn quantities(v: Option<&Value>, path: &str) -> Result<BTreeMap<String, Quantity>, InputError> {
    let mut out = BTreeMap::new();
    let Some(v) = v else {
        return Ok(out);
    };
    let obj = match v {
        Value::Null => return Ok(out),
        Value::Object(o) => o,
        _ => {
            return Err(InputError::field(
                path,
                "expected a map of resource name to quantity",
            ));
        }
    };
    for (k, val) in obj {
        let q = Quantity::from_json(val)
            .map_err(|e| InputError::field(format!("{path}.{k}"), e.to_string()))?;
        out.insert(k.clone(), q);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(v: Value) -> Pod {
        Pod::from_manifest(&v).unwrap()
    }

    #[test]
    fn qos_classes() {
        let g = pod(json!({"spec": {"containers": [
            {"name": "a", "resources": {"limits": {"cpu": "2", "memory": "1Gi", "amd.com/gpu": 4}}}
        ]}}));
        assert_eq!(g.qos(), QosClass::Guaranteed, "requests default to limits");
        let b = pod(json!({"spec": {"containers": [
            {"name": "a", "resources": {"requests": {"cpu": "1"}, "limits": {"cpu": "2", "memory": "1Gi"}}}
        ]}}));
        assert_eq!(b.qos(), QosClass::Burstable);
        let e = pod(json!({"spec": {"containers": [
            {"name": "a", "resources": {"limits": {"amd.com/gpu": 4}}}
        ]}}));
        assert_eq!(e.qos(), QosClass::BestEffort);
        assert_eq!(e.extended_resources(), ["amd.com/gpu"]);
    }

    #[test]
    fn bad_quantity_names_the_field() {
        let err = Pod::from_manifest(&json!({"spec": {"containers": [
            {"name": "a", "resources": {"limits": {"memory": "64Gb"}}}
        ]}}))
        .unwrap_err()
        .to_string();
        assert!(
            err.contains("spec.containers[0].resources.limits.memory"),
            "{err}"
        );
        assert!(err.contains("64Gb"), "{err}");
    }

    #[test]
    fn pod_level_counts_init_containers_and_sidecars() {
        let p = pod(json!({"spec": {
        "initContainers": [
            {"name": "i", "resources": {"limits": {"x.io/d": 5}}},
            {"name": "s", "restartPolicy": "Always", "resources": {"limits": {"x.io/d": 1}}}
        ],
        "containers": [
            {"name": "a", "resources": {"limits": {"x.io/d": 2}}},
            {"name": "b", "resources": {"limits": {"x.io/d": 1}}}
        ]}}));
        assert_eq!(p.pod_level(|c| c.limit_value("x.io/d")), 5);
        let q = pod(json!({"spec": {
            "initContainers": [
                {"name": "s", "restartPolicy": "Always", "resources": {"limits": {"x.io/d": 3}}},
                {"name": "i", "resources": {"limits": {"x.io/d": 2}}}
            ],
            "containers": [{"name": "a", "resources": {"limits": {"x.io/d": 2}}}]}}));
        assert_eq!(q.pod_level(|c| c.limit_value("x.io/d")), 5);
    }
}
