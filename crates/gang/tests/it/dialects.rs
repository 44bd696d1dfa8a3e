//! Every dialect's objects against the upstream APIs: the typed k8s-openapi objects
//! (ResourceClaimTemplate resource.k8s.io/v1, Workload and PodGroup
//! scheduling.k8s.io/v1beta1, Pod, batch/v1 Job) read back without losing a field, and
//! the custom resources (Kueue Topology, Volcano Job) field by field against their Go
//! types: sigs.k8s.io/kueue v0.17.0 apis/kueue/v1beta2/topology_types.go and
//! volcano.sh/apis pkg/apis/batch/v1alpha1/job.go; KAI-Scheduler
//! pkg/apis/kai/v1alpha1/topology_types.go and pkg/apis/scheduling/v2alpha2/podgroup_types.go.
//! The e2e gang scenario (part 6) applies the Volcano and KAI objects to a real API server
//! with those engines' CRDs and strict field validation.

use std::collections::BTreeSet;

use k8s_openapi::api::batch::v1::Job as BatchJob;
use k8s_openapi::api::core::v1::{Pod, PodTemplateSpec};
use k8s_openapi::api::resource::v1::ResourceClaimTemplate;
use k8s_openapi::api::scheduling::v1beta1::{PodGroup, Workload};
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use topoalign_dra::alloc::Selector;
use topoalign_gang::{Dialect, Manifests, manifests, parse_job};

use crate::{JOB, job_with};

fn build(text: &str, dialect: Dialect) -> Manifests {
    manifests(&parse_job(text, "job.yaml").unwrap(), dialect).unwrap()
}

/// Reads `v` as `T` after a trip through YAML text, and checks that writing it again
/// gives `v` back: no field unknown to the type, none lost, YAML quoting intact.
fn typed<T: DeserializeOwned + serde::Serialize>(v: &Value) -> T {
    let yaml = serde_saphyr::to_string(v).unwrap();
    let back: Value = serde_saphyr::from_str(&yaml).unwrap();
    assert_eq!(&back, v, "YAML round trip");
    let t: T = serde_json::from_value(back).unwrap();
    assert_eq!(&serde_json::to_value(&t).unwrap(), v, "typed round trip");
    t
}

fn keys(v: &Value) -> BTreeSet<&str> {
    v.as_object().unwrap().keys().map(String::as_str).collect()
}

/// The claim template: typed, every CEL selector in the checker's subset, the rails.
fn check_claim(v: &Value, rails: &[u32], pairs: i64) {
    let t: ResourceClaimTemplate = typed(v);
    assert_eq!(t.metadata.name.as_deref(), Some("train-pairs"));
    let devices = t.spec.unwrap().spec.unwrap().devices.unwrap();
    let req = &devices.requests.unwrap()[0];
    let exactly = req.exactly.as_ref().unwrap();
    assert_eq!(
        exactly.device_class_name,
        topoalign_dra::publish::CLASS_PAIR
    );
    assert_eq!(exactly.count, Some(pairs));
    let exprs: Vec<String> = exactly
        .selectors
        .iter()
        .flatten()
        .map(|s| s.cel.as_ref().unwrap().expression.clone())
        .collect();
    for e in &exprs {
        Selector::parse(e).unwrap();
    }
    assert!(
        exprs.iter().any(|e| e.contains("[\"rank\"] <= 1")),
        "{exprs:?}"
    );
    let rail = exprs.iter().find(|e| e.contains("rail")).unwrap();
    for r in 0..8 {
        assert_eq!(
            rail.contains(&format!("== {r})")) || rail.contains(&format!("== {r} ")),
            rails.contains(&r),
            "{rail}"
        );
    }
    let distinct: Vec<String> = devices
        .constraints
        .unwrap()
        .iter()
        .filter_map(|c| c.distinct_attribute.clone())
        .collect();
    assert_eq!(distinct, ["topoalign.dev/nic", "topoalign.dev/rail"]);
}

fn check_pod_spec(spec: &k8s_openapi::api::core::v1::PodSpec) {
    let c = &spec.containers[0];
    assert_eq!(c.image.as_deref(), Some("nvcr.io/nvidia/pytorch:25.01-py3"));
    assert_eq!(c.command, Some(vec!["torchrun".into(), "train.py".into()]));
    let claims = c.resources.as_ref().unwrap().claims.as_ref().unwrap();
    assert_eq!(claims[0].name, "pairs");
    let rc = &spec.resource_claims.as_ref().unwrap()[0];
    assert_eq!(
        (rc.name.as_str(), rc.resource_claim_template_name.as_deref()),
        ("pairs", Some("train-pairs"))
    );
}

#[test]
fn kube_writes_a_workload_a_pod_group_and_pods_that_join_it() {
    let m = build(JOB, Dialect::Kube);
    assert_eq!(m.objects.len(), 1 + 2 + 4);
    check_claim(&m.objects[0], &[4, 5, 6, 7], 4);
    let w = &m.objects[1];
    assert_eq!(
        (w["apiVersion"].as_str(), w["kind"].as_str()),
        (Some("scheduling.k8s.io/v1beta1"), Some("Workload"))
    );
    let _: Workload = typed(w);
    // The exact structure, field names from k8s.io/api v0.37.2 scheduling/v1beta1/types.go.
    assert_eq!(
        w["spec"],
        json!({"podGroupTemplates": [{
            "name": "workers",
            "schedulingPolicy": {"gang": {"minCount": 4}},
            "schedulingConstraints": {"topology": [{"key": "accelerator.topograph.run/domain"}]},
        }]})
    );
    let g = &m.objects[2];
    let pg: PodGroup = typed(g);
    assert_eq!(pg.metadata.name.as_deref(), Some("train-workers"));
    assert_eq!(pg.metadata.namespace.as_deref(), Some("ml"));
    assert_eq!(
        g["spec"],
        json!({
            "workloadRef": {"workloadName": "train", "templateName": "workers"},
            "schedulingPolicy": {"gang": {"minCount": 4}},
            "schedulingConstraints": {"topology": [{"key": "accelerator.topograph.run/domain"}]},
        })
    );
    for (i, p) in m.objects[3..].iter().enumerate() {
        let pod: Pod = typed(p);
        assert_eq!(pod.metadata.name, Some(format!("train-{i}")));
        let spec = pod.spec.unwrap();
        assert_eq!(
            p["spec"]["schedulingGroup"],
            json!({"podGroupName": "train-workers"})
        );
        assert_eq!(spec.restart_policy.as_deref(), Some("Never"));
        check_pod_spec(&spec);
    }
    // kube-scheduler has no preferred topology.
    let soft = job_with("level: nvlink", "level: nvlink\n  mode: preferred");
    let e = manifests(&parse_job(&soft, "j").unwrap(), Dialect::Kube).unwrap_err();
    assert!(e.to_string().contains("required only"), "{e}");
}

#[test]
fn kueue_writes_a_topology_and_a_suspended_indexed_job() {
    let m = build(
        &job_with(
            "command: [torchrun, train.py]\n",
            "command: [torchrun, train.py]\nqueue: team-a\n",
        ),
        Dialect::Kueue,
    );
    assert_eq!(m.objects.len(), 3);
    check_claim(&m.objects[0], &[4, 5, 6, 7], 4);
    // kueue v0.17.0 apis/kueue/v1beta2: Topology{spec: TopologySpec{levels: []TopologyLevel{nodeLabel}}},
    // cluster-scoped (+genclient:nonNamespaced), hostname only as the lowest level.
    assert_eq!(
        m.objects[1],
        json!({
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "Topology",
            "metadata": {"name": "topoalign-nvlink"},
            "spec": {"levels": [
                {"nodeLabel": "accelerator.topograph.run/domain"},
                {"nodeLabel": "kubernetes.io/hostname"},
            ]},
        })
    );
    let job: BatchJob = typed(&m.objects[2]);
    let labels = job.metadata.labels.unwrap();
    assert_eq!(labels["kueue.x-k8s.io/queue-name"], "team-a");
    let spec = job.spec.unwrap();
    assert_eq!((spec.parallelism, spec.completions), (Some(4), Some(4)));
    assert_eq!(
        (spec.completion_mode.as_deref(), spec.suspend),
        (Some("Indexed"), Some(true))
    );
    let t = spec.template;
    let ann = t.metadata.unwrap().annotations.unwrap();
    assert_eq!(ann.len(), 1);
    assert_eq!(
        ann["kueue.x-k8s.io/podset-required-topology"],
        "accelerator.topograph.run/domain"
    );
    check_pod_spec(&t.spec.unwrap());
    let soft = build(
        &job_with("level: nvlink", "level: leaf\n  mode: preferred"),
        Dialect::Kueue,
    );
    let ann = &soft.objects[2]["spec"]["template"]["metadata"]["annotations"];
    assert_eq!(
        ann,
        &json!({"kueue.x-k8s.io/podset-preferred-topology": "fabric.topograph.run/tier-0"})
    );
    assert_eq!(soft.objects[1]["metadata"]["name"], "topoalign-leaf");
}

#[test]
fn volcano_writes_a_job_with_network_topology() {
    let m = build(&job_with("level: nvlink", "level: spine"), Dialect::Volcano);
    assert_eq!(m.objects.len(), 2);
    check_claim(&m.objects[0], &[4, 5, 6, 7], 4);
    let v = &m.objects[1];
    assert_eq!(
        (v["apiVersion"].as_str(), v["kind"].as_str()),
        (Some("batch.volcano.sh/v1alpha1"), Some("Job"))
    );
    // volcano.sh/apis batch/v1alpha1 JobSpec json tags.
    let spec = &v["spec"];
    assert_eq!(
        keys(spec),
        BTreeSet::from([
            "schedulerName",
            "minAvailable",
            "queue",
            "networkTopology",
            "tasks"
        ])
    );
    assert_eq!(spec["minAvailable"], 4);
    assert_eq!(spec["schedulerName"], "volcano");
    assert_eq!(
        spec["networkTopology"],
        json!({"mode": "hard", "highestTierAllowed": 2})
    );
    let task = &spec["tasks"][0];
    assert_eq!(keys(task), BTreeSet::from(["name", "replicas", "template"]));
    assert_eq!(task["replicas"], 4);
    let t: PodTemplateSpec = typed(&task["template"]);
    check_pod_spec(&t.spec.unwrap());
    let _: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta = typed(&v["metadata"]);
    let soft = build(
        &job_with(
            "level: nvlink",
            "level: nvlink\n  mode: preferred\n  volcanoTier: 3",
        ),
        Dialect::Volcano,
    );
    assert_eq!(
        soft.objects[1]["spec"]["networkTopology"],
        json!({"mode": "soft", "highestTierAllowed": 3})
    );
}

#[test]
fn kai_writes_a_topology_a_pod_group_and_pods_that_join_it() {
    let m = build(
        &job_with(
            "command: [torchrun, train.py]\n",
            "command: [torchrun, train.py]\nqueue: team-a\n",
        ),
        Dialect::Kai,
    );
    assert_eq!(
        m.objects.len(),
        3 + 4,
        "template, Topology, PodGroup, 4 pods"
    );
    check_claim(&m.objects[0], &[4, 5, 6, 7], 4);
    // KAI v1alpha1 Topology{spec: TopologySpec{levels: []TopologyLevel{nodeLabel}}},
    // cluster-scoped, kubernetes.io/hostname only as the lowest level.
    assert_eq!(
        m.objects[1],
        json!({
            "apiVersion": "kai.scheduler/v1alpha1",
            "kind": "Topology",
            "metadata": {"name": "topoalign-nvlink"},
            "spec": {"levels": [
                {"nodeLabel": "accelerator.topograph.run/domain"},
                {"nodeLabel": "kubernetes.io/hostname"},
            ]},
        })
    );
    // v2alpha2 PodGroupSpec json tags: minMember, queue,
    // topologyConstraint{topology, requiredTopologyLevel, preferredTopologyLevel}.
    assert_eq!(
        m.objects[2],
        json!({
            "apiVersion": "scheduling.run.ai/v2alpha2",
            "kind": "PodGroup",
            "metadata": {"name": "train", "namespace": "ml", "labels": {
                "topoalign.dev/gang": "train",
                "kai.scheduler/queue": "team-a",
            }},
            "spec": {
                "minMember": 4,
                "queue": "team-a",
                "topologyConstraint": {
                    "topology": "topoalign-nvlink",
                    "requiredTopologyLevel": "accelerator.topograph.run/domain",
                },
            },
        })
    );
    for (i, v) in m.objects[3..].iter().enumerate() {
        let pod: Pod = typed(v);
        let meta = pod.metadata;
        assert_eq!(meta.name, Some(format!("train-{i}")));
        assert_eq!(meta.labels.unwrap()["kai.scheduler/queue"], "team-a");
        assert_eq!(
            meta.annotations.unwrap(),
            [
                ("kai.scheduler/topology", "topoalign-nvlink"),
                (
                    "kai.scheduler/topology-required-placement",
                    "accelerator.topograph.run/domain"
                ),
                ("pod-group-name", "train"),
            ]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
        );
        let spec = pod.spec.unwrap();
        assert_eq!(spec.scheduler_name.as_deref(), Some("kai-scheduler"));
        check_pod_spec(&spec);
    }
    let soft = build(
        &job_with("level: nvlink", "level: leaf\n  mode: preferred"),
        Dialect::Kai,
    );
    assert_eq!(
        soft.objects[2]["spec"]["topologyConstraint"],
        json!({"topology": "topoalign-leaf", "preferredTopologyLevel": "fabric.topograph.run/tier-0"})
    );
    let ann = &soft.objects[3]["metadata"]["annotations"];
    assert_eq!(
        ann["kai.scheduler/topology-preferred-placement"],
        "fabric.topograph.run/tier-0"
    );
    assert!(
        ann.get("kai.scheduler/topology-required-placement")
            .is_none()
    );
    assert!(soft.summary.notes.iter().any(|n| n.starts_with("KAI: ")));
}

#[test]
fn without_same_rails_the_claim_is_the_plain_pair_claim() {
    let m = build(
        &job_with("rails: [4, 5, 6, 7]\n", "sameRails: false\n"),
        Dialect::Kueue,
    );
    let text = m.objects[0].to_string();
    assert!(!text.contains("rail"), "{text}");
    assert!(m.summary.rails.is_none());
    assert!(!m.summary.notes.iter().any(|n| n.contains("rail source")));
}

#[test]
fn the_summary_names_pods_pairs_rails_and_the_key() {
    let m = build(JOB, Dialect::Kube);
    let t = topoalign_gang::summary_table(&m.summary);
    for want in [
        "pods           4",
        "pairs per pod  4",
        "rails          4,5,6,7",
        "accelerator.topograph.run/domain",
        "Workload/train",
        "Pod/train-3",
        "PXB or better",
    ] {
        assert!(t.contains(want), "{want}: {t}");
    }
}

/// For Kubernetes 1.35 (DRAConsumableCapacity off, `distinctAttribute` dropped by the API
/// server) every dialect's claim asks one pair per rail and has no constraint left; from
/// 1.36 it is the one request with `distinctAttribute`.
#[test]
fn before_1_36_claims_ask_one_pair_per_rail_without_distinct_attribute() {
    let mut job = parse_job(JOB, "job.yaml").unwrap();
    let rails: Vec<u32> = job.rails.clone().unwrap().into_iter().collect();
    job.kubernetes = Some("v1.35.3".parse().unwrap());
    for dialect in [
        Dialect::Kube,
        Dialect::Kueue,
        Dialect::Volcano,
        Dialect::Kai,
    ] {
        let m = manifests(&job, dialect).unwrap();
        let t: ResourceClaimTemplate = typed(&m.objects[0]);
        let devices = t.spec.unwrap().spec.unwrap().devices.unwrap();
        assert_eq!(devices.constraints, None, "{dialect:?}");
        let requests = devices.requests.unwrap();
        let names: Vec<String> = requests.iter().map(|r| r.name.clone()).collect();
        let want: Vec<String> = rails.iter().map(|r| format!("rail-{r}")).collect();
        assert_eq!(names, want, "{dialect:?}");
        for (r, req) in rails.iter().zip(&requests) {
            let e = req.exactly.as_ref().unwrap();
            assert_eq!(e.count, Some(1));
            let exprs: Vec<&str> = (e.selectors.iter().flatten())
                .map(|s| s.cel.as_ref().unwrap().expression.as_str())
                .collect();
            for x in &exprs {
                Selector::parse(x).unwrap();
            }
            assert!(
                exprs.iter().any(|x| x.ends_with(&format!("== {r})"))),
                "{exprs:?}"
            );
        }
        assert!(
            m.summary
                .notes
                .iter()
                .any(|n| n.contains("Kubernetes 1.35 drops distinctAttribute")),
            "{:?}",
            m.summary.notes
        );
    }
    job.kubernetes = Some("1.36".parse().unwrap());
    let m = manifests(&job, Dialect::Kube).unwrap();
    let t: ResourceClaimTemplate = typed(&m.objects[0]);
    let devices = t.spec.unwrap().spec.unwrap().devices.unwrap();
    assert_eq!(devices.requests.unwrap().len(), 1);
    assert!(
        devices
            .constraints
            .unwrap()
            .iter()
            .any(|c| c.distinct_attribute.is_some())
    );
    assert!(
        !m.summary
            .notes
            .iter()
            .any(|n| n.contains("drops distinctAttribute"))
    );
}
