//! Where each supported kind keeps its pod template, read into the k8s-openapi types
//! (`Pod`, `Deployment`, `StatefulSet`, `DaemonSet`, `ReplicaSet`, `Job`, `CronJob`, ...),
//! and the cluster objects some rules read (`Node`, `ResourceSlice`,
//! `NodeResourceTopology`).

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::{DaemonSet, Deployment, ReplicaSet, StatefulSet};
use k8s_openapi::api::batch::v1::{CronJob, Job};
use k8s_openapi::api::core::v1::{
    Node, Pod, PodSpec, PodTemplate, PodTemplateSpec, ReplicationController,
};
use serde_json::Value;

use crate::claim_rules::ClaimSpec;
use crate::located::child_path;
use crate::typed::{TypeProblem, read};

/// A pod spec inside a manifest, with its field path.
#[derive(Debug, Clone)]
pub(crate) struct PodSpecAt {
    /// Field path of the spec, e.g. `spec.template.spec`.
    pub path: String,
    /// The spec.
    pub spec: PodSpec,
    /// The pod's (or pod template's) annotations.
    pub annotations: BTreeMap<String, String>,
}

/// What a kind holds, for linting.
#[derive(Debug)]
pub(crate) enum Workload {
    /// One or more pod specs.
    Pods(Vec<PodSpecAt>),
    /// A DRA claim spec (`ResourceClaimTemplate`'s `spec.spec`, `ResourceClaim`'s `spec`).
    Claim {
        /// Field path of the claim spec.
        path: String,
        /// The claim spec.
        spec: ClaimSpec,
        /// The same spec as `resource.k8s.io/v1` types, for the allocator (v1 and v1beta2,
        /// whose claim spec has the same shape; `None` for v1beta1 or when it does not read).
        v1: Option<Box<k8s_openapi::api::resource::v1::ResourceClaimSpec>>,
    },
    /// A Node (`kubectl get nodes -o yaml`): what its device plugins advertise.
    Node(Box<Node>),
    /// A ResourceSlice, NodeResourceTopology or DeviceClass: read for the whole input
    /// (which nodes run topoalign's driver or dra-driver-cpu, a NodeResourceTopology's MIG
    /// resources, the extended resources a class backs), no findings of its own.
    Slice,
    /// A kind this linter does not check.
    Unknown,
}

/// A workload with the fields its type refused.
#[derive(Debug)]
pub(crate) struct Read {
    /// What the document holds.
    pub workload: Workload,
    /// Fields the k8s-openapi types refused (wrong type, invalid value).
    pub problems: Vec<TypeProblem>,
}

/// A pod spec with its pod's annotations.
type SpecWithAnnotations = (PodSpec, BTreeMap<String, String>);

fn pods(path: &str, spec: Option<SpecWithAnnotations>) -> Workload {
    Workload::Pods(
        spec.map(|(spec, annotations)| PodSpecAt {
            path: path.to_string(),
            spec,
            annotations,
        })
        .into_iter()
        .collect(),
    )
}

fn template_spec(t: Option<PodTemplateSpec>) -> Option<SpecWithAnnotations> {
    t.and_then(|t| {
        let annotations = t.metadata.and_then(|m| m.annotations).unwrap_or_default();
        t.spec.map(|spec| (spec, annotations))
    })
}

/// Reads `doc` as its `kind` and finds its pod specs or claim spec.
pub(crate) fn workload_of(kind: &str, doc: &Value) -> Read {
    const TEMPLATE: &str = "spec.template.spec";
    let (workload, problems) = match kind {
        "Pod" => typed(doc, |p: Pod| {
            let annotations = p.metadata.annotations.unwrap_or_default();
            pods("spec", p.spec.map(|spec| (spec, annotations)))
        }),
        "PodTemplate" => typed(doc, |p: PodTemplate| {
            pods("template.spec", template_spec(p.template))
        }),
        "Deployment" => typed(doc, |d: Deployment| {
            pods(TEMPLATE, template_spec(Some(d.spec.template)))
        }),
        "StatefulSet" => typed(doc, |d: StatefulSet| {
            pods(TEMPLATE, template_spec(Some(d.spec.template)))
        }),
        "DaemonSet" => typed(doc, |d: DaemonSet| {
            pods(TEMPLATE, template_spec(Some(d.spec.template)))
        }),
        "ReplicaSet" => typed(doc, |d: ReplicaSet| {
            pods(TEMPLATE, template_spec(d.spec.template))
        }),
        "ReplicationController" => typed(doc, |d: ReplicationController| {
            pods(TEMPLATE, template_spec(d.spec.and_then(|s| s.template)))
        }),
        "Job" => typed(doc, |j: Job| {
            pods(TEMPLATE, template_spec(j.spec.map(|s| s.template)))
        }),
        "CronJob" => typed(doc, |c: CronJob| {
            let job = c.spec.job_template.spec;
            pods(
                "spec.jobTemplate.spec.template.spec",
                template_spec(job.map(|j| j.template)),
            )
        }),
        "MPIJob" | "PyTorchJob" | "TFJob" => training_job(kind, doc),
        "ResourceClaimTemplate" | "ResourceClaim" => claim(kind, doc),
        "Node" => typed(doc, |n: Node| Workload::Node(Box::new(n))),
        "ResourceSlice" | "NodeResourceTopology" | "DeviceClass" => (Workload::Slice, Vec::new()),
        _ => (Workload::Unknown, Vec::new()),
    };
    Read { workload, problems }
}

fn typed<T: serde::de::DeserializeOwned>(
    doc: &Value,
    f: impl FnOnce(T) -> Workload,
) -> (Workload, Vec<TypeProblem>) {
    let (t, problems) = read::<T>(doc, "");
    (t.map_or(Workload::Pods(Vec::new()), f), problems)
}

/// Kubeflow training jobs (custom resources, not in k8s-openapi): each replica role's
/// `template` is a `PodTemplateSpec`.
fn training_job(kind: &str, doc: &Value) -> (Workload, Vec<TypeProblem>) {
    let field = match kind {
        "MPIJob" => "mpiReplicaSpecs",
        "PyTorchJob" => "pytorchReplicaSpecs",
        _ => "tfReplicaSpecs",
    };
    let mut out = Vec::new();
    let mut problems = Vec::new();
    let roles = doc
        .get("spec")
        .and_then(|s| s.get(field))
        .and_then(Value::as_object);
    for (role, replica) in roles.into_iter().flatten() {
        let Some(template) = replica.get("template") else {
            continue;
        };
        let base = child_path(&format!("spec.{field}"), role) + ".template";
        let (t, p) = read::<PodTemplateSpec>(template, &base);
        problems.extend(p);
        if let Some((spec, annotations)) = template_spec(t) {
            out.push(PodSpecAt {
                path: format!("{base}.spec"),
                spec,
                annotations,
            });
        }
    }
    (Workload::Pods(out), problems)
}

fn claim(kind: &str, doc: &Value) -> (Workload, Vec<TypeProblem>) {
    let path = if kind == "ResourceClaimTemplate" {
        "spec.spec"
    } else {
        "spec"
    };
    let api_version = doc.get("apiVersion").and_then(Value::as_str).unwrap_or("");
    let v1 = match api_version {
        "resource.k8s.io/v1beta1" => None,
        _ => path
            .split('.')
            .try_fold(doc, |v, k| v.get(k))
            .and_then(|spec| serde_json::from_value(spec.clone()).ok())
            .map(Box::new),
    };
    match ClaimSpec::read(kind, api_version, doc) {
        (Some(spec), problems) => (
            Workload::Claim {
                path: path.to_string(),
                spec,
                v1,
            },
            problems,
        ),
        (None, problems) => (Workload::Pods(Vec::new()), problems),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn paths(r: &Read) -> Vec<&str> {
        match &r.workload {
            Workload::Pods(p) => p.iter().map(|x| x.path.as_str()).collect(),
            _ => panic!("{r:?}"),
        }
    }

    #[test]
    fn finds_templates() {
        let mpi = json!({"spec": {"mpiReplicaSpecs": {"Launcher": {"template": {"spec": {"containers": []}}}, "Worker": {"template": {"spec": {"containers": []}}}}}});
        assert_eq!(
            paths(&workload_of("MPIJob", &mpi)),
            [
                "spec.mpiReplicaSpecs.Launcher.template.spec",
                "spec.mpiReplicaSpecs.Worker.template.spec"
            ]
        );
        let cj = json!({"apiVersion": "batch/v1", "kind": "CronJob", "spec": {"schedule": "* * * * *",
            "jobTemplate": {"spec": {"template": {"spec": {"containers": []}}}}}});
        let r = workload_of("CronJob", &cj);
        assert_eq!(paths(&r), ["spec.jobTemplate.spec.template.spec"]);
        assert!(r.problems.is_empty(), "{:?}", r.problems);
        let claim = json!({"apiVersion": "resource.k8s.io/v1", "spec": {"spec": {}}});
        assert!(matches!(
            workload_of("ResourceClaimTemplate", &claim).workload,
            Workload::Claim { .. }
        ));
        assert!(matches!(
            workload_of("Service", &json!({})).workload,
            Workload::Unknown
        ));
    }

    #[test]
    fn a_wrongly_typed_field_is_a_problem_with_its_path() {
        let d = json!({"apiVersion": "apps/v1", "kind": "Deployment", "spec": {
            "selector": {}, "template": {"spec": {"containers": [
                {"name": "a", "resources": {"requests": {"cpu": [1]}}}]}}}});
        let r = workload_of("Deployment", &d);
        assert_eq!(paths(&r), ["spec.template.spec"]);
        assert_eq!(
            r.problems[0].path,
            "spec.template.spec.containers[0].resources.requests.cpu"
        );
        let mpi = json!({"spec": {"mpiReplicaSpecs": {"Worker": {"template": {"spec": {"containers": 3}}}}}});
        let r = workload_of("MPIJob", &mpi);
        assert_eq!(
            r.problems[0].path,
            "spec.mpiReplicaSpecs.Worker.template.spec.containers"
        );
    }
}
