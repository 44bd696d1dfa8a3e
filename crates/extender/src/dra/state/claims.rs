//! How the DRA state finds a pod's claims, the way the scheduler does.

use std::collections::BTreeSet;
use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};

use k8s_openapi::api::core::v1::{PodResourceClaim, PodResourceClaimStatus};
use serde_json::Value;

use super::{DraState, class_names, hash_json};
use crate::dra::verdict::{PodClaims, Resolved};

impl DraState {
    fn is_ours(&self, class: &str) -> bool {
        self.ours
            .iter()
            .any(|c| c.metadata.name.as_deref() == Some(class))
    }

    /// Finds the claims of `pod` (a decoded `v1.Pod`) as the scheduler does.
    pub fn resolve(&self, pod: &Value) -> PodClaims {
        let Some(list) = pod.pointer("/spec/resourceClaims") else {
            return PodClaims::NotOurs;
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
        if podclaims.is_empty() {
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
        for pc in &podclaims {
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
            if ours > 0 && ours < names.len() {
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
