//! Unit tests of the DRA state: claims found, devices held, the shared cache.

use super::*;
use crate::dra::judge::DraVerdict;
use crate::dra::shared::DraShared;
use crate::dra::verdict::{DraNeutral, DraNode, PodClaims, Resolved};
use serde_json::{Value, json};
use topoalign_dra::{
    alloc::DEFAULT_BUDGET,
    claim::{ClaimSpec, claim_spec},
    publish::{PublishOptions, device_classes, resource_slices},
};

fn state_with(nodes: &[(&str, &str)]) -> DraState {
    let mut st = DraState::default();
    for c in device_classes() {
        st.apply_class(&c);
    }
    for (node, profile) in nodes {
        let topo = topoalign_profiles::get(profile).unwrap();
        for s in resource_slices(&topo, node, &PublishOptions::default()).unwrap() {
            st.apply_slice(&s);
        }
    }
    st
}

fn pairs(n: u32) -> ResourceClaimSpec {
    claim_spec(&ClaimSpec::pairs(n)).unwrap()
}

/// A claim object, allocated to `devices` of `node` when given.
fn claim(
    ns: &str,
    name: &str,
    owner: &str,
    spec: ResourceClaimSpec,
    node: &str,
    devices: &[String],
) -> ResourceClaim {
    let results: Vec<Value> = devices
        .iter()
        .map(|d| json!({"request": "pairs", "driver": DRIVER_NAME, "pool": node, "device": d}))
        .collect();
    let mut v = json!({
        "metadata": {"namespace": ns, "name": name,
                     "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": "p", "uid": owner}]},
        "spec": spec,
    });
    if !devices.is_empty() {
        v["status"] = json!({"allocation": {"devices": {"results": results}}});
    }
    serde_json::from_value(v).unwrap()
}

fn pod(claims: Value, statuses: Value) -> Value {
    json!({"metadata": {"namespace": "ns", "name": "p", "uid": "u1"},
           "spec": {"containers": [], "resourceClaims": claims},
           "status": {"resourceClaimStatuses": statuses}})
}

fn resolved(st: &DraState, p: &Value) -> Resolved {
    match st.resolve(p) {
        PodClaims::Judge(r) => r,
        other => panic!("{other:?}"),
    }
}

/// The devices the stock allocator would give `n` pairs on an empty `node`.
fn first_pairs(st: &DraState, node: &str, n: u32) -> Vec<String> {
    let slices = &st.nodes[node].slices;
    match crate::dra::judge::judge(&[pairs(n)], &st.ours, slices, node, &BTreeSet::new()).unwrap() {
        DraVerdict::Fit { devices, .. } => devices.into_iter().map(|d| d.device).collect(),
        other => panic!("{other:?}"),
    }
}

#[test]
fn claims_are_found_by_name_and_by_template() {
    let mut st = state_with(&[("n1", "mi300x-8")]);
    // By name.
    st.apply_claim(&claim("ns", "mine", "other", pairs(2), "n1", &[]));
    let r = resolved(
        &st,
        &pod(
            json!([{"name": "a", "resourceClaimName": "mine"}]),
            json!([]),
        ),
    );
    assert_eq!(r.specs, vec![pairs(2)]);
    assert!(r.own.contains(&("ns".into(), "mine".into())));
    // By name, not seen yet: neutral, never guessed.
    let p = pod(
        json!([{"name": "a", "resourceClaimName": "later"}]),
        json!([]),
    );
    assert!(
        matches!(st.resolve(&p), PodClaims::Unjudged("dra_claim_unseen", ref w) if w.contains("ns/later"))
    );
    // From a template, the generated claim not created yet: the template's spec.
    let t: ResourceClaimTemplate = serde_json::from_value(json!({
        "metadata": {"namespace": "ns", "name": "four"}, "spec": {"spec": pairs(4)}}))
    .unwrap();
    st.apply_template(&t);
    let p = pod(
        json!([{"name": "g", "resourceClaimTemplateName": "four"}]),
        json!([]),
    );
    let r = resolved(&st, &p);
    assert_eq!((r.specs.clone(), r.from_template), (vec![pairs(4)], 1));
    // The generated claim exists and is the pod's: its own spec.
    st.apply_claim(&claim("ns", "p-g-x1", "u1", pairs(3), "n1", &[]));
    let p = pod(
        json!([{"name": "g", "resourceClaimTemplateName": "four"}]),
        json!([{"name": "g", "resourceClaimName": "p-g-x1"}]),
    );
    let r = resolved(&st, &p);
    assert_eq!((r.specs.clone(), r.from_template), (vec![pairs(3)], 0));
    // A claim of that name owned by another pod is not this pod's: the template.
    st.apply_claim(&claim("ns", "p-g-x1", "someone-else", pairs(3), "n1", &[]));
    assert_eq!(resolved(&st, &p).specs, vec![pairs(4)]);
    // Status says no claim is needed.
    let p = pod(
        json!([{"name": "g", "resourceClaimTemplateName": "four"}]),
        json!([{"name": "g"}]),
    );
    assert_eq!(st.resolve(&p), PodClaims::NotOurs);
    // No claims, or only other drivers' classes: not the DRA path's pod.
    assert_eq!(
        st.resolve(&json!({"spec": {"containers": []}})),
        PodClaims::NotOurs
    );
    let mut foreign = pairs(1);
    if let Some(r) = foreign.devices.as_mut().and_then(|d| d.requests.as_mut()) {
        r[0].exactly.as_mut().unwrap().device_class_name = "gpu.nvidia.com".into();
    }
    st.apply_claim(&claim("ns", "nv", "u1", foreign, "n1", &[]));
    let p = pod(json!([{"name": "a", "resourceClaimName": "nv"}]), json!([]));
    assert_eq!(st.resolve(&p), PodClaims::NotOurs);
    // A malformed list is named.
    let p = pod(json!([{"name": 3}]), json!([]));
    assert!(
        matches!(st.resolve(&p), PodClaims::Unjudged("dra_bad_pod", ref w) if w.contains("spec.resourceClaims"))
    );
}

#[test]
fn held_devices_are_taken_except_the_pods_own() {
    let mut st = state_with(&[("n1", "mi300x-8")]);
    let all = first_pairs(&st, "n1", 8);
    // Another pod's allocated claim holds every GPU: a 1-pair claim cannot fit.
    st.apply_claim(&claim("ns", "theirs", "u9", pairs(8), "n1", &all));
    assert_eq!(st.held_count(), 8);
    st.apply_claim(&claim("ns", "mine", "u1", pairs(1), "n1", &[]));
    let p = pod(
        json!([{"name": "a", "resourceClaimName": "mine"}]),
        json!([]),
    );
    let r = resolved(&st, &p);
    assert!(matches!(st.judge_node(&r, "n1"), DraNode::Reject(ref m) if m.contains("claim 0")));
    // The pod's own claim allocated to those devices (the pod scheduled again): they
    // are not counted against it.
    st.delete_claim(&("ns".into(), "theirs".into()));
    assert_eq!(st.held_count(), 0);
    st.apply_claim(&claim("ns", "mine", "u1", pairs(8), "n1", &all));
    let r = resolved(&st, &p);
    match st.judge_node(&r, "n1") {
        DraNode::Fit(f) => assert_eq!((f.ranks.len(), f.capacity_before), (8, 8)),
        other => panic!("{other:?}"),
    }
    // Deleting the claim frees its devices for everyone.
    st.retain_claims(&BTreeSet::new());
    assert_eq!((st.held_count(), st.claim_count()), (0, 0));
}

#[test]
fn nodes_without_slices_and_exhausted_searches_are_neutral() {
    let mut st = state_with(&[("n1", "dgx-h100")]);
    st.apply_claim(&claim("ns", "mine", "u1", pairs(2), "n1", &[]));
    let p = pod(
        json!([{"name": "a", "resourceClaimName": "mine"}]),
        json!([]),
    );
    let r = resolved(&st, &p);
    assert_eq!(
        st.judge_node(&r, "elsewhere"),
        DraNode::Neutral(DraNeutral::NoSlices)
    );
    // A free node: 8 pairs before, 6 after the pod's two.
    assert!(matches!(
        st.judge_node(&r, "n1"),
        DraNode::Fit(f) if (f.capacity_before, f.capacity_after, f.gpus) == (8, 6, 2)
    ));
    // A budget too small for the search: no judgement, never a rejection.
    st.budget = 1;
    let v = st.judge_node(&r, "n1");
    assert!(
        matches!(v, DraNode::Neutral(DraNeutral::Budget(_))),
        "{v:?}"
    );
    assert_eq!(v.outcome(), "dra_budget");
    // Slices removed by a re-list: the node is no longer a topoalign node.
    st.budget = DEFAULT_BUDGET;
    st.retain_slices(&BTreeSet::new());
    assert_eq!(st.node_count(), 0);
    assert_eq!(
        st.judge_node(&r, "n1"),
        DraNode::Neutral(DraNeutral::NoSlices)
    );
}

#[test]
fn a_slice_with_an_unreadable_counter_is_neutral_and_named() {
    let mut st = state_with(&[("n1", "gb300-4")]);
    let mut bad = st.nodes["n1"].slices[0].clone();
    let set = bad
        .spec
        .shared_counters
        .as_mut()
        .unwrap()
        .first_mut()
        .unwrap();
    let (counter, value) = set.counters.iter_mut().next().unwrap();
    let counter = counter.clone();
    value.value.0 = "lots".into();
    st.apply_slice(&bad);
    st.apply_template(&{
        let mut t = topoalign_dra::claim::claim_template(&ClaimSpec::pairs(1)).unwrap();
        t.metadata.namespace = Some("ns".into());
        t.metadata.name = Some("one".into());
        t
    });
    let p = pod(
        json!([{"name": "a", "resourceClaimTemplateName": "one"}]),
        json!([]),
    );
    let r = resolved(&st, &p);
    match st.judge_node(&r, "n1") {
        DraNode::Neutral(n @ DraNeutral::Error(_)) => {
            let why = n.why();
            let slice = bad.metadata.name.as_deref().unwrap();
            assert!(why.contains(slice) && why.contains(&counter), "{why}");
            assert_eq!(n.label(), "dra_error");
        }
        other => panic!("a bad counter must not judge the node: {other:?}"),
    }
}

#[test]
fn the_shared_cache_follows_changes() {
    let shared = DraShared::new();
    {
        let mut st = shared.write();
        *st = state_with(&[("n1", "mi300x-8"), ("n2", "gb300-4")]);
        st.apply_claim(&claim("ns", "mine", "u1", pairs(1), "n1", &[]));
    }
    let p = pod(
        json!([{"name": "a", "resourceClaimName": "mine"}]),
        json!([]),
    );
    let PodClaims::Judge(r) = shared.resolve(&p) else {
        panic!()
    };
    let run = |r: &Resolved| {
        let mut out = Vec::new();
        shared.visit(r, &["n1", "n2", "n3"], None, |_, n, v| {
            out.push((n.to_string(), v.clone()))
        });
        out
    };
    let first = run(&r);
    // mi300x-8 has PIX pairs (rank 0), gb300-4 only NODE pairs (rank 3).
    assert!(matches!(&first[0].1, DraNode::Fit(f) if f.ranks == [0] && f.capacity_before == 8));
    assert!(matches!(&first[1].1, DraNode::Fit(f) if f.ranks == [3] && f.capacity_before == 4));
    assert_eq!(first[2].1, DraNode::Neutral(DraNeutral::NoSlices));
    assert_eq!(run(&r), first, "cached verdicts are the same");
    // n1's PIX pairs all taken by another claim: the cached verdict is not reused.
    let all = first_pairs(&shared.read(), "n1", 8);
    shared
        .write()
        .apply_claim(&claim("ns", "theirs", "u9", pairs(8), "n1", &all));
    let after = run(&r);
    assert!(matches!(&after[0].1, DraNode::Reject(_)), "{:?}", after[0]);
}
/// The fixture of other drivers' slices and classes (NVIDIA's GPU driver, dranet).
fn foreign_state(drivers: Option<&[&str]>) -> DraState {
    let list: Value = serde_json::from_str(include_str!(
        "../../../tests/fixtures/gb300-nvidia-dranet.json"
    ))
    .unwrap();
    let mut st = state_with(&[("n1", "gb300-4")]);
    st.keep_drivers(drivers.map(|d| d.iter().map(|s| s.to_string()).collect()));
    for item in list["items"].as_array().unwrap() {
        match item["kind"].as_str() {
            Some("ResourceSlice") => st.apply_slice(&serde_json::from_value(item.clone()).unwrap()),
            _ => st.apply_class(&serde_json::from_value(item.clone()).unwrap()),
        }
    }
    st
}

fn gpu_nic_claim(class_nic: &str) -> ResourceClaimSpec {
    serde_json::from_value(json!({"devices": {"requests": [
        {"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com"}},
        {"name": "nic", "exactly": {"deviceClassName": class_nic}}]}}))
    .unwrap()
}

#[test]
fn claims_of_other_drivers_are_judged_on_their_slices() {
    let mut st = foreign_state(None);
    assert_eq!(st.node_count(), 3);
    st.apply_claim(&claim(
        "ns",
        "nv",
        "u1",
        gpu_nic_claim("dranet.net"),
        "n1",
        &[],
    ));
    let p = pod(json!([{"name": "a", "resourceClaimName": "nv"}]), json!([]));
    let r = resolved(&st, &p);
    assert!(r.foreign);
    // First fit on gb-new: GPU 0008 + NIC 0101, both NUMA 0: NODE.
    assert!(matches!(st.judge_node(&r, "gb-new"), DraNode::Fit(f) if f.ranks == [3]));
    // The older GPU driver publishes no NUMA node: neutral, counted as blind.
    let v = st.judge_node(&r, "gb-old");
    assert_eq!(v.outcome(), "dra_blind");
    // A topoalign node has no devices of these classes: the claim cannot be allocated.
    assert!(matches!(st.judge_node(&r, "n1"), DraNode::Reject(_)));
    assert_eq!(
        st.judge_node(&r, "nowhere"),
        DraNode::Neutral(DraNeutral::NoSlices)
    );
    // A class the cluster does not have (yet) beside a known one: not judged.
    st.apply_claim(&claim(
        "ns",
        "nv2",
        "u1",
        gpu_nic_claim("nope.example.com"),
        "n1",
        &[],
    ));
    let p = pod(
        json!([{"name": "a", "resourceClaimName": "nv2"}]),
        json!([]),
    );
    assert!(
        matches!(st.resolve(&p), PodClaims::Unjudged("dra_claim_unseen", ref w) if w.contains("DeviceClass nope.example.com"))
    );
    // topoalign's own claims still go their way (and are not judged on slices of
    // other drivers: a node with none of topoalign's slices is neutral).
    st.apply_claim(&claim("ns", "mine", "u1", pairs(1), "n1", &[]));
    let p = pod(
        json!([{"name": "a", "resourceClaimName": "mine"}]),
        json!([]),
    );
    let r = resolved(&st, &p);
    assert!(!r.foreign);
    assert!(matches!(st.judge_node(&r, "n1"), DraNode::Fit(_)));
    assert_eq!(
        st.judge_node(&r, "gb-new"),
        DraNode::Neutral(DraNeutral::NoSlices)
    );
}

#[test]
fn only_the_drivers_named_are_kept() {
    // --dra-drivers gpu.nvidia.com: dranet's slices are dropped, the claim's NIC
    // cannot be found on the node.
    let mut st = foreign_state(Some(&["gpu.nvidia.com"]));
    st.apply_claim(&claim(
        "ns",
        "nv",
        "u1",
        gpu_nic_claim("dranet.net"),
        "n1",
        &[],
    ));
    let p = pod(json!([{"name": "a", "resourceClaimName": "nv"}]), json!([]));
    let r = resolved(&st, &p);
    assert!(matches!(st.judge_node(&r, "gb-new"), DraNode::Reject(_)));
    // topoalign.dev is always kept.
    assert!(st.nodes.contains_key("n1"));
}

fn flat(k: judging::Keyed) -> Result<judging::Keys, DraNode> {
    match k {
        judging::Keyed::Keys(k) => Ok(k),
        judging::Keyed::Done(v) => Err(v),
    }
}

#[test]
fn keys_of_many_nodes_are_each_nodes_keys() {
    let names = ["n1", "n2", "n3", "n4", "n5"];
    let profiles = ["mi300x-8", "dgx-h100", "mi300x-8", "gb300-4", "mi300x-8"];
    let nodes: Vec<(&str, &str)> = names.iter().copied().zip(profiles).collect();
    let mut st = state_with(&nodes);
    let held = first_pairs(&st, "n1", 2);
    st.apply_claim(&claim("ns", "theirs", "u9", pairs(2), "n1", &held));
    let held = first_pairs(&st, "n3", 1);
    st.apply_claim(&claim("ns", "other", "u8", pairs(1), "n3", &held));
    // The pod's own claim holds devices on n5: its pools are fingerprinted without them.
    let mine = first_pairs(&st, "n5", 1);
    st.apply_claim(&claim("ns", "mine", "u1", pairs(1), "n5", &mine));
    // n4 goes (its slices deleted) and comes back; n2 goes.
    for node in ["n4", "n2"] {
        let gone: Vec<String> = st.nodes[node]
            .slices
            .iter()
            .filter_map(|s| s.metadata.name.clone())
            .collect();
        for s in &gone {
            st.delete_slice(s);
        }
    }
    assert!(!st.nodes.contains_key("n2"));
    let topo = topoalign_profiles::get("gb300-4").unwrap();
    for s in resource_slices(&topo, "n4", &PublishOptions::default()).unwrap() {
        st.apply_slice(&s);
    }
    let p = pod(
        json!([{"name": "a", "resourceClaimName": "mine"}]),
        json!([]),
    );
    let r = resolved(&st, &p);
    let own_pools = st.own_pools(&r.own);
    assert!(!own_pools.is_empty());
    let asked = ["n1", "n2", "n3", "n4", "n5", "nx", "n1", "n5"];
    let many: Vec<_> = st
        .keys_many(&r, &asked, &own_pools)
        .into_iter()
        .map(flat)
        .collect();
    let one: Vec<_> = asked
        .iter()
        .map(|n| flat(st.keys(&r, n, &own_pools)))
        .collect();
    assert_eq!(many, one);
    assert!(many[0].is_ok() && many[1].is_err() && many[5].is_err());
    assert_ne!(many[0], many[2], "n1 and n3 hold different devices");
}

/// A pod asking `resource: count` in its limits and naming no claim.
fn extended_pod(resource: &str, count: &str) -> Value {
    json!({"metadata": {"namespace": "ns", "name": "p", "uid": "u1"},
           "spec": {"containers": [{"name": "c", "resources": {"limits": {resource: count}}},
                                   {"name": "d", "resources": {"limits": {"cpu": "2"}}}]}})
}

#[test]
fn extended_resources_are_judged_as_the_claim_the_scheduler_makes() {
    let st = state_with(&[("n1", "mi300x-8")]);
    let r = resolved(&st, &extended_pod("topoalign.dev/gpu-nic-pair", "4"));
    assert_eq!(r.specs.len(), 1);
    let req = &r.specs[0]
        .devices
        .as_ref()
        .unwrap()
        .requests
        .as_ref()
        .unwrap()[0];
    let exact = req.exactly.as_ref().unwrap();
    assert_eq!(
        (exact.device_class_name.as_str(), exact.count),
        ("gpu-nic-pair.topoalign.dev", Some(4))
    );
    assert!(!r.foreign);
    let slices = &st.nodes["n1"].slices;
    let got: Vec<String> =
        match crate::dra::judge::judge(&r.specs, &st.ours, slices, "n1", &BTreeSet::new()).unwrap()
        {
            DraVerdict::Fit { devices, .. } => devices.into_iter().map(|d| d.device).collect(),
            other => panic!("{other:?}"),
        };
    let same: Vec<String> = first_pairs(&st, "n1", 4);
    assert_eq!(got, same, "the same pairs as the equivalent claim");
    // The implicit name of a class backs it too; a device plugin's resource does not.
    let r = resolved(
        &st,
        &extended_pod("deviceclass.resource.kubernetes.io/gpu.topoalign.dev", "2"),
    );
    assert_eq!(r.specs.len(), 1);
    assert!(matches!(
        st.resolve(&extended_pod("amd.com/gpu", "4")),
        PodClaims::NotOurs
    ));
    assert!(matches!(
        st.resolve(&extended_pod("topoalign.dev/gpu-nic-pair", "0")),
        PodClaims::NotOurs
    ));
}

/// A dgx-h100 node `n1` with dra-driver-cpu's class and slices (grouped, main's keys) and
/// the claim `ns/c` of 2 pairs with 16 CPUs (not allocated); its spec is returned.
fn cpu_state(st: &mut DraState) -> ResourceClaimSpec {
    use topoalign_dra::claim::{CpuClaim, CpuMode, CpuRelease, cpu_device_class, cpu_slices};
    *st = state_with(&[("n1", "dgx-h100")]);
    st.apply_class(&cpu_device_class("dra.cpu"));
    let topo = topoalign_profiles::get("dgx-h100").unwrap();
    for s in cpu_slices(&topo, "n1", CpuMode::Grouped, CpuRelease::Main).unwrap() {
        st.apply_slice(&s);
    }
    let mut spec = ClaimSpec::pairs(2);
    spec.cpus = Some(CpuClaim::new(16));
    let spec = claim_spec(&spec).unwrap();
    st.apply_claim(&claim("ns", "c", "u1", spec.clone(), "n1", &[]));
    spec
}

#[test]
fn cpus_of_dra_driver_cpu_beside_the_pairs_are_judged_with_them() {
    let claim_obj = claim;
    let mut st = DraState::default();
    let claim = cpu_state(&mut st);
    let r = resolved(
        &st,
        &pod(json!([{"name": "c", "resourceClaimName": "c"}]), json!([])),
    );
    assert!(!r.foreign, "judged as topoalign's claim");
    let slices = &st.nodes["n1"].slices;
    match crate::dra::judge::judge(&r.specs, &st.all_classes, slices, "n1", &BTreeSet::new())
        .unwrap()
    {
        DraVerdict::Fit { devices, .. } => {
            let cpus = devices.iter().filter(|d| d.driver == "dra.cpu").count();
            assert!(cpus >= 1, "{devices:?}");
        }
        other => panic!("{other:?}"),
    }
    // A class of another driver beside topoalign's is still not judged.
    let nvidia: k8s_openapi::api::resource::v1::DeviceClass = serde_json::from_value(json!({
        "metadata": {"name": "gpu.nvidia.com"},
        "spec": {"selectors": [{"cel": {"expression": "device.driver == \"gpu.nvidia.com\""}}]}
    }))
    .unwrap();
    st.apply_class(&nvidia);
    let mut other = claim;
    if let Some(r) = other.devices.as_mut().and_then(|d| d.requests.as_mut()) {
        r.last_mut()
            .unwrap()
            .exactly
            .as_mut()
            .unwrap()
            .device_class_name = "gpu.nvidia.com".into();
    }
    st.apply_claim(&claim_obj("ns", "m", "u1", other, "n1", &[]));
    assert!(matches!(
        st.resolve(&pod(
            json!([{"name": "m", "resourceClaimName": "m"}]),
            json!([])
        )),
        PodClaims::Unjudged("dra_mixed", _)
    ));
}

/// The scheduler's path (resolve, then visit through the verdict cache) judges a claim
/// with CPUs and a pod with extended resources: a fit, not a neutral pass.
#[test]
fn cpu_claims_and_extended_pods_are_judged_on_the_calls_path() {
    let shared = DraShared::new();
    cpu_state(&mut shared.write());
    for p in [
        pod(json!([{"name": "c", "resourceClaimName": "c"}]), json!([])),
        extended_pod("topoalign.dev/gpu-nic-pair", "2"),
    ] {
        let PodClaims::Judge(r) = shared.resolve(&p) else {
            panic!("{p}")
        };
        let mut out = Vec::new();
        shared.visit(&r, &["n1"], None, |_, _, v| out.push(v.clone()));
        assert!(
            matches!(&out[0], DraNode::Fit(f) if f.ranks.len() == 2),
            "{out:?}"
        );
    }
}

/// Another pod's claim `ns/name`, allocated a share of `cpus` CPUs of dgx-h100 `n1`'s
/// grouped CPU device of NUMA node `numa` (dra-driver-cpu's `consumedCapacity`).
fn cpu_share(name: &str, numa: u32, cpus: &str) -> ResourceClaim {
    serde_json::from_value(json!({
        "metadata": {"namespace": "ns", "name": name,
                     "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": "q", "uid": format!("uid-{name}")}]},
        "spec": {},
        "status": {"allocation": {"devices": {"results": [{
            "request": "cpus", "driver": "dra.cpu", "pool": "n1",
            "device": format!("cpudevnuma{numa:03}"),
            "consumedCapacity": {"dra.cpu/cpu": cpus},
        }]}}},
    }))
    .unwrap()
}

/// CPUs in `n1`'s grouped CPU device of NUMA node `numa`.
fn group_cpus(st: &DraState, numa: u32) -> i64 {
    let name = format!("cpudevnuma{numa:03}");
    let d = (st.nodes["n1"].slices.iter())
        .flat_map(|s| s.spec.devices.iter().flatten())
        .find(|d| d.name == name)
        .unwrap();
    d.capacity.as_ref().unwrap()["dra.cpu/cpu"]
        .value
        .0
        .parse()
        .unwrap()
}

/// The CPU group the stock allocator gives the pod's claims on `n1` (`None`: no fit).
fn cpu_group_given(shared: &DraShared, r: &Resolved) -> Option<String> {
    let Gathered::Job(job) = shared.read().gather(r, "n1") else {
        panic!("nothing to judge")
    };
    let taking = job.allocation(r)?;
    let groups: Vec<String> = (taking.devices.iter())
        .filter(|d| d.driver == "dra.cpu")
        .map(|d| d.device.clone())
        .collect();
    assert_eq!(groups.len(), 1, "{taking:?}");
    Some(groups[0].clone())
}

/// The verdict of `n1` for the pod through the call's path (verdict cache, kind plans).
fn visit_n1(shared: &DraShared, r: &Resolved) -> DraNode {
    let mut out = Vec::new();
    shared.visit(r, &["n1"], None, |_, _, v| out.push(v.clone()));
    out.remove(0)
}

/// Other claims' shares of the CPU groups count against a pod asking CPUs: a fully
/// consumed NUMA 0 group steers its CPUs (and pairs) to NUMA 1, both consumed reject the
/// node, and each release is seen at once (the verdict cache keys follow the shares,
/// also when a second claim shares a group the first already holds a share of).
#[test]
fn cpu_shares_of_other_claims_are_held_and_released() {
    let shared = DraShared::new();
    cpu_state(&mut shared.write());
    let p = pod(json!([{"name": "c", "resourceClaimName": "c"}]), json!([]));
    let PodClaims::Judge(r) = shared.resolve(&p) else {
        panic!()
    };
    let (c0, c1) = {
        let st = shared.read();
        (group_cpus(&st, 0), group_cpus(&st, 1))
    };
    assert!(matches!(visit_n1(&shared, &r), DraNode::Fit(_)));
    assert_eq!(
        cpu_group_given(&shared, &r).as_deref(),
        Some("cpudevnuma000")
    );

    // NUMA 0's CPUs all taken by another pod: the pod's CPUs go to NUMA 1.
    shared
        .write()
        .apply_claim(&cpu_share("full0", 0, &c0.to_string()));
    assert!(matches!(visit_n1(&shared, &r), DraNode::Fit(_)));
    assert_eq!(
        cpu_group_given(&shared, &r).as_deref(),
        Some("cpudevnuma001")
    );

    // NUMA 1 filled by two claims: the first leaves 8 CPUs (fewer than the 16 asked)...
    shared
        .write()
        .apply_claim(&cpu_share("most1", 1, &(c1 - 8).to_string()));
    let v = visit_n1(&shared, &r);
    assert!(
        matches!(&v, DraNode::Reject(m) if m.contains("claim 0")),
        "{v:?}"
    );
    // ... released, the node fits again (the cached rejection is not reused) ...
    shared.write().delete_claim(&("ns".into(), "most1".into()));
    assert!(matches!(visit_n1(&shared, &r), DraNode::Fit(_)));
    // ... a small share first, then a second claim on the same group: the devices held
    // are the same, only the shares differ, and the verdict follows them.
    shared.write().apply_claim(&cpu_share("some1", 1, "4"));
    assert!(matches!(visit_n1(&shared, &r), DraNode::Fit(_)));
    shared
        .write()
        .apply_claim(&cpu_share("most1", 1, &(c1 - 8).to_string()));
    assert!(matches!(visit_n1(&shared, &r), DraNode::Reject(_)));
    // Deleting one of the two claims sharing the group keeps the other's share: 8 CPUs
    // left, still too few.
    shared.write().delete_claim(&("ns".into(), "some1".into()));
    let v = visit_n1(&shared, &r);
    assert!(matches!(&v, DraNode::Reject(_)), "{v:?}");
    assert_eq!(shared.read().judge_node(&r, "n1"), v);
    // NUMA 0 released: back to it.
    shared.write().delete_claim(&("ns".into(), "full0".into()));
    assert!(matches!(visit_n1(&shared, &r), DraNode::Fit(_)));
    assert_eq!(
        cpu_group_given(&shared, &r).as_deref(),
        Some("cpudevnuma000")
    );
}

/// The pod's own claim, allocated with a share already (scheduled again), does not hold
/// its share against itself; an allocation assumed for a pod holds its CPU share
/// against the next pod.
#[test]
fn own_shares_are_not_held_and_assumed_shares_are() {
    let shared = DraShared::new();
    let spec = cpu_state(&mut shared.write());
    let p = pod(json!([{"name": "c", "resourceClaimName": "c"}]), json!([]));
    let PodClaims::Judge(r) = shared.resolve(&p) else {
        panic!()
    };
    let (c0, c1) = {
        let st = shared.read();
        (group_cpus(&st, 0), group_cpus(&st, 1))
    };
    shared
        .write()
        .apply_claim(&cpu_share("full0", 0, &c0.to_string()));
    shared
        .write()
        .apply_claim(&cpu_share("most1", 1, &(c1 - 16).to_string()));
    // The pod's own claim holds 16 CPUs of NUMA 1 (allocated earlier): they are its own.
    let mut mine = cpu_share("c", 1, "16");
    mine.metadata.owner_references.as_mut().unwrap()[0].uid = "u1".into();
    mine.spec = Some(spec);
    shared.write().apply_claim(&mine);
    assert!(matches!(visit_n1(&shared, &r), DraNode::Fit(_)));
    // Not allocated yet: the stock allocator gives 16 CPUs of NUMA 1, assumed for pod u1
    // until its claim is seen allocated; they are held (the assumption is not one of the
    // pod's claims: a pod judged again forgets its own assumption first).
    let spec = mine.spec.clone().unwrap();
    shared
        .write()
        .apply_claim(&claim("ns", "c", "u1", spec, "n1", &[]));
    assert!(matches!(visit_n1(&shared, &r), DraNode::Fit(_)));
    shared.assume("u1", &r, "n1", std::time::Instant::now());
    let st = shared.read();
    assert!(st.is_assumed("u1"));
    // Per GPU 8 CPUs, on NUMA 1's group.
    let assumed: Vec<&Share> = (st.shares.values().flat_map(|m| m.iter()))
        .filter(|(k, _)| assumed::is_assumed_key(k))
        .flat_map(|(_, v)| v)
        .collect();
    let on_numa1: i64 = (assumed.iter())
        .filter(|s| s.device.device == "cpudevnuma001")
        .map(|s| s.quantity.parse::<i64>().unwrap())
        .sum();
    assert_eq!((assumed.len(), on_numa1), (2, 16), "{assumed:?}");
    assert!(matches!(st.judge_node(&r, "n1"), DraNode::Reject(_)));
}

/// A share whose quantity is not one: no panic, the claim is kept, the node is judged
/// neutral (naming the share) on both judging paths, and fixed, judged again.
#[test]
fn a_share_that_is_no_quantity_makes_the_node_neutral() {
    let shared = DraShared::new();
    cpu_state(&mut shared.write());
    let p = pod(json!([{"name": "c", "resourceClaimName": "c"}]), json!([]));
    let PodClaims::Judge(r) = shared.resolve(&p) else {
        panic!()
    };
    shared.write().apply_claim(&cpu_share("bad", 0, "lots"));
    assert_eq!(shared.read().claim_count(), 2);
    for v in [visit_n1(&shared, &r), shared.read().judge_node(&r, "n1")] {
        assert!(
            matches!(&v, DraNode::Neutral(DraNeutral::Error(m))
                if m.contains("dra.cpu/cpu") && m.contains("cpudevnuma000")),
            "{v:?}"
        );
    }
    shared.write().apply_claim(&cpu_share("bad", 0, "8"));
    assert!(matches!(visit_n1(&shared, &r), DraNode::Fit(_)));
}
