//! A whole simulation case as one JSON document, so that the same case can be fed to
//! this simulator and, later, to a real kubelet:
//!
//! ```json
//! { "profile": "mi300x-8",
//!   "settings": { "topologyManagerPolicy": "restricted", "cpuManagerPolicy": "static", ... },
//!   "pod": { "apiVersion": "v1", "kind": "Pod", "spec": { "containers": [ ... ] } },
//!   "usage": { "gpus": ["0000:11:00.0"], "nics": [], "cpus": "0-7" },
//!   "resources": { "example.com/vf": "vfs:1" },
//!   "allocators": { "amd.com/gpu": "lowest-address" },
//!   "seed": 1 }
//! ```
//! `settings` is a `KubeletConfiguration` (unknown fields ignored); everything but
//! `pod` is optional.

use serde_json::Value;

use crate::error::InputError;
use crate::node::Usage;
use crate::pod::Pod;
use crate::resources::ResourceMap;
use crate::simulate::SimError;
use topoalign_kube_types::kubelet_settings::Settings;

/// A parsed case file.
#[derive(Debug, Clone)]
pub struct CaseFile {
    /// A built-in profile name for the node.
    pub profile: Option<String>,
    /// The kubelet settings.
    pub settings: Settings,
    /// The pod.
    pub pod: Pod,
    /// What is in use.
    pub usage: Usage,
    /// Resource map (defaults plus the case's rules and allocators).
    pub resources: ResourceMap,
    /// The seed.
    pub seed: u64,
}

const KEYS: [&str; 7] = [
    "profile",
    "settings",
    "pod",
    "usage",
    "resources",
    "allocators",
    "seed",
];

fn prefix(e: InputError, at: &str) -> InputError {
    match e {
        InputError::Field { field, reason } => InputError::Field {
            field: format!("{at}.{field}"),
            reason,
        },
        InputError::UnknownResource { field, name } => InputError::UnknownResource {
            field: format!("{at}.{field}"),
            name,
        },
    }
}

impl CaseFile {
    /// Reads a decoded case document.
    pub fn from_value(v: &Value) -> Result<CaseFile, SimError> {
        let obj = v
            .as_object()
            .ok_or_else(|| InputError::field("case", "expected a JSON object"))?;
        if let Some(k) = obj.keys().find(|k| !KEYS.contains(&k.as_str())) {
            return Err(InputError::field(
                k.clone(),
                format!("unknown field (expected one of {})", KEYS.join(", ")),
            )
            .into());
        }
        let profile = match obj.get("profile") {
            None | Some(Value::Null) => None,
            Some(Value::String(s)) => Some(s.clone()),
            Some(_) => return Err(InputError::field("profile", "expected a profile name").into()),
        };
        let settings = match obj.get("settings") {
            None | Some(Value::Null) => Settings::default(),
            Some(s) => Settings::from_kubelet_config(s)?,
        };
        let pod_v = obj
            .get("pod")
            .ok_or_else(|| InputError::field("pod", "missing (expected a Pod manifest)"))?;
        let pod = Pod::from_manifest(pod_v).map_err(|e| prefix(e, "pod"))?;
        let usage = match obj.get("usage") {
            None | Some(Value::Null) => Usage::default(),
            Some(u) => serde_json::from_value(u.clone())
                .map_err(|e| InputError::field("usage", e.to_string()))?,
        };
        let mut resources = ResourceMap::default();
        for (key, setter) in [("resources", true), ("allocators", false)] {
            match obj.get(key) {
                None | Some(Value::Null) => {}
                Some(Value::Object(m)) => {
                    for (name, kind) in m {
                        let field = format!("{key}.{name}");
                        let text = kind
                            .as_str()
                            .ok_or_else(|| InputError::field(field.clone(), "expected a string"))?;
                        let spec = format!("{name}={text}");
                        if setter {
                            resources.add_spec(&spec, &field)?;
                        } else {
                            resources.set_allocator_spec(&spec, &field)?;
                        }
                    }
                }
                Some(_) => {
                    return Err(InputError::field(
                        key,
                        "expected a map of resource name to string",
                    )
                    .into());
                }
            }
        }
        let seed = match obj.get("seed") {
            None | Some(Value::Null) => 0,
            Some(s) => s
                .as_u64()
                .ok_or_else(|| InputError::field("seed", "expected an unsigned integer"))?,
        };
        Ok(CaseFile {
            profile,
            settings,
            pod,
            usage,
            resources,
            seed,
        })
    }
}
