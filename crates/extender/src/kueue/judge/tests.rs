#![allow(clippy::unwrap_used)]

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Value, json};

use super::*;

const KEY: &str = "nvidia.com/gpu.clique";

/// A judge whose nodes hold a fixed number of pods at fixed ranks (absent: 0, "no pairs").
#[derive(Default)]
struct Fake {
    nodes: BTreeMap<String, (u32, i64)>,
    claims: Option<GangClaims>,
}

impl Fake {
    fn with(nodes: &[(&str, u32, i64)]) -> Fake {
        Fake {
            nodes: nodes
                .iter()
                .map(|(n, p, r)| (n.to_string(), (*p, *r)))
                .collect(),
            claims: None,
        }
    }
}

fn resolved() -> Resolved {
    Resolved {
        specs: Vec::new(),
        foreign: false,
        own: BTreeSet::new(),
        from_template: 1,
        hash: 1,
    }
}

impl GangJudge for Fake {
    fn claims(&self, _: &Workload, _: &PodSet) -> GangClaims {
        self.claims.clone().unwrap_or(GangClaims::Judge(resolved()))
    }
    fn take(&self, _: &Resolved, node: &str, max: u32) -> NodeTake {
        let (pods, ranks) = self.nodes.get(node).copied().unwrap_or((0, 0));
        NodeTake {
            pods: pods.min(max),
            ranks,
            why: (pods < max).then(|| "no 4 pairs at PXB on rails 4-7".to_string()),
        }
    }
}

fn racks() -> NodeLabels {
    let mut n = NodeLabels::new();
    for r in ["x", "y"] {
        for i in 0..3 {
            n.insert(
                format!("rack-{r}-{i}"),
                BTreeMap::from([(KEY.to_string(), format!("rack-{r}"))]),
            );
        }
    }
    n.insert("unlabelled".into(), BTreeMap::new());
    n
}

fn workload(checks: Value, status: Value) -> Workload {
    let mut status = status;
    status["admissionChecks"] = checks;
    serde_json::from_value(json!({
        "metadata": {"name": "job-train", "namespace": "gang", "resourceVersion": "7"},
        "spec": {"podSets": [{"name": "main", "count": 3, "template": {"spec": {}},
                              "topologyRequest": {"required": KEY}}]},
        "status": status,
    }))
    .unwrap()
}

fn pending() -> Value {
    json!([{"name": "gang", "state": "Pending", "message": ""}, {"name": "other", "state": "Ready", "message": ""}])
}

fn reserved_on(nodes: &[&str]) -> Value {
    json!({
        "conditions": [{"type": "QuotaReserved", "status": "True"}],
        "admission": {"podSetAssignments": [{"name": "main", "topologyAssignment": {
            "levels": [KEY, "kubernetes.io/hostname"],
            "slices": [{"domainCount": nodes.len(),
                        "valuesPerLevel": [{"universal": "r"}, {"individual": {"roots": nodes}}],
                        "podCounts": {"universal": 1}}]}}]},
    })
}

/// Rack x holds nothing (no PIX NIC on the rails), rack y one pod per node.
fn bad_x_good_y() -> Fake {
    Fake::with(&[("rack-y-0", 1, 0), ("rack-y-1", 1, 0), ("rack-y-2", 1, 0)])
}

#[test]
fn the_domain_that_holds_the_whole_gang_comes_first_and_the_other_says_why_not() {
    let w = workload(pending(), json!({}));
    let GangVerdict::Domains { key, domains } = judge_gang(&w, &racks(), &bad_x_good_y()) else {
        panic!("not judged")
    };
    assert_eq!(key.as_deref(), Some(KEY));
    let names: Vec<&str> = domains.iter().map(|d| d.domain.as_str()).collect();
    assert_eq!(names, ["rack-y", "rack-x"]);
    assert!(domains[0].holds() && !domains[1].holds());
    assert_eq!(
        domains[0].describe(),
        "rack-y: 3 of 3 pods on rack-y-0, rack-y-1, rack-y-2"
    );
    assert_eq!(
        domains[1].describe(),
        "rack-x: 0 of 3 pods (rack-x-0, rack-x-1, rack-x-2: no 4 pairs at PXB on rails 4-7)"
    );
}

#[test]
fn among_domains_that_hold_the_gang_better_pairs_then_less_spare_room_win() {
    let w = workload(pending(), json!({}));
    // x holds the gang at rank 1 per pod, y at rank 0: y wins on pairs.
    let f = Fake::with(&[
        ("rack-x-0", 1, 1),
        ("rack-x-1", 1, 1),
        ("rack-x-2", 1, 1),
        ("rack-y-0", 1, 0),
        ("rack-y-1", 1, 0),
        ("rack-y-2", 1, 0),
    ]);
    let GangVerdict::Domains { domains, .. } = judge_gang(&w, &racks(), &f) else {
        panic!()
    };
    assert_eq!(domains[0].domain, "rack-y");
    // Equal pairs: the domain with less room left over (x: 0 spare, y: 3 spare) wins.
    let f = Fake::with(&[
        ("rack-x-0", 1, 0),
        ("rack-x-1", 1, 0),
        ("rack-x-2", 1, 0),
        ("rack-y-0", 2, 0),
        ("rack-y-1", 2, 0),
        ("rack-y-2", 2, 0),
    ]);
    let GangVerdict::Domains { domains, .. } = judge_gang(&w, &racks(), &f) else {
        panic!()
    };
    assert_eq!(
        (domains[0].domain.as_str(), domains[0].spare),
        ("rack-x", 0)
    );
    assert_eq!((domains[1].pods, domains[1].spare), (3, 3));
}

#[test]
fn a_node_that_holds_several_pods_counts_them_all() {
    let w = workload(pending(), json!({}));
    let f = Fake::with(&[("rack-x-0", 3, 0)]);
    let GangVerdict::Domains { domains, .. } = judge_gang(&w, &racks(), &f) else {
        panic!()
    };
    assert_eq!(domains[0].domain, "rack-x");
    assert_eq!(domains[0].nodes, vec![("rack-x-0".to_string(), 3)]);
    assert_eq!(domains[0].describe(), "rack-x: 3 of 3 pods on rack-x-0×3");
}

#[test]
fn before_the_reservation_the_check_pins_the_domain_that_holds_the_gang() {
    let w = workload(pending(), json!({}));
    let s = review(&w, "gang", &racks(), &bad_x_good_y(), "T1").unwrap();
    assert_eq!(s.state, READY);
    assert_eq!(s.last_transition_time.as_deref(), Some("T1"));
    assert_eq!(s.pod_set_updates.len(), 1);
    assert_eq!(s.pod_set_updates[0].name, "main");
    assert_eq!(
        s.pod_set_updates[0].node_selector,
        BTreeMap::from([(KEY.to_string(), "rack-y".to_string())])
    );
    assert!(s.message.contains("rack-y: 3 of 3 pods"), "{}", s.message);
    // Once written, the same review changes nothing.
    let again = workload(json!([serde_json::to_value(&s).unwrap()]), json!({}));
    assert_eq!(
        review(&again, "gang", &racks(), &bad_x_good_y(), "T2"),
        None
    );
    // A check the workload does not carry is not reviewed.
    assert_eq!(review(&w, "absent", &racks(), &bad_x_good_y(), "T1"), None);
}

#[test]
fn before_the_reservation_no_domain_holding_the_gang_holds_the_workload_back() {
    let w = workload(pending(), json!({}));
    let none = Fake::with(&[("rack-y-0", 1, 0), ("rack-y-1", 1, 0)]);
    let s = review(&w, "gang", &racks(), &none, "T1").unwrap();
    assert_eq!(s.state, RETRY);
    assert_eq!(s.requeue_after_seconds, None);
    assert!(s.pod_set_updates.is_empty());
    assert!(
        s.message.starts_with("no domain holds the whole gang: rack-y: 2 of 3 pods (rack-y-2: no 4 pairs at PXB on rails 4-7) | rack-x: 0 of 3 pods"),
        "{}",
        s.message
    );
    // When the devices free up, the Retry becomes Ready with the pin.
    let held = workload(json!([serde_json::to_value(&s).unwrap()]), json!({}));
    let s = review(&held, "gang", &racks(), &bad_x_good_y(), "T2").unwrap();
    assert_eq!((s.state.as_str(), s.pod_set_updates.len()), (READY, 1));
}

#[test]
fn a_reservation_on_nodes_that_cannot_hold_the_gang_is_sent_back_and_one_that_can_is_kept() {
    let on_x = workload(
        pending(),
        reserved_on(&["rack-x-0", "rack-x-1", "rack-x-2"]),
    );
    assert!(on_x.quota_reserved());
    let s = review(&on_x, "gang", &racks(), &bad_x_good_y(), "T1").unwrap();
    assert_eq!(s.state, RETRY);
    assert_eq!(s.requeue_after_seconds, None);
    assert!(
        s.message.contains("rack-x-0 holds 0 of its 1 pods of main"),
        "{}",
        s.message
    );
    // Kueue evicts it and sets the check back to Pending, the quota still reserved: the
    // check holds it again, with a requeue delay, until the domain is pinned.
    let mut evicting = on_x.clone();
    evicting
        .status
        .conditions
        .push(serde_json::from_value(json!({"type": "Evicted", "status": "True"})).unwrap());
    assert!(evicting.evicted());
    let s = review(&evicting, "gang", &racks(), &bad_x_good_y(), "T2").unwrap();
    assert_eq!(
        (s.state.as_str(), s.requeue_after_seconds),
        (RETRY, Some(RETRY_AFTER_S))
    );
    assert!(
        s.message.starts_with("evicted to be placed again"),
        "{}",
        s.message
    );
    let on_y = workload(
        pending(),
        reserved_on(&["rack-y-0", "rack-y-1", "rack-y-2"]),
    );
    let s = review(&on_y, "gang", &racks(), &bad_x_good_y(), "T1").unwrap();
    assert_eq!(s.state, READY);
    assert!(s.pod_set_updates.is_empty());
    assert_eq!(
        s.message,
        "the assigned nodes hold the gang: rack-y-0, rack-y-1, rack-y-2"
    );
    // Retry or Ready on a reserved workload: Kueue acts, the check waits.
    for state in [RETRY, READY] {
        let w = workload(
            json!([{"name": "gang", "state": state, "message": ""}]),
            reserved_on(&["rack-x-0", "rack-x-1", "rack-x-2"]),
        );
        assert_eq!(review(&w, "gang", &racks(), &bad_x_good_y(), "T"), None);
    }
}

/// Kueue's scheduler reserved the quota from a copy of the workload taken before the pin
/// landed: TAS chose rack x while the check pinned rack y, and the pods could never
/// schedule. The reservation is sent back; one inside the pinned domain is kept.
#[test]
fn a_reservation_outside_the_pinned_domain_is_sent_back() {
    let pinned = json!([{"name": "gang", "state": "Ready", "message": "m",
        "podSetUpdates": [{"name": "main", "nodeSelector": {KEY: "rack-y"}}]}]);
    let w = workload(
        pinned.clone(),
        reserved_on(&["rack-x-0", "rack-x-1", "rack-x-2"]),
    );
    let s = review(&w, "gang", &racks(), &bad_x_good_y(), "T").unwrap();
    assert_eq!(s.state, RETRY);
    assert!(s.pod_set_updates.is_empty());
    assert!(
        s.message.starts_with(&format!(
            "quota was reserved on rack-x-0, rack-x-1, rack-x-2 outside the pinned domain {KEY}=rack-y"
        )),
        "{}",
        s.message
    );
    let inside = workload(pinned, reserved_on(&["rack-y-0", "rack-y-1", "rack-y-2"]));
    assert_eq!(
        review(&inside, "gang", &racks(), &bad_x_good_y(), "T"),
        None
    );
}

#[test]
fn a_pin_that_no_longer_holds_the_gang_is_dropped_through_retry() {
    let pinned = json!([{"name": "gang", "state": "Ready", "message": "m",
        "podSetUpdates": [{"name": "main", "nodeSelector": {KEY: "rack-y"}}]}]);
    let w = workload(pinned, json!({}));
    assert_eq!(review(&w, "gang", &racks(), &bad_x_good_y(), "T"), None);
    let gone = Fake::with(&[("rack-y-0", 1, 0)]);
    let s = review(&w, "gang", &racks(), &gone, "T").unwrap();
    assert_eq!(s.state, RETRY);
    assert!(s.pod_set_updates.is_empty());
    assert!(
        s.message
            .starts_with("the pinned domain no longer holds the gang (rack-y: 1 of 3"),
        "{}",
        s.message
    );
}

#[test]
fn claims_of_no_known_class_pass_and_unread_claims_wait() {
    let w = workload(pending(), json!({}));
    let not_ours = Fake {
        claims: Some(GangClaims::NotOurs),
        ..Fake::default()
    };
    let s = review(&w, "gang", &racks(), &not_ours, "T").unwrap();
    assert_eq!(s.state, READY);
    assert!(s.message.contains("nothing to check"));
    let wait = Fake {
        claims: Some(GangClaims::Wait("template gang/train-pairs".into())),
        ..Fake::default()
    };
    let s = review(&w, "gang", &racks(), &wait, "T").unwrap();
    assert_eq!(
        (s.state.as_str(), s.message.as_str()),
        (PENDING, "pod set main: template gang/train-pairs")
    );
}

#[test]
fn finished_or_inactive_workloads_are_left_alone() {
    let mut w = workload(
        pending(),
        json!({"conditions": [{"type": "Finished", "status": "True"}]}),
    );
    assert_eq!(review(&w, "gang", &racks(), &bad_x_good_y(), "T"), None);
    w.status.conditions.clear();
    w.spec.active = Some(false);
    assert_eq!(review(&w, "gang", &racks(), &bad_x_good_y(), "T"), None);
}

#[test]
fn long_messages_are_clipped_on_a_character_boundary() {
    let s = clip("é".repeat(MESSAGE_LIMIT));
    assert!(s.len() <= MESSAGE_LIMIT + '…'.len_utf8());
    assert!(s.ends_with('…'));
}
