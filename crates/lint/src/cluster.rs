//! What one object's rules need from the rest of the input (all documents of all files):
//! which claims and claim templates ask for topoalign's devices, and which nodes publish
//! topoalign's ResourceSlices, and each node's MIG devices (Node labels and allocatable,
//! NodeResourceTopology zones: `mig_sources`).

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;
use topoalign_dra::{
    DRIVER_NAME,
    claim::CPU_DRIVER,
    publish::{CLASS_GPU, CLASS_NIC, CLASS_PAIR},
};
use topoalign_mig::{DevicePluginError, NodeMig};

use crate::claim_rules::ClaimSpec;
use crate::mig_sources::{MigSources, MigView};

/// How a pod names a claim: `resourceClaimTemplateName` or `resourceClaimName`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum ClaimRef {
    /// A `ResourceClaimTemplate`.
    Template,
    /// A `ResourceClaim`.
    Claim,
}

impl ClaimRef {
    /// The kind of the object referred to.
    pub(crate) fn kind(self) -> &'static str {
        match self {
            ClaimRef::Template => "ResourceClaimTemplate",
            ClaimRef::Claim => "ResourceClaim",
        }
    }
}

/// A claim or template of the input that uses topoalign's DeviceClasses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct TopoalignClaim {
    /// Its namespace, when the manifest says.
    pub namespace: Option<String>,
    /// topoalign's classes its requests use (sub-requests included), in request order.
    pub classes: Vec<&'static str>,
}

impl TopoalignClaim {
    /// True when it can give NICs (pairs or plain NICs).
    pub(crate) fn gives_nics(&self) -> bool {
        self.classes
            .iter()
            .any(|c| *c == CLASS_NIC || *c == CLASS_PAIR)
    }
}

/// A claim or template of any driver, as the rules on CPUs read it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct DraClaim {
    /// Its namespace, when the manifest says.
    pub namespace: Option<String>,
    /// True when a request asks for GPUs (or GPU+NIC pairs, or MIG devices).
    pub gpus: bool,
    /// The first request that asks for CPUs (dra-driver-cpu), by index.
    pub cpus: Option<usize>,
}

/// The cross-object facts of an input.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Cluster {
    /// Claims and templates using topoalign's classes, by kind and name.
    pub claims: BTreeMap<(ClaimRef, String), Vec<TopoalignClaim>>,
    /// Nodes named by a ResourceSlice of topoalign's driver (`spec.nodeName`).
    pub driver_nodes: BTreeSet<String>,
    /// Claims and templates of any driver, by kind and name.
    pub dra_claims: BTreeMap<(ClaimRef, String), Vec<DraClaim>>,
    /// Extended resources the input's DeviceClasses back, with the class (besides
    /// topoalign's own names, which `resources::classify` knows).
    pub extended: BTreeMap<String, String>,
    /// Nodes named by a ResourceSlice of dra-driver-cpu (`dra.cpu`).
    pub cpu_driver_nodes: BTreeSet<String>,
    /// Nodes whose GFD labels or allocatable resources show MIG devices, by name, as read
    /// (a label that cannot be read is the error).
    pub mig_nodes: BTreeMap<String, Result<NodeMig, DevicePluginError>>,
    /// Nodes offering whole NVIDIA GPUs and no MIG.
    pub plain_gpu_nodes: BTreeSet<String>,
    /// The Nodes and NodeResourceTopologies the MIG state is read from.
    mig_sources: MigSources,
    /// Who publishes each PCI device, per node (`slice_rules`).
    pub published: crate::slice_rules::Published,
}

/// Whether a claim's namespace and a pod's are one: a namespace missing on either side
/// matches (both go to kubectl's current one).
fn same_namespace(claim: Option<&str>, pod: Option<&str>) -> bool {
    match (claim, pod) {
        (Some(a), Some(b)) => a == b,
        _ => true,
    }
}

/// topoalign's classes named in a claim spec, in order, each once.
fn classes_of(spec: &ClaimSpec) -> Vec<&'static str> {
    let mut out = Vec::new();
    for r in &spec.requests {
        for line in r.text.lines() {
            for class in [CLASS_GPU, CLASS_NIC, CLASS_PAIR] {
                if line == class && !out.contains(&class) {
                    out.push(class);
                }
            }
        }
    }
    out
}

impl Cluster {
    /// Records one object (a list's items are given one by one).
    pub(crate) fn add(&mut self, value: &Value) {
        let kind = value.get("kind").and_then(Value::as_str).unwrap_or("");
        let meta = value.get("metadata");
        let field = |v: Option<&Value>, k: &str| {
            v.and_then(|m| m.get(k))
                .and_then(Value::as_str)
                .map(str::to_string)
        };
        match kind {
            "ResourceClaimTemplate" | "ResourceClaim" => {
                let Some(name) = field(meta, "name") else {
                    return;
                };
                let api = value
                    .get("apiVersion")
                    .and_then(Value::as_str)
                    .unwrap_or("");
                let Some(spec) = ClaimSpec::read(kind, api, value).0 else {
                    return;
                };
                let by = if kind == "ResourceClaim" {
                    ClaimRef::Claim
                } else {
                    ClaimRef::Template
                };
                self.dra_claims
                    .entry((by, name.clone()))
                    .or_default()
                    .push(DraClaim {
                        namespace: field(meta, "namespace"),
                        gpus: spec.requests.iter().any(|r| r.gpu),
                        cpus: spec.requests.iter().find(|r| r.cpu).map(|r| r.index),
                    });
                let classes = classes_of(&spec);
                if classes.is_empty() {
                    return;
                }
                self.claims
                    .entry((by, name))
                    .or_default()
                    .push(TopoalignClaim {
                        namespace: field(meta, "namespace"),
                        classes,
                    });
            }
            "ResourceSlice" => {
                crate::slice_rules::record(&mut self.published, value);
                let spec = value.get("spec");
                let Some(node) = field(spec, "nodeName") else {
                    return;
                };
                match field(spec, "driver").as_deref() {
                    Some(DRIVER_NAME) => self.driver_nodes.insert(node),
                    Some(CPU_DRIVER) => self.cpu_driver_nodes.insert(node),
                    _ => false,
                };
            }
            "DeviceClass" => {
                let spec = value.get("spec");
                if let (Some(class), Some(resource)) =
                    (field(meta, "name"), field(spec, "extendedResourceName"))
                {
                    self.extended.insert(resource, class);
                }
            }
            _ => {
                if let Some(name) = self.mig_sources.add(kind, value) {
                    let mut view = MigView {
                        mig_nodes: std::mem::take(&mut self.mig_nodes),
                        plain_gpu_nodes: std::mem::take(&mut self.plain_gpu_nodes),
                    };
                    self.mig_sources.refresh(&name, &mut view);
                    self.mig_nodes = view.mig_nodes;
                    self.plain_gpu_nodes = view.plain_gpu_nodes;
                }
            }
        }
    }

    /// The claim of any driver a pod in `namespace` refers to, when the input holds it
    /// (namespaces match as in [`Cluster::claim`]).
    pub(crate) fn dra_claim(
        &self,
        by: ClaimRef,
        name: &str,
        namespace: Option<&str>,
    ) -> Option<&DraClaim> {
        (self.dra_claims.get(&(by, name.to_string()))?.iter())
            .find(|c| same_namespace(c.namespace.as_deref(), namespace))
    }

    /// The topoalign claim a pod in `namespace` refers to, when the input holds it. A
    /// namespace missing on either side matches (both go to kubectl's current one).
    pub(crate) fn claim(
        &self,
        by: ClaimRef,
        name: &str,
        namespace: Option<&str>,
    ) -> Option<&TopoalignClaim> {
        (self.claims.get(&(by, name.to_string()))?.iter())
            .find(|c| same_namespace(c.namespace.as_deref(), namespace))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn template(name: &str, ns: Option<&str>, class: &str) -> Value {
        let mut meta = json!({"name": name});
        if let Some(ns) = ns {
            meta["namespace"] = json!(ns);
        }
        json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate", "metadata": meta,
            "spec": {"spec": {"devices": {"requests": [
                {"name": "r", "firstAvailable": [{"name": "a", "deviceClassName": "other.example.com"},
                                                 {"name": "b", "deviceClassName": class}]}]}}}})
    }

    #[test]
    fn indexes_topoalign_claims_and_driver_nodes() {
        let mut c = Cluster::default();
        c.add(&template("pairs", Some("ml"), CLASS_PAIR));
        c.add(&template("other", None, "gpu.nvidia.com"));
        c.add(
            &json!({"apiVersion": "resource.k8s.io/v1beta1", "kind": "ResourceClaim",
            "metadata": {"name": "gpus"},
            "spec": {"devices": {"requests": [{"name": "g", "deviceClassName": CLASS_GPU}]}}}),
        );
        c.add(&json!({"kind": "ResourceSlice", "spec": {"driver": DRIVER_NAME, "nodeName": "n1"}}));
        c.add(&json!({"kind": "ResourceSlice", "spec": {"driver": "gpu.nvidia.com", "nodeName": "n2"}}));
        // Unreadable or nameless objects are skipped.
        c.add(&json!({"kind": "ResourceClaim", "spec": {"devices": 3}}));
        c.add(&json!({"kind": "ResourceSlice", "spec": []}));

        let pairs = c.claim(ClaimRef::Template, "pairs", Some("ml")).unwrap();
        assert_eq!(pairs.classes, [CLASS_PAIR]);
        assert!(pairs.gives_nics());
        assert!(c.claim(ClaimRef::Template, "pairs", None).is_some());
        assert!(
            c.claim(ClaimRef::Template, "pairs", Some("other"))
                .is_none()
        );
        assert!(c.claim(ClaimRef::Claim, "pairs", Some("ml")).is_none());
        assert!(c.claim(ClaimRef::Template, "other", None).is_none());
        let gpus = c.claim(ClaimRef::Claim, "gpus", Some("x")).unwrap();
        assert!(!gpus.gives_nics());
        assert_eq!(c.driver_nodes, BTreeSet::from(["n1".to_string()]));
    }
}
