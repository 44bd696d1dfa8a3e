//! `judge_all`, the one entry point both HTTP verbs and the offline decision answer from:
//! for a device-plugin pod its verdicts are the decider's filter and prioritize answers,
//! for a DRA pod the slices' verdicts scored against each other; offline (no DRA wing)
//! every pod takes the device-plugin path and nothing is counted.

use std::sync::RwLock;
use std::time::{Duration, Instant, SystemTime};

use crate::common::*;
use crate::dra::bare_app;
use serde_json::{Value, json};
use topoalign_dra::{
    claim::{ClaimSpec, claim_template},
    publish::{PublishOptions, resource_slices},
};
use topoalign_extender::{
    Decider, DraNode, Judgement, Judges, Ruling, Seen as Sight, Turns, Verb, judge_all,
    pod_request, priorities,
};
use topoalign_kube_types::kubelet_settings::Policy;
use topoalign_tm::ResourceMap;

const AMD: &str = "amd.com/gpu";
const VF: &str = "nvidia.com/sriov-rdma-vf";

/// One candidate as `judge_all` gives it: name, passes, score, refusal message.
type Seen = (String, bool, i64, Option<String>);

/// Every candidate as `judge_all` gives them, and the wing that judged.
fn verdicts(
    judges: &Judges<'_>,
    verb: Verb,
    pod: &Value,
    names: &[&str],
) -> (Judgement, Vec<Seen>) {
    let mut out = Vec::new();
    let mut order = Vec::new();
    let judged = judge_all(judges, verb, pod, names, None, |v| {
        order.push(v.index);
        out.push((
            v.name.to_string(),
            v.passes(),
            v.score,
            v.ruling.refusal().map(|r| r.message.to_string()),
        ));
    })
    .unwrap();
    assert_eq!(order, (0..names.len()).collect::<Vec<_>>(), "in order");
    (judged, out)
}

/// Adds two mi300x-8 nodes: "free" (restricted policy, nothing in use) and "half" (no
/// policy, NUMA node 0's GPUs in use).
fn free_and_half(st: &mut topoalign_extender::ClusterState, i: &mut topoalign_extender::Interner) {
    st.upsert_node("free", node(i, "mi300x-8", Policy::Restricted, &[], &[]));
    st.upsert_node("half", node(i, "mi300x-8", Policy::None, &MI_GPUS_N0, &[]));
}

#[test]
fn device_plugin_pods_get_the_deciders_filter_and_prioritize_answers() {
    let mut i = topoalign_extender::Interner::default();
    let mut st = state();
    let split = [MI_GPUS_N0[0], MI_GPUS_N0[1], MI_GPUS_N1[0], MI_GPUS_N1[1]];
    st.upsert_node(
        "split",
        node(&mut i, "mi300x-8", Policy::Restricted, &split, &[]),
    );
    free_and_half(&mut st, &mut i);
    st.upsert_node(
        "broken",
        topoalign_extender::NodeEntry::Broken("bad".into()),
    );
    let decider = Decider::new(ResourceMap::default(), 0);
    let pod = pod("p4", json!({AMD: 4, VF: 4}), json!({}));
    let req = pod_request(&pod, decider.resources()).unwrap();
    let names = ["split", "free", "half", "broken", "unknown"];
    let now = SystemTime::now();
    let (f, _) = decider.filter(&st, &req, &names, now);
    let (p, _) = decider.prioritize(&st, &req, &names, now);

    let state = RwLock::new(st);
    let judges = Judges {
        state: &state,
        decider: &decider,
        dra: None,
        metrics: None,
        budget: Duration::ZERO,
        turns: None,
    };
    let (judged, got) = verdicts(&judges, Verb::Explain, &pod, &names);
    assert!(matches!(judged, Judgement::Plugin(r) if r.key == req.key));
    let passes: Vec<bool> = got.iter().map(|g| g.1).collect();
    assert_eq!(passes, f.passed);
    assert_eq!(passes, [false, true, true, true, true]);
    let scores: Vec<i64> = got.iter().map(|g| g.2).collect();
    let expected: Vec<i64> = p.scores.iter().map(|h| h.score).collect();
    assert_eq!(scores, expected);
    assert_eq!(got[0].3.as_deref(), Some(f.failed["split"].as_str()));

    // A pod that cannot be read is an error, not a verdict.
    let bad = json!({"metadata": {"name": "b"}, "spec": {"containers": [
        {"name": "m", "resources": {"limits": {AMD: "x"}}}]}});
    let err = judge_all(&judges, Verb::Explain, &bad, &names, None, |_| {
        panic!("no verdict for a pod that cannot be read")
    });
    assert!(err.is_err());
}

#[test]
fn dra_pods_are_judged_on_slices_and_scored_against_each_other() {
    let app = bare_app();
    {
        let mut st = app.dra.write();
        for (node, profile) in [("mi", "mi300x-8"), ("gb", "gb300-4")] {
            let topo = topoalign_profiles::get(profile).unwrap();
            for s in resource_slices(&topo, node, &PublishOptions::default()).unwrap() {
                st.apply_slice(&s);
            }
        }
        let mut spec = ClaimSpec::pairs(1);
        spec.max_rank = Some(1);
        let mut t = claim_template(&spec).unwrap();
        t.metadata.name = Some("pxb-1".into());
        t.metadata.namespace = Some("ns".into());
        st.apply_template(&t);
    }
    let pod = json!({
        "metadata": {"namespace": "ns", "name": "p", "uid": "u1"},
        "spec": {"containers": [{"name": "c", "resources": {"claims": [{"name": "g"}]}}],
                 "resourceClaims": [{"name": "g", "resourceClaimTemplateName": "pxb-1"}]},
    });
    let names = ["mi", "gb", "plain"];
    let before = app.metrics.render();
    let (judged, got) = verdicts(&app.judges(), Verb::Filter, &pod, &names);
    assert!(matches!(judged, Judgement::Dra));
    // gb300-4 publishes NODE pairs only: refused; the node without slices passes.
    let passes: Vec<bool> = got.iter().map(|g| g.1).collect();
    assert_eq!(passes, [true, false, true]);
    assert!(got[1].3.as_deref().unwrap().contains("cannot be allocated"));
    assert_ne!(app.metrics.render(), before, "the filter call is counted");

    // The scores are the DRA verdicts scored against each other.
    let mut nodes: Vec<Option<DraNode>> = Vec::new();
    let foreign = match app.dra.resolve(&pod) {
        topoalign_extender::PodClaims::Judge(r) => {
            app.dra
                .visit(&r, &names, None, |_, _, v| nodes.push(Some(v.clone())));
            r.foreign
        }
        other => panic!("claims not judged: {other:?}"),
    };
    let refs: Vec<Option<&DraNode>> = nodes.iter().map(Option::as_ref).collect();
    let expected = priorities(&names, &refs, foreign, &topoalign_extender::Waiting::none());
    let (_, got) = verdicts(&app.judges(), Verb::Prioritize, &pod, &names);
    let scores: Vec<i64> = got.iter().map(|g| g.2).collect();
    assert_eq!(scores, expected);
    assert_eq!(scores[1], 0, "a refused node scores 0");
    assert!(
        scores[0] > scores[2],
        "a fitting node beats the neutral one"
    );

    // Without the DRA wing the same pod takes the device-plugin path: it asks no
    // device, so every node passes with the neutral score.
    let judges = Judges {
        dra: None,
        metrics: None,
        ..app.judges()
    };
    let mut rulings = Vec::new();
    let judged = judge_all(&judges, Verb::Explain, &pod, &names, None, |v| {
        rulings.push(matches!(v.ruling, Ruling::Plugin(_)) && v.passes() && v.score == 5);
    })
    .unwrap();
    assert!(matches!(judged, Judgement::Plugin(_)));
    assert_eq!(rulings, [true, true, true]);
}

/// A call with node states to judge waits for a turn: while every turn is held it judges
/// nothing within its budget (its nodes pass neutral, over budget, and the cache learns
/// nothing); once a turn is free the same call judges and fills the cache; a call the
/// cache answers needs no turn at all.
#[test]
fn a_call_without_a_turn_before_its_deadline_judges_nothing() {
    let mut i = topoalign_extender::Interner::default();
    let mut st = state();
    free_and_half(&mut st, &mut i);
    let decider = Decider::new(ResourceMap::default(), 1 << 10);
    let state = RwLock::new(st);
    let turns = Turns::new(1);
    let judges = Judges {
        state: &state,
        decider: &decider,
        dra: None,
        metrics: None,
        budget: Duration::from_millis(20),
        turns: Some(&turns),
    };
    let pod = pod("p2", json!({AMD: 2, VF: 2}), json!({}));
    let names = ["free", "half"];
    let over_budget = |deadline| {
        let mut seen = Vec::new();
        judge_all(&judges, Verb::Filter, &pod, &names, Some(deadline), |v| {
            seen.push(matches!(v.ruling, Ruling::Plugin(Sight::OverBudget)));
        })
        .unwrap();
        seen
    };
    let held = turns.take(None).unwrap();
    let t0 = Instant::now();
    assert_eq!(over_budget(t0 + Duration::from_millis(20)), [true, true]);
    assert!(
        t0.elapsed() >= Duration::from_millis(20),
        "it waited its budget"
    );
    assert_eq!(decider.cached(), 0, "nothing judged, nothing cached");
    drop(held);
    assert_eq!(
        over_budget(Instant::now() + Duration::from_secs(5)),
        [false, false]
    );
    assert_eq!(decider.cached(), 2);
    // Cached now: no turn needed even while one is held.
    let _held = turns.take(None).unwrap();
    assert_eq!(over_budget(Instant::now()), [false, false]);
}
