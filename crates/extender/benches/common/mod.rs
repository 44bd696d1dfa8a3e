//! What the benches share: a synthetic DRA cluster (the driver's slices on every node,
//! random occupancy held by allocated claims) and pods waiting for a node.

// A measurement harness: building the synthetic cluster must not fail silently.
#![allow(clippy::expect_used, dead_code)]

use std::collections::BTreeSet;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::resource::v1::{ResourceClaim, ResourceClaimSpec, ResourceClaimTemplate};
use serde_json::{Value, json};
use topoalign_dra::{
    DRIVER_NAME,
    alloc::DeviceId,
    claim::{ClaimSpec, claim_spec, claim_template},
    publish::{PublishOptions, device_classes, resource_slices},
};
use topoalign_extender::{DraShared, DraState, DraVerdict, judge_claims as judge};
use topoalign_rng::Rng;

/// The profiles the synthetic nodes cycle through.
pub(crate) const PROFILES: [&str; 3] = ["mi300x-8", "gb300-4", "dgx-h100"];

/// A claim of `n` pairs, `rank <= max_rank` when given.
pub(crate) fn pairs(n: u32, max_rank: Option<u32>) -> ResourceClaimSpec {
    let mut c = ClaimSpec::pairs(n);
    c.max_rank = max_rank;
    claim_spec(&c).expect("claim spec")
}

/// `nodes` nodes with the driver's slices, each with a random share of its pairs held by
/// one allocated claim (taken one pair at a time, each with a random class bound, a third
/// of them gone again); the claim `bench/two` (2 pairs) for the bench pod, and the
/// templates `bench/pairs-N` (N = 1, 2, 4, 8). Also returns the node names and the
/// number of distinct (profile, devices held).
pub(crate) fn dra_cluster(nodes: usize) -> (DraState, Vec<String>, usize) {
    let mut st = DraState::default();
    let classes = device_classes();
    for c in &classes {
        st.apply_class(c);
    }
    let mut rng = Rng::new(3);
    let mut names = Vec::with_capacity(nodes);
    let mut kinds: BTreeSet<(&str, Vec<String>)> = BTreeSet::new();
    // One profile's slices are built once and renamed per node (building them is the
    // slow part of a 20,000-node setup, not what is measured).
    let base: Vec<_> = PROFILES
        .iter()
        .map(|p| {
            let topo = topoalign_profiles::get(p).expect("profile");
            let gpus = topo.gpus.len();
            (topo, gpus)
        })
        .collect();
    for k in 0..nodes {
        let profile = PROFILES[k % PROFILES.len()];
        let (topo, gpus) = &base[k % PROFILES.len()];
        let node = format!("{profile}-{k:05}");
        let slices = resource_slices(topo, &node, &PublishOptions::default()).expect("slices");
        for s in &slices {
            st.apply_slice(s);
        }
        let mut held: BTreeSet<DeviceId> = BTreeSet::new();
        let mut pods: Vec<BTreeSet<DeviceId>> = Vec::new();
        for _ in 0..rng.below(gpus + 1) {
            let bound = [None, Some(0), Some(1), Some(2), Some(3)][rng.below(5)];
            if let Ok(DraVerdict::Fit { devices, .. }) =
                judge(&[pairs(1, bound)], &classes, &slices, &node, &held)
            {
                held.extend(devices.iter().cloned());
                pods.push(devices);
            }
        }
        held = pods
            .into_iter()
            .filter(|_| rng.below(3) > 0)
            .flatten()
            .collect();
        kinds.insert((profile, held.iter().map(|d| d.device.clone()).collect()));
        if !held.is_empty() {
            let results: Vec<Value> = held
                .iter()
                .map(|d| json!({"request": "pairs", "driver": DRIVER_NAME, "pool": d.pool, "device": d.device}))
                .collect();
            let claim: ResourceClaim = serde_json::from_value(json!({
                "metadata": {"namespace": "other", "name": format!("held-{k}")},
                "spec": pairs(1, None),
                "status": {"allocation": {"devices": {"results": results}}},
            }))
            .expect("claim");
            st.apply_claim(&claim);
        }
        names.push(node);
    }
    let pod_claim: ResourceClaim = serde_json::from_value(json!({
        "metadata": {"namespace": "bench", "name": "two"},
        "spec": pairs(2, None),
    }))
    .expect("claim");
    st.apply_claim(&pod_claim);
    for n in [1, 2, 4, 8] {
        let mut t: ResourceClaimTemplate = claim_template(&ClaimSpec::pairs(n)).expect("template");
        t.metadata.name = Some(format!("pairs-{n}"));
        t.metadata.namespace = Some("bench".into());
        st.apply_template(&t);
    }
    (st, names, kinds.len())
}

/// The bench pod: its claim `bench/two`.
pub(crate) fn dra_pod() -> Value {
    json!({"metadata": {"name": "p", "namespace": "bench", "uid": "u"},
        "spec": {"containers": [], "resourceClaims": [{"name": "g", "resourceClaimName": "two"}]}})
}

/// `count` pods waiting for a node, of 1/2/4/8 pairs (weights 4/3/2/1) from the
/// templates, as the pending-pods watch gives them to `shared`.
pub(crate) fn add_waiting(shared: &DraShared, count: usize) {
    let mut rng = Rng::new(5);
    for i in 0..count {
        let n = [1, 1, 1, 1, 2, 2, 2, 4, 4, 8][rng.below(10)];
        let pod: Pod = serde_json::from_value(json!({
            "metadata": {"namespace": "bench", "name": format!("w{i}"), "uid": format!("w{i}"),
                         "creationTimestamp": "2026-01-01T00:00:00Z"},
            "spec": {"containers": [{"name": "c"}],
                     "resourceClaims": [{"name": "g", "resourceClaimTemplateName": format!("pairs-{n}")}]},
        }))
        .expect("pod");
        shared.apply_pending(&pod);
    }
}
