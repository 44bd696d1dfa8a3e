//! A job's manifests in the dialect of the engine that places the gang, and what they
//! say in short.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    Container, PodResourceClaim, PodSpec, PodTemplateSpec, ResourceClaim as ContainerClaim,
    ResourceRequirements,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::Serialize;

use crate::claim::{POD_CLAIM_NAME, gang_claim_template, template_name};
use crate::job::Mode;
use crate::{GangError, Job, kai, kube, kueue, volcano};

/// The label every object of a gang carries: `topoalign.dev/gang: <job>`.
pub(crate) const GANG_LABEL: &str = "topoalign.dev/gang";

/// The engine whose objects are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
pub enum Dialect {
    /// kube-scheduler's Workload and PodGroup (`scheduling.k8s.io/v1beta1`) and bare
    /// pods that join the PodGroup.
    Kube,
    /// A `batch/v1` Job for Kueue with a topology annotation, and Kueue's `Topology`.
    Kueue,
    /// A Volcano Job (`batch.volcano.sh/v1alpha1`) with `networkTopology`.
    Volcano,
    /// NVIDIA's KAI scheduler: its `Topology` (`kai.scheduler/v1alpha1`), a PodGroup
    /// (`scheduling.run.ai/v2alpha2`) with a `topologyConstraint`, and pods that join it.
    Kai,
}

impl Dialect {
    /// The dialect's name on the command line.
    pub fn as_str(self) -> &'static str {
        match self {
            Dialect::Kube => "kube",
            Dialect::Kueue => "kueue",
            Dialect::Volcano => "volcano",
            Dialect::Kai => "kai",
        }
    }
}

/// What the manifests say, for the table.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Summary {
    /// Job name.
    pub job: String,
    /// Dialect written.
    pub dialect: Dialect,
    /// Pods of the gang.
    pub pods: u32,
    /// Pairs per pod.
    pub pairs_per_pod: u32,
    /// Worst class accepted.
    pub class: String,
    /// Rails every pod uses; `None` when not pinned.
    pub rails: Option<Vec<u32>>,
    /// Domain level.
    pub level: String,
    /// Domain label key.
    pub key: String,
    /// `required` or `preferred`.
    pub mode: String,
    /// Nodes the gang needs.
    pub nodes_needed: u32,
    /// Domains known (from the job or a fleet), with their node counts.
    pub domains: Option<BTreeMap<String, u32>>,
    /// `kind/name` of every object written, in order.
    pub objects: Vec<String>,
    /// What the user must have in place for the manifests to work.
    pub notes: Vec<String>,
}

/// A job's manifests.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Manifests {
    /// The objects, in apply order.
    pub objects: Vec<serde_json::Value>,
    /// In short.
    pub summary: Summary,
}

/// Object metadata with the job's namespace and the gang label.
pub(crate) fn meta(job: &Job, name: &str) -> ObjectMeta {
    ObjectMeta {
        name: Some(name.to_string()),
        namespace: job.namespace.clone(),
        labels: Some(BTreeMap::from([(GANG_LABEL.to_string(), job.name.clone())])),
        ..Default::default()
    }
}

/// The pod spec every pod of the gang runs: one container holding the claim.
pub(crate) fn pod_spec(job: &Job) -> PodSpec {
    PodSpec {
        containers: vec![Container {
            name: "worker".into(),
            image: Some(job.image.clone()),
            command: job.command.clone(),
            resources: Some(ResourceRequirements {
                claims: Some(vec![ContainerClaim {
                    name: POD_CLAIM_NAME.into(),
                    ..Default::default()
                }]),
                ..Default::default()
            }),
            ..Default::default()
        }],
        resource_claims: Some(vec![PodResourceClaim {
            name: POD_CLAIM_NAME.into(),
            resource_claim_template_name: Some(template_name(job)),
            ..Default::default()
        }]),
        restart_policy: Some("Never".into()),
        ..Default::default()
    }
}

/// A pod template with the gang label and `annotations`.
pub(crate) fn pod_template(job: &Job, annotations: BTreeMap<String, String>) -> PodTemplateSpec {
    PodTemplateSpec {
        metadata: Some(ObjectMeta {
            labels: Some(BTreeMap::from([(GANG_LABEL.to_string(), job.name.clone())])),
            annotations: (!annotations.is_empty()).then_some(annotations),
            ..Default::default()
        }),
        spec: Some(pod_spec(job)),
    }
}

/// Serializes a typed object.
/// The name of the `Topology` object the Kueue and KAI dialects write: `topoalign-<level>`.
pub(crate) fn topology_name(job: &Job) -> String {
    format!("topoalign-{}", job.level)
}

/// A `Topology` of `api_version` (Kueue's and KAI's have the same shape): the domain
/// label, then `kubernetes.io/hostname`, which both allow only as the lowest level.
pub(crate) fn topology_object(job: &Job, api_version: &str) -> serde_json::Value {
    let mut levels = vec![serde_json::json!({"nodeLabel": job.key})];
    if job.key != crate::labels::HOSTNAME {
        levels.push(serde_json::json!({"nodeLabel": crate::labels::HOSTNAME}));
    }
    serde_json::json!({
        "apiVersion": api_version,
        "kind": "Topology",
        "metadata": {"name": topology_name(job)},
        "spec": {"levels": levels},
    })
}

pub(crate) fn value<T: Serialize>(object: &T) -> serde_json::Value {
    // The k8s-openapi types and serde_json::Value serialize without failure.
    serde_json::to_value(object).unwrap_or(serde_json::Value::Null)
}

fn object_name(v: &serde_json::Value) -> String {
    format!(
        "{}/{}",
        v["kind"].as_str().unwrap_or("?"),
        v["metadata"]["name"].as_str().unwrap_or("?")
    )
}

/// The job's manifests in `dialect`: the claim template first, then the engine's objects.
pub fn manifests(job: &Job, dialect: Dialect) -> Result<Manifests, GangError> {
    let mut objects = vec![value(&gang_claim_template(job)?)];
    let mut notes = Vec::new();
    match dialect {
        Dialect::Kube => kube::objects(job, &mut objects, &mut notes)?,
        Dialect::Kueue => kueue::objects(job, &mut objects, &mut notes),
        Dialect::Volcano => volcano::objects(job, &mut objects, &mut notes),
        Dialect::Kai => kai::objects(job, &mut objects, &mut notes),
    }
    if job.rails.is_some() {
        notes.push(format!(
            "pair devices must carry the rail attribute ({}/{}): run the driver with a rail source on every node",
            topoalign_dra::DRIVER_NAME,
            topoalign_dra::attr::RAIL
        ));
    }
    let summary = Summary {
        job: job.name.clone(),
        dialect,
        pods: job.pods,
        pairs_per_pod: job.pairs_per_pod,
        class: job.class.as_str().into(),
        rails: job.rails.as_ref().map(|r| r.iter().copied().collect()),
        level: job.level.to_string(),
        key: job.key.clone(),
        mode: match job.mode {
            Mode::Required => "required".into(),
            Mode::Preferred => "preferred".into(),
        },
        nodes_needed: job.nodes_needed(),
        domains: job.sizes.clone(),
        objects: objects.iter().map(object_name).collect(),
        notes,
    };
    Ok(Manifests { objects, summary })
}

/// The summary as a table.
pub fn summary_table(s: &Summary) -> String {
    let rails = match &s.rails {
        Some(r) => r.iter().map(u32::to_string).collect::<Vec<_>>().join(","),
        None => "not pinned".into(),
    };
    let domains = match &s.domains {
        Some(d) if !d.is_empty() => d
            .iter()
            .map(|(k, n)| format!("{k}={n}"))
            .collect::<Vec<_>>()
            .join(" "),
        _ => "unknown (give domain.sizes or --nodes)".into(),
    };
    let rows = [
        ("job", s.job.clone()),
        ("dialect", s.dialect.as_str().into()),
        ("pods", s.pods.to_string()),
        ("pairs per pod", s.pairs_per_pod.to_string()),
        ("class", format!("{} or better", s.class)),
        ("rails", rails),
        ("domain", format!("{} ({}), {}", s.level, s.mode, s.key)),
        ("nodes needed", s.nodes_needed.to_string()),
        ("domains", domains),
        ("objects", s.objects.join(" ")),
    ];
    let mut out = String::new();
    for (k, v) in rows {
        out.push_str(&format!("{k:<14} {v}\n"));
    }
    for n in &s.notes {
        out.push_str(&format!("note: {n}\n"));
    }
    out
}
