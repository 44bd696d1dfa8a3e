//! The DRA path's shared verdicts (nodes of one kind with the same devices held are
//! judged once per call) against every node judged on its own, on random clusters: the
//! same verdict for every node, on the first call, after claims come and go, and from the
//! cache.

use std::collections::BTreeSet;

use k8s_openapi::api::resource::v1::{ResourceClaim, ResourceClaimSpec};
use proptest::prelude::*;
use serde_json::{Value, json};
use topoalign_dra::{
    DRIVER_NAME,
    alloc::DeviceId,
    claim::{ClaimSpec, claim_spec},
    publish::{PublishOptions, device_classes, resource_slices},
};
use topoalign_extender::{DraShared, DraState, PodClaims, Resolved};
use topoalign_extender::{DraVerdict, judge_claims as judge};
use topoalign_rng::Rng;

const PROFILES: [&str; 3] = ["mi300x-8", "gb300-4", "dgx-h100"];
const BOUNDS: [Option<u32>; 5] = [None, Some(0), Some(1), Some(2), Some(3)];

fn pairs(n: u32, max_rank: Option<u32>) -> ResourceClaimSpec {
    let mut c = ClaimSpec::pairs(n);
    c.max_rank = max_rank;
    claim_spec(&c).unwrap()
}

fn claim(
    ns: &str,
    name: &str,
    held: &BTreeSet<DeviceId>,
    spec: ResourceClaimSpec,
) -> ResourceClaim {
    let mut v = json!({"metadata": {"namespace": ns, "name": name}, "spec": spec});
    if !held.is_empty() {
        let results: Vec<Value> = held
            .iter()
            .map(|d| json!({"request": "pairs", "driver": DRIVER_NAME, "pool": d.pool, "device": d.device}))
            .collect();
        v["status"] = json!({"allocation": {"devices": {"results": results}}});
    }
    serde_json::from_value(v).unwrap()
}

/// One pair for a pod on `node`, on what `held` leaves, with a random class bound.
fn one_pair(
    st: &DraState,
    rng: &mut Rng,
    node: &str,
    held: &BTreeSet<DeviceId>,
) -> Option<BTreeSet<DeviceId>> {
    let classes = device_classes();
    let slices = st.node_slices(node)?;
    match judge(
        &[pairs(1, BOUNDS[rng.below(5)])],
        &classes,
        &slices,
        node,
        held,
    ) {
        Ok(DraVerdict::Fit { devices, .. }) => Some(devices),
        _ => None,
    }
}

/// Devices held on `node` by every claim.
fn held_on(claims: &[(String, String, BTreeSet<DeviceId>)], node: &str) -> BTreeSet<DeviceId> {
    claims
        .iter()
        .filter(|(n, _, _)| n == node)
        .flat_map(|(_, _, h)| h.iter().cloned())
        .collect()
}

fn check(shared: &DraShared, r: &Resolved, names: &[String], when: &str) {
    let mut got = Vec::new();
    shared.visit(r, names, None, |_, _, v| got.push(v.clone()));
    let st = shared.read();
    for (n, v) in names.iter().zip(&got) {
        assert_eq!(*v, st.judge_node(r, n), "{when}: node {n}");
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(12))]

    #[test]
    fn shared_verdicts_are_each_nodes_own(
        seed in any::<u64>(),
        want in 1u32..=4,
        bound in 0usize..5,
        own_held in any::<bool>(),
    ) {
        let mut rng = Rng::new(seed);
        let shared = DraShared::new();
        let names: Vec<String> = (0..18).map(|i| format!("node-{i}")).collect();
        // (node, claim name, devices held)
        let mut claims: Vec<(String, String, BTreeSet<DeviceId>)> = Vec::new();
        {
            let mut st = shared.write();
            for c in device_classes() {
                st.apply_class(&c);
            }
            for n in &names {
                let topo = topoalign_profiles::get(PROFILES[rng.below(3)]).unwrap();
                for s in resource_slices(&topo, n, &PublishOptions::default()).unwrap() {
                    st.apply_slice(&s);
                }
                for j in 0..rng.below(topo.gpus.len() + 1) {
                    let held = held_on(&claims, n);
                    if let Some(d) = one_pair(&st, &mut rng, n, &held) {
                        claims.push((n.clone(), format!("{n}-c{j}"), d));
                    }
                }
            }
            // A third of the pods went again.
            claims.retain(|_| rng.below(3) > 0);
            for (_, name, held) in &claims {
                st.apply_claim(&claim("other", name, held, pairs(1, None)));
            }
            // The pod's own claim, allocated already on some node when it is scheduled
            // again: its devices are not taken from it.
            let mine = pairs(want, BOUNDS[bound]);
            let mut mine_held = BTreeSet::new();
            if own_held {
                let n = &names[rng.below(names.len())];
                let held = held_on(&claims, n);
                mine_held = one_pair(&st, &mut rng, n, &held).unwrap_or_default();
            }
            st.apply_claim(&claim("ns", "mine", &mine_held, mine));
        }
        let pod = json!({"metadata": {"namespace": "ns", "name": "p", "uid": "u"},
            "spec": {"containers": [], "resourceClaims": [{"name": "g", "resourceClaimName": "mine"}]}});
        let PodClaims::Judge(r) = shared.resolve(&pod) else {
            panic!("the pod's claim does not resolve");
        };
        check(&shared, &r, &names, "first call");
        check(&shared, &r, &names, "cached");
        // Pods come and go on a few nodes.
        {
            let mut st = shared.write();
            for k in 0..4 {
                if !claims.is_empty() {
                    let (_, name, _) = claims.remove(rng.below(claims.len()));
                    st.delete_claim(&("other".to_string(), name));
                }
                let n = names[rng.below(names.len())].clone();
                let held = held_on(&claims, &n);
                if let Some(d) = one_pair(&st, &mut rng, &n, &held) {
                    let name = format!("late-{k}");
                    st.apply_claim(&claim("other", &name, &d, pairs(1, None)));
                    claims.push((n, name, d));
                }
            }
        }
        check(&shared, &r, &names, "after changes");
        check(&shared, &r, &names, "cached after changes");
    }
}
