//! What the gang admission check reads of a Kueue `Workload` (`kueue.x-k8s.io/v1beta2`)
//! and the check state it writes back: the pod sets (count, pod template, topology
//! request), whether quota is reserved, the nodes Kueue's topology-aware scheduling
//! assigned, and the `status.admissionChecks` entries.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use topoalign_kube_types::kueue::{EVICTED, FINISHED, QUOTA_RESERVED};

/// The Kueue pod-template annotation naming the domain label all pods must share.
pub(crate) const REQUIRED_TOPOLOGY: &str = "kueue.x-k8s.io/podset-required-topology";
/// The Kueue pod-template annotation naming the domain label the pods should share.
pub(crate) const PREFERRED_TOPOLOGY: &str = "kueue.x-k8s.io/podset-preferred-topology";
/// The label of a node's name, the lowest level of a Kueue `Topology`.
pub(crate) const HOSTNAME: &str = "kubernetes.io/hostname";

/// The parts of a Workload the check reads.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Workload {
    /// Name and namespace.
    #[serde(default)]
    pub metadata: Meta,
    /// The pod sets.
    #[serde(default)]
    pub spec: WorkloadSpec,
    /// Admission, conditions and checks.
    #[serde(default)]
    pub status: WorkloadStatus,
}

/// Object metadata the check needs.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Meta {
    /// Name.
    #[serde(default)]
    pub name: String,
    /// Namespace.
    #[serde(default)]
    pub namespace: String,
    /// The version the status patch is made against.
    #[serde(default)]
    pub resource_version: Option<String>,
}

/// `spec` of a Workload.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WorkloadSpec {
    /// The pod sets (one for an indexed Job).
    #[serde(default)]
    pub pod_sets: Vec<PodSet>,
    /// `false` when the workload is deactivated.
    #[serde(default)]
    pub active: Option<bool>,
}

/// One pod set: `count` pods of one template.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PodSet {
    /// The pod set's name (podSetUpdates name it).
    pub name: String,
    /// How many pods.
    #[serde(default)]
    pub count: u32,
    /// The pod template (`metadata`, `spec`).
    #[serde(default)]
    pub template: Value,
    /// The topology request Kueue derived from the template's annotations.
    #[serde(default)]
    pub topology_request: Option<TopologyRequest>,
}

/// `podSets[].topologyRequest`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TopologyRequest {
    /// The label every pod's node must share.
    #[serde(default)]
    pub required: Option<String>,
    /// The label the pods' nodes should share.
    #[serde(default)]
    pub preferred: Option<String>,
}

/// `status` of a Workload.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WorkloadStatus {
    /// The conditions (`QuotaReserved`, `Admitted`, `Finished` …).
    #[serde(default)]
    pub conditions: Vec<Condition>,
    /// The admission: flavors and topology assignments per pod set.
    #[serde(default)]
    pub admission: Option<Admission>,
    /// One state per admission check of the workload's ClusterQueue.
    #[serde(default)]
    pub admission_checks: Vec<CheckState>,
}

/// A condition.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct Condition {
    /// Its type.
    #[serde(rename = "type")]
    pub type_: String,
    /// `True`, `False` or `Unknown`.
    pub status: String,
}

/// `status.admission`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Admission {
    /// Per pod set.
    #[serde(default)]
    pub pod_set_assignments: Vec<PodSetAssignment>,
}

/// `status.admission.podSetAssignments[]`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PodSetAssignment {
    /// The pod set.
    pub name: String,
    /// Where topology-aware scheduling put its pods.
    #[serde(default)]
    pub topology_assignment: Option<TopologyAssignment>,
}

/// `topologyAssignment` (v1beta2): the levels, then slices of domains whose values per
/// level are either one value for all (`universal`) or prefix + root + suffix per domain
/// (`individual`), with pod counts likewise.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TopologyAssignment {
    /// The level labels, highest first.
    #[serde(default)]
    pub levels: Vec<String>,
    /// The domain slices.
    #[serde(default)]
    pub slices: Vec<AssignmentSlice>,
}

/// One slice of a topology assignment.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AssignmentSlice {
    /// Domains in the slice.
    #[serde(default)]
    pub domain_count: u32,
    /// Per level, the domains' values.
    #[serde(default)]
    pub values_per_level: Vec<LevelValues>,
    /// Pods per domain.
    #[serde(default)]
    pub pod_counts: PodCounts,
}

/// The values of one level in a slice.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LevelValues {
    /// One value for every domain of the slice.
    #[serde(default)]
    pub universal: Option<String>,
    /// One value per domain.
    #[serde(default)]
    pub individual: Option<IndividualValues>,
}

/// Per-domain values: `prefix + root + suffix`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct IndividualValues {
    /// Common prefix.
    #[serde(default)]
    pub prefix: Option<String>,
    /// Common suffix.
    #[serde(default)]
    pub suffix: Option<String>,
    /// One root per domain.
    #[serde(default)]
    pub roots: Vec<String>,
}

/// Pods per domain of a slice.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PodCounts {
    /// The same count for every domain.
    #[serde(default)]
    pub universal: Option<u32>,
    /// One count per domain.
    #[serde(default)]
    pub individual: Vec<u32>,
}

/// The state of one admission check on a workload (`status.admissionChecks[]`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CheckState {
    /// The AdmissionCheck's name.
    pub name: String,
    /// `Pending`, `Ready`, `Retry` or `Rejected`.
    #[serde(default)]
    pub state: String,
    /// Why, in words.
    #[serde(default)]
    pub message: String,
    /// When the state last changed (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_transition_time: Option<String>,
    /// With `Retry`: seconds before Kueue requeues the evicted workload.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requeue_after_seconds: Option<u32>,
    /// Kept as Kueue counts it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_count: Option<u32>,
    /// With `Ready`: what Kueue merges into the pod sets (here a node selector on the
    /// chosen domain).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pod_set_updates: Vec<PodSetUpdate>,
}

/// `podSetUpdates[]`: labels, annotations, node selector and tolerations merged into
/// a pod set (only the node selector is written here).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PodSetUpdate {
    /// The pod set.
    pub name: String,
    /// Node labels the pods must have.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub node_selector: BTreeMap<String, String>,
    /// Kept as read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub labels: Option<Value>,
    /// Kept as read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub annotations: Option<Value>,
    /// Kept as read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tolerations: Option<Value>,
}

impl Workload {
    fn condition(&self, type_: &str) -> bool {
        self.status
            .conditions
            .iter()
            .any(|c| c.type_ == type_ && c.status == "True")
    }

    /// Whether Kueue has reserved quota (and, with TAS, assigned the nodes).
    pub fn quota_reserved(&self) -> bool {
        self.condition(QUOTA_RESERVED) && self.status.admission.is_some()
    }

    /// Whether Kueue is evicting the workload (its quota may still be reserved).
    pub fn evicted(&self) -> bool {
        self.condition(EVICTED)
    }

    /// Whether the workload still wants admission: active and not finished.
    pub fn live(&self) -> bool {
        self.spec.active != Some(false) && !self.condition(FINISHED)
    }

    /// The state of check `name`, if the workload's ClusterQueue has it.
    pub fn check(&self, name: &str) -> Option<&CheckState> {
        self.status.admission_checks.iter().find(|c| c.name == name)
    }

    /// The pod as the DRA wing resolves its claims: the pod set's template with the
    /// workload's namespace.
    pub fn pod_of(&self, ps: &PodSet) -> Value {
        let mut pod = ps.template.clone();
        if let Some(o) = pod.as_object_mut() {
            let meta = o
                .entry("metadata")
                .or_insert_with(|| Value::Object(Default::default()));
            if let Some(m) = meta.as_object_mut() {
                m.insert(
                    "namespace".into(),
                    Value::String(self.metadata.namespace.clone()),
                );
            }
        }
        pod
    }

    /// The nodes Kueue's topology-aware scheduling assigned to pod set `ps`, with their
    /// pod counts, when its lowest level is the node name (`None` without a topology
    /// assignment, or when it cannot be read).
    pub fn assigned_nodes(&self, ps: &str) -> Option<Vec<(String, u32)>> {
        let a = self
            .status
            .admission
            .as_ref()?
            .pod_set_assignments
            .iter()
            .find(|a| a.name == ps)?
            .topology_assignment
            .as_ref()?;
        if a.levels.last().map(String::as_str) != Some(HOSTNAME) {
            return None;
        }
        let last = a.levels.len() - 1;
        let mut out = Vec::new();
        for s in &a.slices {
            let values = s.values_per_level.get(last)?;
            for i in 0..s.domain_count as usize {
                let node = match (&values.universal, &values.individual) {
                    (Some(u), _) => u.clone(),
                    (None, Some(ind)) => format!(
                        "{}{}{}",
                        ind.prefix.as_deref().unwrap_or(""),
                        ind.roots.get(i)?,
                        ind.suffix.as_deref().unwrap_or("")
                    ),
                    (None, None) => return None,
                };
                let pods = match s.pod_counts.universal {
                    Some(u) => u,
                    None => *s.pod_counts.individual.get(i)?,
                };
                out.push((node, pods));
            }
        }
        Some(out)
    }
}

impl PodSet {
    /// The label whose value the pod set's nodes must (or should) share: the topology
    /// request, else the template's Kueue annotations.
    pub fn domain_key(&self) -> Option<String> {
        let requested = self.topology_request.as_ref();
        if let Some(k) = requested.and_then(|r| r.required.as_ref().or(r.preferred.as_ref())) {
            return Some(k.clone());
        }
        let ann = self.template.pointer("/metadata/annotations")?;
        [REQUIRED_TOPOLOGY, PREFERRED_TOPOLOGY]
            .iter()
            .find_map(|k| ann.get(*k).and_then(Value::as_str).map(String::from))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use serde_json::json;

    use super::*;

    #[test]
    fn the_assigned_nodes_are_read_from_universal_and_individual_values() {
        let w: Workload = serde_json::from_value(json!({
            "metadata": {"name": "w", "namespace": "ns"},
            "spec": {"podSets": [{"name": "main", "count": 3, "template": {"spec": {}}}]},
            "status": {
                "conditions": [{"type": "QuotaReserved", "status": "True"}],
                "admission": {"podSetAssignments": [{"name": "main", "topologyAssignment": {
                    "levels": ["nvidia.com/gpu.clique", "kubernetes.io/hostname"],
                    "slices": [
                        {"domainCount": 2,
                         "valuesPerLevel": [{"universal": "rack-x"},
                                            {"individual": {"prefix": "rack-x-", "roots": ["0", "2"]}}],
                         "podCounts": {"universal": 1}},
                        {"domainCount": 1,
                         "valuesPerLevel": [{"universal": "rack-x"}, {"universal": "rack-x-1"}],
                         "podCounts": {"individual": [2]}}]}}]},
            },
        }))
        .unwrap();
        assert!(w.quota_reserved() && w.live());
        assert_eq!(
            w.assigned_nodes("main").unwrap(),
            vec![
                ("rack-x-0".to_string(), 1),
                ("rack-x-2".to_string(), 1),
                ("rack-x-1".to_string(), 2)
            ]
        );
        assert_eq!(w.assigned_nodes("other"), None);
        assert_eq!(w.pod_of(&w.spec.pod_sets[0])["metadata"]["namespace"], "ns");
    }

    #[test]
    fn an_assignment_whose_lowest_level_is_not_the_node_is_not_read() {
        let w: Workload = serde_json::from_value(json!({
            "status": {"admission": {"podSetAssignments": [{"name": "main", "topologyAssignment": {
                "levels": ["rack"], "slices": [{"domainCount": 1,
                "valuesPerLevel": [{"universal": "r"}], "podCounts": {"universal": 3}}]}}]}},
        }))
        .unwrap();
        assert!(!w.quota_reserved());
        assert_eq!(w.assigned_nodes("main"), None);
    }

    #[test]
    fn the_domain_key_comes_from_the_request_or_the_annotations() {
        let ps: PodSet = serde_json::from_value(json!({"name": "main", "count": 1,
            "template": {"metadata": {"annotations": {PREFERRED_TOPOLOGY: "rack"}}}}))
        .unwrap();
        assert_eq!(ps.domain_key().as_deref(), Some("rack"));
        let ps: PodSet = serde_json::from_value(json!({"name": "main", "count": 1,
            "topologyRequest": {"required": "clique"},
            "template": {"metadata": {"annotations": {PREFERRED_TOPOLOGY: "rack"}}}}))
        .unwrap();
        assert_eq!(ps.domain_key().as_deref(), Some("clique"));
        let none: PodSet = serde_json::from_value(json!({"name": "main"})).unwrap();
        assert_eq!(none.domain_key(), None);
    }

    #[test]
    fn a_check_state_writes_only_what_it_has() {
        let c = CheckState {
            name: "gang".into(),
            state: "Ready".into(),
            message: "m".into(),
            pod_set_updates: vec![PodSetUpdate {
                name: "main".into(),
                node_selector: BTreeMap::from([("rack".into(), "y".into())]),
                ..Default::default()
            }],
            ..Default::default()
        };
        assert_eq!(
            serde_json::to_value(&c).unwrap(),
            json!({"name": "gang", "state": "Ready", "message": "m",
                   "podSetUpdates": [{"name": "main", "nodeSelector": {"rack": "y"}}]})
        );
    }
}
