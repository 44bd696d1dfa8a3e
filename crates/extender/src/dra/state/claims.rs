//! How the DRA state finds a pod's claims, the way the scheduler does: the claims it
//! names, and the claim the scheduler makes for extended resources a DeviceClass backs
//! (`limits: {topoalign.dev/gpu-nic-pair: 4}`, DRAExtendedResource). CPUs of
//! dra-driver-cpu beside topoalign's devices in one claim (`claims --cpus`) are judged
//! with them.

use std::collections::BTreeSet;
use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};

use k8s_openapi::api::core::v1::{PodResourceClaim, PodResourceClaimStatus};
use k8s_openapi::api::resource::v1::{
    DeviceClaim, DeviceRequest, ExactDeviceRequest, ResourceClaimSpec,
};
use serde_json::Value;
use topoalign_dra::{claim::CPU_DRIVER, publish::class_for_resource};

use super::{DraState, class_names, hash_json};
use crate::dra::verdict::{PodClaims, Resolved};

impl DraState {
    pub(super) fn is_ours(&self, class: &str) -> bool {
        self.ours
            .iter()
            .any(|c| c.metadata.name.as_deref() == Some(class))
    }

    /// A class of dra-driver-cpu's devices (its selector names the driver): judged with
    /// topoalign's classes in one claim.
    fn is_cpu(&self, class: &str) -> bool {
        let driver = format!("\"{CPU_DRIVER}\"");
        (self.classes.get(class))
            .and_then(|c| c.spec.as_ref()?.selectors.as_ref())
            .is_some_and(|sel| {
                (sel.iter())
                    .filter_map(|s| s.cel.as_ref())
                    .any(|c| c.expression.contains(&driver))
            })
    }

    /// The claim the scheduler makes for the extended resources of `pod` that a known
    /// DeviceClass backs: one request per resource, the pod's count (the largest of an
    /// init container's and the sum of the containers', as the scheduler counts);
    /// `None` when the pod asks for none.
    fn extended_claim(&self, pod: &Value) -> Option<ResourceClaimSpec> {
        let count = |c: &Value, resource: &str| -> i64 {
            let of = |p: &str| {
                c.pointer(p)
                    .and_then(|r| r.get(resource))
                    .and_then(Value::as_str)
                    .and_then(|q| q.parse::<i64>().ok())
            };
            of("/resources/limits")
                .or_else(|| of("/resources/requests"))
                .unwrap_or(0)
        };
        let list = |p: &str| {
            pod.pointer(p)
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default()
        };
        let (containers, inits) = (list("/spec/containers"), list("/spec/initContainers"));
        let mut names = BTreeSet::new();
        for c in containers.iter().chain(&inits) {
            for p in ["/resources/limits", "/resources/requests"] {
                if let Some(m) = c.pointer(p).and_then(Value::as_object) {
                    names.extend(m.keys().filter(|k| k.contains('/')).cloned());
                }
            }
        }
        let requests: Vec<DeviceRequest> = (names.iter())
            .filter_map(|r| {
                let class = class_for_resource(r, &self.all_classes)?;
                let sum: i64 = containers.iter().map(|c| count(c, r)).sum();
                let init = inits.iter().map(|c| count(c, r)).max().unwrap_or(0);
                let n = sum.max(init);
                (n > 0 && self.classes.contains_key(&class)).then(|| DeviceRequest {
                    name: format!("extended-{}", requests_name(r)),
                    exactly: Some(ExactDeviceRequest {
                        device_class_name: class,
                        count: Some(n),
                        allocation_mode: Some("ExactCount".into()),
                        ..Default::default()
                    }),
                    first_available: None,
                })
            })
            .collect();
        (!requests.is_empty()).then(|| ResourceClaimSpec {
            devices: Some(DeviceClaim {
                requests: Some(requests),
                ..Default::default()
            }),
        })
    }

    /// Finds the claims of `pod` (a decoded `v1.Pod`) as the scheduler does.
    pub fn resolve(&self, pod: &Value) -> PodClaims {
        let extended = self.extended_claim(pod);
        let empty = Value::Array(Vec::new());
        let list = match (pod.pointer("/spec/resourceClaims"), &extended) {
            (Some(l), _) => l,
            (None, Some(_)) => &empty,
            (None, None) => return PodClaims::NotOurs,
        };
        let podclaims: Vec<PodResourceClaim> = match serde_json::from_value(list.clone()) {
            Ok(v) => v,
            Err(e) => {
                return PodClaims::Unjudged(
                    "dra_bad_pod",
                    format!("Pod spec.resourceClaims: {e} (expected a list of PodResourceClaim)"),
                );
            }
        };
        if podclaims.is_empty() && extended.is_none() {
            return PodClaims::NotOurs;
        }
        let statuses: Vec<PodResourceClaimStatus> = pod
            .pointer("/status/resourceClaimStatuses")
            .and_then(|v| serde_json::from_value(v.clone()).ok())
            .unwrap_or_default();
        let text = |p: &str| pod.pointer(p).and_then(Value::as_str).unwrap_or("");
        let (ns, uid) = (text("/metadata/namespace"), text("/metadata/uid"));
        let mut resolved = Resolved {
            specs: Vec::new(),
            foreign: false,
            own: BTreeSet::new(),
            from_template: 0,
            hash: 0,
        };
        let mut unseen = Vec::new();
        let mut h = DefaultHasher::new();
        let named = podclaims.iter().map(Some);
        for pc in named.chain(extended.is_some().then_some(None)) {
            let Some(pc) = pc else {
                // The scheduler's claim for the extended resources (not created yet).
                let Some(spec) = extended.clone() else {
                    continue;
                };
                resolved.from_template += 1;
                let names = class_names(&spec);
                let ours = names.iter().filter(|n| self.is_ours(n)).count();
                resolved.foreign |= ours == 0;
                hash_json(&spec, &mut h);
                resolved.specs.push(spec);
                continue;
            };
            let spec = match (&pc.resource_claim_name, &pc.resource_claim_template_name) {
                (Some(name), _) => {
                    let key = (ns.to_string(), name.clone());
                    match self.claims.get(&key) {
                        Some(c) => {
                            resolved.own.insert(key);
                            c.spec.clone()
                        }
                        None => {
                            unseen.push(format!("claim {ns}/{name}"));
                            continue;
                        }
                    }
                }
                (None, Some(template)) => {
                    let generated = statuses.iter().find(|s| s.name == pc.name);
                    if let Some(PodResourceClaimStatus {
                        resource_claim_name: None,
                        ..
                    }) = generated
                    {
                        continue; // no claim needed
                    }
                    let key = generated
                        .and_then(|s| s.resource_claim_name.clone())
                        .map(|n| (ns.to_string(), n));
                    let claim = key.as_ref().and_then(|k| {
                        self.claims
                            .get(k)
                            .filter(|c| uid.is_empty() || c.owners.iter().any(|o| o == uid))
                    });
                    match (claim, key) {
                        (Some(c), Some(k)) => {
                            resolved.own.insert(k);
                            c.spec.clone()
                        }
                        _ => match self.templates.get(&(ns.to_string(), template.clone())) {
                            Some(Some(spec)) => {
                                resolved.from_template += 1;
                                spec.clone()
                            }
                            _ => {
                                unseen.push(format!("template {ns}/{template}"));
                                continue;
                            }
                        },
                    }
                }
                (None, None) => continue,
            };
            let names = class_names(&spec);
            let ours = names.iter().filter(|n| self.is_ours(n)).count();
            let cpus = names.iter().filter(|n| self.is_cpu(n)).count();
            let known = names
                .iter()
                .filter(|n| self.classes.contains_key(**n))
                .count();
            if known == 0 {
                continue; // no class the cluster has: not for any driver here
            }
            if known < names.len() {
                let missing: Vec<&str> = names
                    .iter()
                    .copied()
                    .filter(|n| !self.classes.contains_key(*n))
                    .collect();
                unseen.push(format!("DeviceClass {}", missing.join(", ")));
                continue;
            }
            if ours > 0 && ours + cpus < names.len() {
                return PodClaims::Unjudged(
                    "dra_mixed",
                    format!(
                        "claim {:?} mixes topoalign.dev classes with other classes ({})",
                        pc.name,
                        names.join(", ")
                    ),
                );
            }
            resolved.foreign |= ours == 0;
            hash_json(&spec, &mut h);
            resolved.specs.push(spec);
        }
        if !unseen.is_empty() {
            return PodClaims::Unjudged(
                "dra_claim_unseen",
                format!("not seen yet: {}", unseen.join(", ")),
            );
        }
        if resolved.specs.is_empty() {
            return PodClaims::NotOurs;
        }
        resolved.foreign.hash(&mut h);
        resolved.hash = h.finish();
        PodClaims::Judge(resolved)
    }
}

/// A request name from an extended resource name (`topoalign.dev/gpu-nic-pair` →
/// `topoalign-dev-gpu-nic-pair`): a DNS label.
fn requests_name(resource: &str) -> String {
    let s: String = (resource.chars())
        .map(|c| match c {
            'a'..='z' | '0'..='9' => c,
            'A'..='Z' => c.to_ascii_lowercase(),
            _ => '-',
        })
        .collect();
    s.trim_matches('-').chars().take(50).collect()
}
