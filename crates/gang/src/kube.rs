//! The `kube` dialect: kube-scheduler's gang scheduling (`scheduling.k8s.io/v1beta1`,
//! gate `GenericWorkload`) with topology-aware workload scheduling (gate
//! `TopologyAwareWorkloadScheduling`): a Workload with one gang PodGroupTemplate, the
//! PodGroup made from it, and one Pod per member joining it through
//! `spec.schedulingGroup.podGroupName`.

use k8s_openapi::api::core::v1::{Pod, PodSchedulingGroup};
use k8s_openapi::api::scheduling::v1beta1::{
    GangSchedulingPolicy, PodGroup, PodGroupSchedulingConstraints, PodGroupSchedulingPolicy,
    PodGroupSpec, PodGroupTemplate, TopologyConstraint, Workload, WorkloadReference, WorkloadSpec,
};

use crate::error::GangError;
use crate::job::Job;
use crate::job::Mode;
use crate::manifest_parts::{meta, pod_spec, value};

/// The name of the job's one PodGroupTemplate.
pub(crate) const TEMPLATE: &str = "workers";

/// The PodGroup's name: `<job>-workers`.
pub(crate) fn pod_group_name(job: &Job) -> String {
    format!("{}-{TEMPLATE}", job.name)
}

fn policy(job: &Job) -> PodGroupSchedulingPolicy {
    PodGroupSchedulingPolicy {
        gang: Some(GangSchedulingPolicy {
            min_count: i32::try_from(job.pods).unwrap_or(i32::MAX),
        }),
        basic: None,
    }
}

fn constraints(job: &Job) -> PodGroupSchedulingConstraints {
    PodGroupSchedulingConstraints {
        topology: Some(vec![TopologyConstraint {
            key: job.key.clone(),
        }]),
    }
}

/// Appends the Workload, the PodGroup and the pods.
pub(crate) fn objects(
    job: &Job,
    out: &mut Vec<serde_json::Value>,
    notes: &mut Vec<String>,
) -> Result<(), GangError> {
    if job.mode == Mode::Preferred {
        return Err(GangError::Field {
            file: job.name.clone(),
            field: "domain.mode".into(),
            why: "kube-scheduler's topology constraint is required only (one placement per domain); use mode: required, or the kueue or volcano dialect for a preferred domain".into(),
        });
    }
    let workload = Workload {
        metadata: meta(job, &job.name),
        spec: WorkloadSpec {
            pod_group_templates: Some(vec![PodGroupTemplate {
                name: TEMPLATE.into(),
                scheduling_policy: policy(job),
                scheduling_constraints: Some(constraints(job)),
                ..Default::default()
            }]),
            ..Default::default()
        },
    };
    let group = PodGroup {
        metadata: meta(job, &pod_group_name(job)),
        spec: PodGroupSpec {
            workload_ref: Some(WorkloadReference {
                workload_name: job.name.clone(),
                template_name: TEMPLATE.into(),
            }),
            scheduling_policy: policy(job),
            scheduling_constraints: Some(constraints(job)),
            ..Default::default()
        },
        status: None,
    };
    out.push(value(&workload));
    out.push(value(&group));
    for i in 0..job.pods {
        let mut spec = pod_spec(job);
        spec.scheduling_group = Some(PodSchedulingGroup {
            pod_group_name: Some(pod_group_name(job)),
        });
        let pod = Pod {
            metadata: meta(job, &format!("{}-{i}", job.name)),
            spec: Some(spec),
            status: None,
        };
        out.push(value(&pod));
    }
    notes.push("kube-scheduler v1.37 with gates GenericWorkload and TopologyAwareWorkloadScheduling on (apiserver, scheduler, controller manager) and --runtime-config=scheduling.k8s.io/v1beta1=true".into());
    Ok(())
}
