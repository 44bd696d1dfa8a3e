//! Where each supported kind keeps its pod template.

use serde_json::Value;

/// A pod spec inside a manifest, with its field path.
#[derive(Debug, Clone)]
pub struct PodSpecAt<'a> {
    /// Field path of the spec, e.g. `spec.template.spec`.
    pub path: String,
    /// The spec.
    pub spec: &'a Value,
}

/// What a kind holds, for linting.
#[derive(Debug)]
pub enum Workload<'a> {
    /// One or more pod specs.
    Pods(Vec<PodSpecAt<'a>>),
    /// A DRA claim spec (`ResourceClaimTemplate`'s `spec.spec`, `ResourceClaim`'s `spec`).
    Claim {
        /// Field path of the claim spec.
        path: String,
        /// The claim spec.
        spec: &'a Value,
    },
    /// A kind this linter does not check.
    Unknown,
}

fn at<'a>(v: &'a Value, path: &[&str]) -> Option<&'a Value> {
    path.iter().try_fold(v, |cur, k| cur.get(*k))
}

/// Finds the pod specs or claim spec of `doc` according to its `kind`.
pub fn workload_of<'a>(kind: &str, doc: &'a Value) -> Workload<'a> {
    let one = |path: &[&str]| -> Workload<'a> {
        Workload::Pods(
            at(doc, path)
                .map(|spec| {
                    vec![PodSpecAt {
                        path: path.join("."),
                        spec,
                    }]
                })
                .unwrap_or_default(),
        )
    };
    match kind {
        "Pod" => one(&["spec"]),
        "PodTemplate" => one(&["template", "spec"]),
        "Deployment"
        | "StatefulSet"
        | "DaemonSet"
        | "ReplicaSet"
        | "Job"
        | "ReplicationController" => one(&["spec", "template", "spec"]),
        "CronJob" => one(&["spec", "jobTemplate", "spec", "template", "spec"]),
        "MPIJob" | "PyTorchJob" | "TFJob" => {
            let field = match kind {
                "MPIJob" => "mpiReplicaSpecs",
                "PyTorchJob" => "pytorchReplicaSpecs",
                _ => "tfReplicaSpecs",
            };
            let mut pods = Vec::new();
            if let Some(roles) = at(doc, &["spec", field]).and_then(Value::as_object) {
                for (role, replica) in roles {
                    if let Some(spec) = at(replica, &["template", "spec"]) {
                        pods.push(PodSpecAt {
                            path: format!("spec.{field}.{role}.template.spec"),
                            spec,
                        });
                    }
                }
            }
            Workload::Pods(pods)
        }
        "ResourceClaimTemplate" => match at(doc, &["spec", "spec"]) {
            Some(spec) => Workload::Claim {
                path: "spec.spec".into(),
                spec,
            },
            None => Workload::Pods(Vec::new()),
        },
        "ResourceClaim" => match doc.get("spec") {
            Some(spec) => Workload::Claim {
                path: "spec".into(),
                spec,
            },
            None => Workload::Pods(Vec::new()),
        },
        _ => Workload::Unknown,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn finds_templates() {
        let mpi = json!({"spec": {"mpiReplicaSpecs": {"Launcher": {"template": {"spec": {"containers": []}}}, "Worker": {"template": {"spec": {"containers": []}}}}}});
        let Workload::Pods(p) = workload_of("MPIJob", &mpi) else {
            panic!()
        };
        assert_eq!(
            p.iter().map(|x| x.path.as_str()).collect::<Vec<_>>(),
            [
                "spec.mpiReplicaSpecs.Launcher.template.spec",
                "spec.mpiReplicaSpecs.Worker.template.spec"
            ]
        );
        let cj = json!({"spec": {"jobTemplate": {"spec": {"template": {"spec": {}}}}}});
        let Workload::Pods(p) = workload_of("CronJob", &cj) else {
            panic!()
        };
        assert_eq!(p[0].path, "spec.jobTemplate.spec.template.spec");
        assert!(matches!(
            workload_of("ResourceClaimTemplate", &json!({"spec": {"spec": {}}})),
            Workload::Claim { .. }
        ));
        assert!(matches!(
            workload_of("Service", &json!({})),
            Workload::Unknown
        ));
    }
}
