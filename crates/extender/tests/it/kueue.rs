//! The Kueue admission check's decision on the DRA state the extender keeps: a gang from
//! `topoalign gang` (its claim template pinning the job's rails) on two racks of
//! dgx-h100 nodes whose slices carry each NIC's rail. On rack x the GPUs of the job's
//! rails are held, so no pod fits there; rack y is free. Before Kueue reserves quota the
//! check pins the gang to rack y; a reservation Kueue's TAS made on rack x is sent back.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Value, json};
use topoalign_dra::publish::{device_classes, slices_for};
use topoalign_extender::{DraState, GangVerdict, NodeLabels, Workload, judge_gang, review};
use topoalign_gang::{gang_claim_template, parse_job};

use crate::common::railed_node;
use crate::dra::holding;

const JOB: &str = include_str!("../../../../deploy/gang/job.yaml");
const KEY: &str = "nvidia.com/gpu.clique";

/// The DRA state of the two racks (4 nodes each), the job's template applied, and the
/// nodes' labels; with `job`'s rails held on rack x.
fn racks(job_yaml: &str) -> (DraState, NodeLabels, String, u32) {
    let job = parse_job(job_yaml, "job.yaml").unwrap();
    let on: BTreeSet<u32> = job.rails.clone().unwrap_or_default();
    let mut template = gang_claim_template(&job).unwrap();
    template.metadata.namespace = Some("ns".into());
    let name = template.metadata.name.clone().unwrap();
    let mut st = DraState::default();
    for c in device_classes() {
        st.apply_class(&c);
    }
    st.apply_template(&template);
    let mut labels = NodeLabels::new();
    for rack in ["x", "y"] {
        for i in 0..4 {
            let node = format!("rack-{rack}-{i}");
            let (inv, gpus) = railed_node(&node, &on);
            for s in slices_for(&inv, &node, 1).unwrap() {
                st.apply_slice(&s);
            }
            if rack == "x" {
                let held: Vec<(&str, &str)> =
                    gpus.iter().map(|g| ("topoalign.dev", g.as_str())).collect();
                st.apply_claim(&holding(&format!("held-{node}"), &node, &held));
            }
            labels.insert(
                node,
                BTreeMap::from([(KEY.to_string(), format!("rack-{rack}"))]),
            );
        }
    }
    (st, labels, name, job.pods)
}

/// The Workload Kueue makes of the job's Indexed Job: one pod set of `pods` pods whose
/// claim comes from `template`, one domain of KEY required.
fn workload(template: &str, pods: u32, status: Value) -> Workload {
    serde_json::from_value(json!({
        "metadata": {"name": "job-train", "namespace": "ns", "resourceVersion": "1"},
        "spec": {"podSets": [{"name": "main", "count": pods,
            "topologyRequest": {"required": KEY},
            "template": {"spec": {
                "containers": [{"name": "worker", "resources": {"claims": [{"name": "pairs"}]}}],
                "resourceClaims": [{"name": "pairs", "resourceClaimTemplateName": template}]}}}]},
        "status": status,
    }))
    .unwrap()
}

#[test]
fn the_check_pins_the_gang_to_the_rack_whose_free_gpus_have_their_nics_on_the_rails() {
    let (st, labels, template, pods) = racks(JOB);
    let w = workload(
        &template,
        pods,
        json!({"admissionChecks": [{"name": "gang", "state": "Pending", "message": ""}]}),
    );
    let GangVerdict::Domains { key, domains } = judge_gang(&w, &labels, &st) else {
        panic!("the gang's claims were not judged")
    };
    assert_eq!(key.as_deref(), Some(KEY));
    assert_eq!(domains[0].domain, "rack-y", "{domains:?}");
    assert!(domains[0].holds());
    assert_eq!(domains[0].nodes.len(), 4, "one pod per node: {domains:?}");
    assert_eq!(domains[1].domain, "rack-x");
    assert_eq!(domains[1].pods, 0);
    assert_eq!(domains[1].short.len(), 4, "{domains:?}");

    let s = review(&w, "gang", &labels, &st, "2026-01-01T00:00:00Z").unwrap();
    assert_eq!(s.state, "Ready", "{s:?}");
    assert_eq!(
        s.pod_set_updates[0].node_selector,
        BTreeMap::from([(KEY.to_string(), "rack-y".to_string())])
    );
    assert!(
        s.message.contains("rack-y: 4 of 4 pods") && s.message.contains("nodeSelector"),
        "{}",
        s.message
    );
}

#[test]
fn a_reservation_on_the_rack_without_the_nics_is_sent_back() {
    let (st, labels, template, pods) = racks(JOB);
    let roots: Vec<String> = (0..4).map(|i| i.to_string()).collect();
    let status = |prefix: &str| {
        json!({
            "conditions": [{"type": "QuotaReserved", "status": "True"}],
            "admission": {"podSetAssignments": [{"name": "main", "topologyAssignment": {
                "levels": ["kubernetes.io/hostname"],
                "slices": [{"domainCount": 4,
                    "valuesPerLevel": [{"individual": {"prefix": prefix, "roots": roots}}],
                    "podCounts": {"universal": 1}}]}}]},
            "admissionChecks": [{"name": "gang", "state": "Pending", "message": ""}],
        })
    };
    let on_x = workload(&template, pods, status("rack-x-"));
    let s = review(&on_x, "gang", &labels, &st, "T").unwrap();
    assert_eq!(s.state, "Retry", "{s:?}");
    assert_eq!(s.requeue_after_seconds, None);
    assert!(
        s.message.contains("rack-x-0 holds 0 of its 1 pods"),
        "{}",
        s.message
    );
    let on_y = workload(&template, pods, status("rack-y-"));
    let s = review(&on_y, "gang", &labels, &st, "T").unwrap();
    assert_eq!(s.state, "Ready", "{s:?}");
    assert!(s.pod_set_updates.is_empty());
}

#[test]
fn a_node_holds_as_many_pods_as_its_free_pairs_allow() {
    // Two pairs per pod on any rails (nothing held): a free dgx-h100 holds four pods, so
    // one node holds the gang of four.
    let job = JOB
        .replace("pairsPerPod: 4", "pairsPerPod: 2")
        .replace("sameRails: true", "sameRails: false")
        .replace("rails: [0, 1, 2, 3]\n", "");
    let (st, labels, template, pods) = racks(&job);
    let w = workload(&template, pods, json!({}));
    let GangVerdict::Domains { domains, .. } = judge_gang(&w, &labels, &st) else {
        panic!("not judged")
    };
    let y = domains.iter().find(|d| d.domain == "rack-y").unwrap();
    assert!(y.holds(), "{domains:?}");
    assert_eq!(y.nodes, vec![("rack-y-0".to_string(), 4)], "{domains:?}");
}
