//! A job's manifests in the dialect of the engine that places the gang, and what they
//! say in short: the dispatcher over the dialect writers (`kube`, `kueue`, `volcano`,
//! `kai`), which build on the shared pieces of `crate::manifest_parts`.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::claim::gang_claim_template;
use crate::error::GangError;
use crate::job::Job;
use crate::job::Mode;
use crate::manifest_parts::value;
use crate::{kai, kube, kueue, volcano};

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

impl Manifests {
    /// The objects as one `v1` List (`-o json`).
    pub fn list(&self) -> serde_json::Value {
        serde_json::json!({"apiVersion": "v1", "kind": "List", "items": self.objects})
    }
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
    if let Some(v) = job.kubernetes.filter(|_| !job.distinct_attribute()) {
        notes.push(match &job.rails {
            Some(_) => format!(
                "Kubernetes {v} drops distinctAttribute (DRAConsumableCapacity is off before {}): each pod's claim asks one pair per rail instead",
                topoalign_kube_types::DISTINCT_ATTRIBUTE_ON
            ),
            None => format!(
                "Kubernetes {v} drops distinctAttribute (DRAConsumableCapacity is off before {}): two pairs of a pod may share a physical NIC through its VFs; pin rails (sameRails: true) or turn the gate on",
                topoalign_kube_types::DISTINCT_ATTRIBUTE_ON
            ),
        });
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
