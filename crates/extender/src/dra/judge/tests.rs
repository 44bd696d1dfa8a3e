//! Unit tests of the DRA judgement: allocation search, scores, capacity levels.

use super::*;
use topoalign_dra::{
    claim::{ClaimSpec, claim_spec},
    publish::{PublishOptions, device_classes, resource_slices},
};

fn slices(profile: &str, node: &str) -> Vec<ResourceSlice> {
    let topo = topoalign_profiles::get(profile).unwrap();
    resource_slices(&topo, node, &PublishOptions::default()).unwrap()
}

fn pairs(n: u32, max_rank: Option<u32>) -> ResourceClaimSpec {
    let mut c = ClaimSpec::pairs(n);
    c.max_rank = max_rank;
    claim_spec(&c).unwrap()
}

fn fit(v: &DraVerdict) -> (DraFit, BTreeSet<DeviceId>) {
    match v {
        DraVerdict::Fit { fit, devices } => (fit.clone(), devices.clone()),
        other => panic!("{other:?}"),
    }
}

#[test]
fn free_nodes_fit_and_held_pairs_are_not_given_twice() {
    let classes = device_classes();
    for profile in ["mi300x-8", "gb300-4", "dgx-h100"] {
        let sl = slices(profile, "n1");
        let gpus = topoalign_profiles::get(profile).unwrap().gpus.len() as u32;
        let none = BTreeSet::new();
        let v = judge(&[pairs(2, None)], &classes, &sl, "n1", &none);
        let (f, _) = fit(&v.unwrap());
        assert_eq!(f.ranks.len(), 2, "{profile}");
        assert_eq!(
            (f.gpus, f.capacity_before, f.capacity_after),
            (2, gpus as usize, gpus as usize - 2),
            "{profile}"
        );
        let points = dra_points(&f.ranks, f.spoiled);
        // Rounds to 1 ..= 10.
        assert!((0.5..=10.0).contains(&points), "{profile}: {f:?}");
        // Every GPU taken by one claim: nothing is left for the next.
        let all = judge(&[pairs(gpus, None)], &classes, &sl, "n1", &none).unwrap();
        let (f, held) = fit(&all);
        assert_eq!(f.capacity_after, 0, "{profile}");
        let v = judge(&[pairs(1, None)], &classes, &sl, "n1", &held).unwrap();
        assert!(
            matches!(v, DraVerdict::Reject(ref m) if m.contains("claim 0")),
            "{profile}: {v:?}"
        );
        // Two claims of one pod: the second sees the first's devices taken.
        let half = gpus / 2;
        let v = judge(
            &[pairs(half, None), pairs(gpus - half, None)],
            &classes,
            &sl,
            "n1",
            &none,
        )
        .unwrap();
        assert_eq!(fit(&v).0.ranks.len(), gpus as usize, "{profile}");
        let v = judge(
            &[pairs(half, None), pairs(gpus - half + 1, None)],
            &classes,
            &sl,
            "n1",
            &none,
        )
        .unwrap();
        assert!(
            matches!(v, DraVerdict::Reject(ref m) if m.contains("claim 1")),
            "{profile}: {v:?}"
        );
        // Slices of another node are not this node's.
        let v = judge(&[pairs(1, None)], &classes, &sl, "n2", &none).unwrap();
        assert!(matches!(v, DraVerdict::Reject(_)), "{profile}: {v:?}");
    }
}

#[test]
fn a_required_pair_class_drops_nodes_that_cannot_reach_it() {
    let classes = device_classes();
    let none = BTreeSet::new();
    for profile in ["mi300x-8", "gb300-4", "dgx-h100"] {
        let sl = slices(profile, "n1");
        let (f, _) = fit(&judge(&[pairs(1, None)], &classes, &sl, "n1", &none).unwrap());
        let best = f.ranks[0];
        // The best class the node has is reachable; a better one is not.
        let at = pairs(1, Some(best as u32));
        assert!(matches!(
            judge(&[at], &classes, &sl, "n1", &none).unwrap(),
            DraVerdict::Fit { .. }
        ));
        if best > 0 {
            let better = pairs(1, Some(best as u32 - 1));
            let v = judge(&[better], &classes, &sl, "n1", &none).unwrap();
            assert!(matches!(v, DraVerdict::Reject(_)), "{profile}: {v:?}");
        }
        // Once every pair of the best class is held, the bound filters the node.
        let gpus = topoalign_profiles::get(profile).unwrap().gpus.len() as u32;
        let (_, held) = fit(&judge(&[pairs(gpus, None)], &classes, &sl, "n1", &none).unwrap());
        let v = judge(&[pairs(1, Some(best as u32))], &classes, &sl, "n1", &held).unwrap();
        assert!(matches!(v, DraVerdict::Reject(_)), "{profile}: {v:?}");
    }
}

#[test]
fn allocated_claims_name_their_devices() {
    let claim: k8s_openapi::api::resource::v1::ResourceClaim =
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": "c"},
            "spec": {},
            "status": {"allocation": {"devices": {"results": [
                {"request": "pairs", "driver": DRIVER_NAME, "pool": "n1", "device": "pair-a"}
            ]}}}
        }))
        .unwrap();
    let ids = topoalign_dra::claim::held_devices([&claim]);
    assert_eq!(ids.len(), 1);
    assert_eq!(ids.iter().next().unwrap().device, "pair-a");
}
