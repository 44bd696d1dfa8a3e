//! MIG in a device-plugin cluster: a node's MIG devices from its GPU Feature Discovery
//! labels and allocatable resources, a pod's MIG set from its resource requests, and
//! whether the set fits the node now or could fit any geometry of it.
//!
//! Facts (REFERENCE §11): the NVIDIA device plugin registers `nvidia.com/mig-<profile>`
//! under the `mixed` strategy and `nvidia.com/gpu` (one profile on the whole node) under
//! `single`; GFD labels `nvidia.com/mig.strategy`, `nvidia.com/mig-<profile>.count`,
//! `nvidia.com/mig.capable`, `nvidia.com/gpu.product`, `nvidia.com/gpu.count`. Under
//! `single` GFD appends `-MIG-<profile>` to the product. Resource names cannot hold `+`,
//! so a `1g.10gb+me` instance is `nvidia.com/mig-1g.10gb.me`; both spellings are read.

use std::collections::BTreeMap;

use crate::capacity::fits;
use crate::mix::Mix;
use crate::model::Model;
use crate::planner::{GeometryPlan, GeometryRequest, plan};
use crate::read_state::model_for_name;

/// The prefix of a MIG device resource (`nvidia.com/mig-3g.40gb`).
pub(crate) const MIG_RESOURCE_PREFIX: &str = "nvidia.com/mig-";
/// The whole-GPU resource (a MIG device of the node's one profile under `single`).
pub(crate) const GPU_RESOURCE: &str = "nvidia.com/gpu";
/// GFD: the device plugin's MIG strategy.
pub(crate) const LABEL_STRATEGY: &str = "nvidia.com/mig.strategy";
/// GFD: whether the GPUs can do MIG.
pub(crate) const LABEL_CAPABLE: &str = "nvidia.com/mig.capable";
/// GFD: the GPU product (`NVIDIA-H100-80GB-HBM3`, `…-MIG-1g.10gb` under `single`).
pub(crate) const LABEL_PRODUCT: &str = "nvidia.com/gpu.product";
/// GFD: the number of GPUs (MIG devices under `single`).
pub(crate) const LABEL_GPU_COUNT: &str = "nvidia.com/gpu.count";

/// How the device plugin publishes MIG devices.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Strategy {
    /// MIG devices are not published.
    None,
    /// Every GPU has the same profile, published as `nvidia.com/gpu`.
    Single,
    /// Each profile is its own resource, `nvidia.com/mig-<profile>`.
    Mixed,
}

/// A node's labels or a pod's MIG requests that cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DevicePluginError {
    /// A label whose value is not what GFD writes.
    #[error("label {label}={value:?}: expected {expected}")]
    BadLabel {
        /// The label key.
        label: String,
        /// Its value.
        value: String,
        /// What GFD writes there.
        expected: &'static str,
    },
    /// A profile the GPU model does not have.
    #[error(
        "{source_of_name}: unknown MIG profile `{profile}` for {model}: expected one of {known}"
    )]
    UnknownProfile {
        /// Where the name came from (the resource or label).
        source_of_name: String,
        /// The profile.
        profile: String,
        /// The model.
        model: String,
        /// The model's profiles.
        known: String,
    },
}

/// What a node lacks now for a pod's MIG set: each shortfall, `; `-joined.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}", .0.iter().map(ToString::to_string).collect::<Vec<_>>().join("; "))]
pub struct NotNow(pub Vec<Shortfall>);

/// One profile (or GPU count) a node lacks now for a pod's MIG set.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Shortfall {
    /// A MIG profile asked of a node whose device plugin uses the single strategy.
    #[error(
        "{count} × {}{profile} (the node's device plugin uses the single strategy: only {})",
        MIG_RESOURCE_PREFIX,
        GPU_RESOURCE
    )]
    SingleStrategy {
        /// The profile asked.
        profile: String,
        /// How many.
        count: u64,
    },
    /// More GPUs (instances of the single profile) than the node has.
    #[error("{gpus} × {} ({profile} instances), the node has {have}", GPU_RESOURCE)]
    SingleInstances {
        /// The node's single profile.
        profile: String,
        /// GPUs asked.
        gpus: u64,
        /// Instances the node has.
        have: u64,
    },
    /// More instances of a profile than the node has.
    #[error("{count} × {}{profile}, the node has {have}", MIG_RESOURCE_PREFIX)]
    Profile {
        /// The profile asked.
        profile: String,
        /// How many.
        count: u64,
        /// How many the node has.
        have: u64,
    },
}

/// The profile a resource or label name carries: `nvidia.com/mig-1g.10gb.me` →
/// `1g.10gb+me`; `None` for names that are not MIG resources.
pub fn profile_of_resource(name: &str) -> Option<String> {
    let rest = name.strip_prefix(MIG_RESOURCE_PREFIX)?;
    if rest.is_empty() {
        return None;
    }
    Some(match rest.strip_suffix(".me") {
        Some(base) => format!("{base}+me"),
        None => rest.to_string(),
    })
}

/// A pod's MIG set: instances per profile, and whole `nvidia.com/gpu` devices (MIG
/// devices on a `single` node).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MigRequest {
    /// `nvidia.com/mig-<profile>` counts by profile name.
    pub profiles: BTreeMap<String, u64>,
    /// `nvidia.com/gpu` count.
    pub gpus: u64,
}

impl MigRequest {
    /// The pod's requests summed over its containers (`(resource, count)` pairs; the
    /// caller sums app containers and takes init containers' maximum as the kubelet does).
    pub fn from_resources<'a>(resources: impl IntoIterator<Item = (&'a str, u64)>) -> Self {
        let mut out = MigRequest::default();
        for (name, n) in resources {
            if n == 0 {
                continue;
            }
            if let Some(p) = profile_of_resource(name) {
                let c = out.profiles.entry(p).or_default();
                *c = c.saturating_add(n);
            } else if name == GPU_RESOURCE {
                out.gpus = out.gpus.saturating_add(n);
            }
        }
        out
    }

    /// True when the pod asks a MIG profile by name.
    pub fn has_profiles(&self) -> bool {
        !self.profiles.is_empty()
    }

    /// `2 × nvidia.com/mig-2g.20gb, 1 × nvidia.com/mig-1g.10gb` style text.
    pub fn text(&self) -> String {
        let mut parts: Vec<String> = (self.profiles.iter())
            .map(|(p, c)| format!("{c} × {MIG_RESOURCE_PREFIX}{p}"))
            .collect();
        if self.gpus > 0 {
            parts.push(format!("{} × {GPU_RESOURCE}", self.gpus));
        }
        parts.join(", ")
    }

    /// The profiles as a [`Mix`] of `model`; the first profile it lacks is an error.
    pub fn mix(&self, model: &Model) -> Result<Mix, DevicePluginError> {
        let mut mix = Mix::default();
        for (p, &c) in &self.profiles {
            let shape = model
                .shape(p)
                .ok_or_else(|| unknown(model, p, format!("{MIG_RESOURCE_PREFIX}{p}")))?;
            mix[shape] = u32::try_from(c).unwrap_or(u32::MAX);
        }
        Ok(mix)
    }
}

pub(crate) fn unknown(model: &Model, profile: &str, source_of_name: String) -> DevicePluginError {
    DevicePluginError::UnknownProfile {
        source_of_name,
        profile: profile.to_string(),
        model: model.name.to_string(),
        known: model.profile_names().join(", "),
    }
}

/// A node's MIG devices as the device plugin and GFD describe them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeMig {
    /// `nvidia.com/mig.strategy`, when labelled.
    pub strategy: Option<Strategy>,
    /// `nvidia.com/mig.capable`, when labelled.
    pub capable: Option<bool>,
    /// `nvidia.com/gpu.product`, when labelled.
    pub product: Option<String>,
    /// The model of that product, when it has a profile table here.
    pub model: Option<&'static Model>,
    /// Under `single`: the one profile (from the product's `-MIG-<profile>` suffix).
    pub single_profile: Option<String>,
    /// Physical GPUs (`nvidia.com/gpu.count` unless the strategy is `single`).
    pub gpus: Option<u32>,
    /// MIG devices offered now, by profile (allocatable `nvidia.com/mig-*`, else the GFD
    /// counts); under `single` the one profile's count is allocatable `nvidia.com/gpu`.
    pub instances: BTreeMap<String, u64>,
}

/// Whether a pod's MIG set could ever fit a node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ever {
    /// Some geometry of the node holds it: the planner's geometry (when the model and GPU
    /// count are known).
    Yes(Option<Box<GeometryPlan>>),
    /// No geometry of the node holds it: why.
    No(String),
    /// The labels do not say enough to judge.
    Unknown,
}

fn parse_u<T: std::str::FromStr>(label: &str, value: &str) -> Result<T, DevicePluginError> {
    value
        .trim()
        .parse()
        .map_err(|_| DevicePluginError::BadLabel {
            label: label.to_string(),
            value: value.to_string(),
            expected: "a non-negative integer",
        })
}

impl NodeMig {
    /// Reads a Node object (decoded JSON or YAML): its `metadata.labels` and
    /// `status.allocatable`, each allocatable amount read as an exact Kubernetes quantity
    /// that must be a whole number (`"7"`, `7`, `1k`; others are skipped). `None`: the
    /// node shows no MIG; the error names the label that cannot be read. The one reader
    /// of a Node's MIG state for lint and the extender.
    pub fn from_node(node: &serde_json::Value) -> Option<Result<NodeMig, DevicePluginError>> {
        use serde_json::Value;
        let labels: Vec<(&str, &str)> = node
            .pointer("/metadata/labels")
            .and_then(Value::as_object)
            .map(|m| {
                m.iter()
                    .filter_map(|(k, v)| v.as_str().map(|v| (k.as_str(), v)))
                    .collect()
            })
            .unwrap_or_default();
        let allocatable: Vec<(&str, u64)> = node
            .pointer("/status/allocatable")
            .and_then(Value::as_object)
            .map(|m| {
                m.iter()
                    .filter_map(|(k, v)| {
                        let q = topoalign_kube_types::Quantity::from_json(v).ok()?;
                        Some((k.as_str(), q.whole_units()?))
                    })
                    .collect()
            })
            .unwrap_or_default();
        NodeMig::read(labels, allocatable).transpose()
    }

    /// Reads a node's MIG state from its labels and allocatable counts (quantities already
    /// read as integers). `Ok(None)`: the node shows no MIG (no strategy label, no
    /// `nvidia.com/mig-*` label or resource), and is judged as any other node.
    pub fn read<'a>(
        labels: impl IntoIterator<Item = (&'a str, &'a str)>,
        allocatable: impl IntoIterator<Item = (&'a str, u64)>,
    ) -> Result<Option<NodeMig>, DevicePluginError> {
        let mut node = NodeMig {
            strategy: None,
            capable: None,
            product: None,
            model: None,
            single_profile: None,
            gpus: None,
            instances: BTreeMap::new(),
        };
        let mut label_counts: Vec<(String, String, u64)> = Vec::new();
        let mut gpu_count = None;
        for (k, v) in labels {
            match k {
                LABEL_STRATEGY => {
                    node.strategy = Some(match v.trim() {
                        "none" => Strategy::None,
                        "single" => Strategy::Single,
                        "mixed" => Strategy::Mixed,
                        _ => {
                            return Err(DevicePluginError::BadLabel {
                                label: k.to_string(),
                                value: v.to_string(),
                                expected: "single, mixed or none",
                            });
                        }
                    })
                }
                LABEL_CAPABLE => {
                    node.capable = Some(match v.trim() {
                        "true" => true,
                        "false" => false,
                        _ => {
                            return Err(DevicePluginError::BadLabel {
                                label: k.to_string(),
                                value: v.to_string(),
                                expected: "true or false",
                            });
                        }
                    })
                }
                LABEL_PRODUCT => node.product = Some(v.to_string()),
                LABEL_GPU_COUNT => gpu_count = Some(parse_u::<u32>(k, v)?),
                _ => {
                    let profile = k.strip_suffix(".count").and_then(profile_of_resource);
                    if let Some(p) = profile {
                        label_counts.push((k.to_string(), p, parse_u::<u64>(k, v)?));
                    }
                }
            }
        }
        let mut alloc_mig: BTreeMap<String, u64> = BTreeMap::new();
        let mut alloc_gpu = None;
        for (k, n) in allocatable {
            if let Some(p) = profile_of_resource(k) {
                alloc_mig.insert(p, n);
            } else if k == GPU_RESOURCE {
                alloc_gpu = Some(n);
            }
        }
        if let Some(product) = &node.product {
            let (base, single) = match product.split_once("-MIG-") {
                Some((b, p)) => (b, Some(p.to_string())),
                None => (product.as_str(), None),
            };
            node.model = model_for_name(base);
            node.single_profile = single;
        }
        let shows_mig = node.strategy.is_some_and(|s| s != Strategy::None)
            || !label_counts.is_empty()
            || !alloc_mig.is_empty();
        if !shows_mig {
            return Ok(None);
        }
        if let Some(model) = node.model {
            for (label, p, _) in &label_counts {
                if model.shape(p).is_none() {
                    return Err(unknown(model, p, format!("label {label}")));
                }
            }
            if let Some(p) = &node.single_profile
                && model.shape(p).is_none()
            {
                return Err(unknown(model, p, format!("label {LABEL_PRODUCT}")));
            }
        }
        if node.strategy == Some(Strategy::Single) {
            if let Some(p) = node.single_profile.clone() {
                let n = alloc_gpu.or(gpu_count.map(u64::from)).unwrap_or(0);
                node.instances.insert(p, n);
            }
        } else {
            node.gpus = gpu_count;
            node.instances = if alloc_mig.is_empty() {
                label_counts.into_iter().map(|(_, p, n)| (p, n)).collect()
            } else {
                alloc_mig
            };
        }
        Ok(Some(node))
    }

    /// `Ok(())` when the node offers the pod's MIG set now, else what is short (each
    /// profile and count).
    pub fn fits_now(&self, req: &MigRequest) -> Result<(), NotNow> {
        let mut short = Vec::new();
        if self.strategy == Some(Strategy::Single) {
            for (p, &c) in &req.profiles {
                short.push(Shortfall::SingleStrategy {
                    profile: p.clone(),
                    count: c,
                });
            }
            if let Some(p) = &self.single_profile {
                let have = self.instances.get(p).copied().unwrap_or(0);
                if req.gpus > have {
                    short.push(Shortfall::SingleInstances {
                        profile: p.clone(),
                        gpus: req.gpus,
                        have,
                    });
                }
            }
        } else {
            for (p, &c) in &req.profiles {
                let have = self.instances.get(p).copied().unwrap_or(0);
                if c > have {
                    short.push(Shortfall::Profile {
                        profile: p.clone(),
                        count: c,
                        have,
                    });
                }
            }
        }
        if short.is_empty() {
            Ok(())
        } else {
            Err(NotNow(short))
        }
    }

    /// Whether any geometry of the node could hold the pod's MIG set: the planner on the
    /// node's model and GPU count when both are known (an unknown profile is an error);
    /// else what the node offers now.
    pub fn ever(&self, req: &MigRequest) -> Result<Ever, DevicePluginError> {
        if self.strategy != Some(Strategy::Single)
            && let (Some(model), Some(gpus)) = (self.model, self.gpus.filter(|g| *g > 0))
        {
            return ever_on(model, gpus, req);
        }
        if let Some(model) = self.model {
            req.mix(model)?;
        }
        Ok(match self.fits_now(req) {
            Ok(()) => Ever::Yes(None),
            Err(_) if self.strategy == Some(Strategy::Single) => Ever::No(format!(
                "the node is in single strategy with {}",
                self.offer()
            )),
            Err(_) => Ever::Unknown,
        })
    }

    /// What the node offers now, as text.
    pub fn offer(&self) -> String {
        if self.instances.is_empty() {
            return "no MIG devices".to_string();
        }
        let parts: Vec<String> = (self.instances.iter())
            .map(|(p, c)| format!("{c} × {p}"))
            .collect();
        parts.join(", ")
    }
}

/// Whether some geometry of `gpus` GPUs of `model` holds the pod's profiles; with the
/// planner's geometry when it does.
pub(crate) fn ever_on(
    model: &'static Model,
    gpus: u32,
    req: &MigRequest,
) -> Result<Ever, DevicePluginError> {
    let want = req.mix(model)?;
    if want.is_empty() {
        return Ok(Ever::Yes(None));
    }
    if !fits(&want, u64::from(gpus)) {
        return Ok(Ever::No(format!(
            "no geometry of {gpus} × {model} holds {}",
            want.named(model).text()
        )));
    }
    let geometry = plan(&GeometryRequest {
        model,
        gpus,
        nodes: None,
        want,
    })
    .ok()
    .map(Box::new);
    Ok(Ever::Yes(geometry))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(
        labels: &[(&str, &str)],
        alloc: &[(&str, u64)],
    ) -> Result<Option<NodeMig>, DevicePluginError> {
        NodeMig::read(labels.iter().copied(), alloc.iter().copied())
    }

    fn req(r: &[(&str, u64)]) -> MigRequest {
        MigRequest::from_resources(r.iter().copied())
    }

    const MIXED_H100: [(&str, &str); 5] = [
        (LABEL_STRATEGY, "mixed"),
        (LABEL_PRODUCT, "NVIDIA-H100-80GB-HBM3"),
        (LABEL_GPU_COUNT, "2"),
        ("nvidia.com/mig-3g.40gb.count", "2"),
        ("nvidia.com/mig-1g.10gb.count", "4"),
    ];

    #[test]
    fn reads_a_mixed_node_and_judges_now_and_ever() {
        let n = node(&MIXED_H100, &[]).unwrap().unwrap();
        assert_eq!(n.model.map(|m| m.name), Some("h100-80gb"));
        assert_eq!(n.gpus, Some(2));
        assert_eq!(n.instances.get("3g.40gb"), Some(&2));
        let r = req(&[
            ("nvidia.com/mig-3g.40gb", 1),
            ("nvidia.com/mig-1g.10gb", 2),
            ("cpu", 4),
        ]);
        assert_eq!(n.fits_now(&r), Ok(()));
        // Summed over containers.
        let r = req(&[("nvidia.com/mig-3g.40gb", 2), ("nvidia.com/mig-3g.40gb", 1)]);
        assert_eq!(r.profiles.get("3g.40gb"), Some(&3));
        let e = n.fits_now(&r).unwrap_err().to_string();
        assert!(
            e.contains("3 × nvidia.com/mig-3g.40gb, the node has 2"),
            "{e}"
        );
        // Three 3g fit a re-partitioned pair of GPUs (3g@0, 3g@4 on each).
        let Ever::Yes(Some(plan)) = n.ever(&r).unwrap() else {
            panic!("expected a geometry")
        };
        assert!(plan.complete());
        // Five 3g never do.
        let r = req(&[("nvidia.com/mig-3g.40gb", 5)]);
        let Ever::No(why) = n.ever(&r).unwrap() else {
            panic!("expected never")
        };
        assert!(
            why.contains("5 × 3g.40gb") && why.contains("2 × h100-80gb"),
            "{why}"
        );
    }

    #[test]
    fn allocatable_wins_over_labels_and_me_names_are_read() {
        let n = node(
            &MIXED_H100,
            &[
                ("nvidia.com/mig-3g.40gb", 1),
                ("nvidia.com/mig-1g.10gb.me", 1),
            ],
        )
        .unwrap()
        .unwrap();
        assert_eq!(n.instances.get("3g.40gb"), Some(&1));
        assert_eq!(n.instances.get("1g.10gb+me"), Some(&1));
        assert!(n.fits_now(&req(&[("nvidia.com/mig-3g.40gb", 2)])).is_err());
        assert_eq!(
            n.fits_now(&req(&[("nvidia.com/mig-1g.10gb.me", 1)])),
            Ok(())
        );
    }

    #[test]
    fn single_strategy_serves_nvidia_gpu_as_its_one_profile() {
        let labels = [
            (LABEL_STRATEGY, "single"),
            (LABEL_PRODUCT, "NVIDIA-A100-SXM4-40GB-MIG-1g.5gb"),
            (LABEL_GPU_COUNT, "7"),
        ];
        let n = node(&labels, &[("nvidia.com/gpu", 7)]).unwrap().unwrap();
        assert_eq!(n.single_profile.as_deref(), Some("1g.5gb"));
        assert_eq!(n.gpus, None);
        assert_eq!(n.fits_now(&req(&[("nvidia.com/gpu", 3)])), Ok(()));
        let e = n
            .fits_now(&req(&[("nvidia.com/gpu", 8)]))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("8 × nvidia.com/gpu (1g.5gb instances), the node has 7"),
            "{e}"
        );
        let e = n
            .fits_now(&req(&[("nvidia.com/mig-1g.5gb", 1)]))
            .unwrap_err()
            .to_string();
        assert!(e.contains("single strategy"), "{e}");
        assert!(matches!(
            n.ever(&req(&[("nvidia.com/mig-1g.5gb", 1)])),
            Ok(Ever::No(_))
        ));
    }

    #[test]
    fn bad_labels_and_unknown_profiles_are_named() {
        let e = node(&[(LABEL_STRATEGY, "both")], &[])
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("nvidia.com/mig.strategy") && e.contains("single, mixed or none"),
            "{e}"
        );
        let e = node(
            &[(LABEL_STRATEGY, "mixed"), (LABEL_GPU_COUNT, "eight")],
            &[],
        );
        assert!(
            e.unwrap_err()
                .to_string()
                .contains("label nvidia.com/gpu.count=\"eight\"")
        );
        let e = node(&[("nvidia.com/mig-1g.10gb.count", "-1")], &[]).unwrap_err();
        assert!(
            e.to_string().contains("nvidia.com/mig-1g.10gb.count"),
            "{e}"
        );
        let e = node(&[(LABEL_CAPABLE, "yes"), (LABEL_STRATEGY, "mixed")], &[]).unwrap_err();
        assert!(e.to_string().contains("true or false"));
        // A label profile the model lacks.
        let labels = [
            (LABEL_STRATEGY, "mixed"),
            (LABEL_PRODUCT, "NVIDIA-A100-SXM4-40GB"),
            ("nvidia.com/mig-3g.40gb.count", "1"),
        ];
        let e = node(&labels, &[]).unwrap_err().to_string();
        assert!(
            e.contains("unknown MIG profile `3g.40gb` for a100-40gb") && e.contains("3g.20gb"),
            "{e}"
        );
        // A pod profile the model lacks.
        let n = node(&MIXED_H100, &[]).unwrap().unwrap();
        let e = n
            .ever(&req(&[("nvidia.com/mig-2g.45gb", 1)]))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("nvidia.com/mig-2g.45gb") && e.contains("2g.20gb"),
            "{e}"
        );
        // Other GFD labels of a profile (`.memory`) are not counts.
        let labels = [
            (LABEL_STRATEGY, "mixed"),
            ("nvidia.com/mig-1g.10gb.memory", "9984"),
        ];
        assert!(node(&labels, &[]).unwrap().unwrap().instances.is_empty());
    }

    #[test]
    fn nodes_without_mig_are_none() {
        assert_eq!(node(&[], &[("nvidia.com/gpu", 8)]), Ok(None));
        assert_eq!(
            node(&[(LABEL_STRATEGY, "none"), (LABEL_GPU_COUNT, "8")], &[]),
            Ok(None)
        );
        assert_eq!(profile_of_resource("nvidia.com/mig-"), None);
        assert_eq!(profile_of_resource("nvidia.com/gpu"), None);
    }

    #[test]
    fn unknown_model_judges_by_what_is_offered() {
        let labels = [
            (LABEL_STRATEGY, "mixed"),
            ("nvidia.com/mig-1g.12gb.count", "2"),
        ];
        let n = node(&labels, &[]).unwrap().unwrap();
        assert_eq!(
            n.ever(&req(&[("nvidia.com/mig-1g.12gb", 2)])),
            Ok(Ever::Yes(None))
        );
        assert_eq!(
            n.ever(&req(&[("nvidia.com/mig-1g.12gb", 3)])),
            Ok(Ever::Unknown)
        );
    }
}
