//! Tests of `explain pod` on in-memory objects: topoalign pair claims, a mixed
//! `gpu.nvidia.com` + `dra.net` claim, a device-plugin pod, and the refusals.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::resource::v1::{ResourceClaim, ResourceSlice};
use serde_json::{Value, json};

use super::*;
use crate::DRIVER_NAME;
use crate::claim::{ClaimSpec, claim_spec};
use crate::claim::{MixedSpec, stand_in_classes};
use crate::publish::device_classes;
use crate::publish::slices_for;
use crate::publish::{Inventory, PublishOptions};

const NODE: &str = "n1";

fn pod(entries: Value, statuses: Value) -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": "train", "namespace": "ml"},
        "spec": {"nodeName": NODE, "containers": [{"name": "c", "image": "x"}], "resourceClaims": entries},
        "status": {"resourceClaimStatuses": statuses},
    }))
    .unwrap()
}

fn claim(ns: &str, name: &str, spec: Value, results: &[(&str, &str, &str)]) -> ResourceClaim {
    let results: Vec<Value> = results
        .iter()
        .map(|(req, driver, dev)| json!({"request": req, "driver": driver, "pool": NODE, "device": dev}))
        .collect();
    serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": ns},
        "spec": spec,
        "status": {"allocation": {"devices": {"results": results}}},
    }))
    .unwrap()
}

fn own_slices() -> Vec<ResourceSlice> {
    let topo = topoalign_profiles::get("dgx-h100").unwrap();
    slices_for(&Inventory::new(&topo, &PublishOptions::default()), NODE, 1).unwrap()
}

/// topoalign's pair devices of the first GPU that has two: (name, class rank), best first.
fn pairs_of_one_gpu(slices: &[ResourceSlice]) -> Vec<(String, i64)> {
    let mut by_gpu: BTreeMap<String, Vec<(String, i64)>> = BTreeMap::new();
    for d in slices.iter().flat_map(|s| s.spec.devices.iter().flatten()) {
        let a = d.attributes.as_ref().unwrap();
        if a.get("type").and_then(|t| t.string.as_deref()) == Some("pair") {
            let gpu = a["gpu"].string.clone().unwrap();
            by_gpu
                .entry(gpu)
                .or_default()
                .push((d.name.clone(), a["rank"].int.unwrap()));
        }
    }
    let mut v = by_gpu
        .into_values()
        .find(|v| v.iter().map(|p| p.1).collect::<BTreeSet<_>>().len() > 1)
        .expect("a GPU with pairs of two classes");
    v.sort_by_key(|p| p.1);
    v
}

fn spec_json(spec: &ClaimSpec) -> Value {
    serde_json::to_value(claim_spec(spec).unwrap()).unwrap()
}

fn run(
    p: &Pod,
    claims: &[ResourceClaim],
    slices: &[ResourceSlice],
    others: &[ResourceClaim],
    classes: &[DeviceClass],
) -> Result<PodExplanation, PodError> {
    explain_pod(&PodInput {
        pod: p,
        claims,
        slices,
        others,
        classes,
        node_facts: &[],
        topology: None,
    })
}

#[test]
fn a_pair_claim_on_a_worse_pair_than_the_best_free_one_says_which_nic_was_free() {
    let slices = own_slices();
    let pairs = pairs_of_one_gpu(&slices);
    let (best, worst) = (&pairs[0], &pairs[pairs.len() - 1]);
    let p = pod(
        json!([{"name": "gpus", "resourceClaimName": "c1"}]),
        json!([]),
    );
    let c = claim(
        "ml",
        "c1",
        spec_json(&ClaimSpec::pairs(1)),
        &[("pairs", DRIVER_NAME, &worst.0)],
    );
    let e = run(&p, &[c], &slices, &[], &device_classes()).unwrap();
    assert_eq!(e.source, "claims");
    let d = &e.claims[0].devices[0];
    assert_eq!((d.kind, d.device.as_str()), (Kind::Pair, worst.0.as_str()));
    assert_eq!(d.class.map(|c| i64::from(c.rank())), Some(worst.1));
    assert_eq!(e.pairs.pairs.len(), 1);
    assert_eq!(e.pairs.pairs[0].class, d.class);
    let best_pair = &e.best.as_ref().unwrap().pairs[0];
    assert_eq!(best_pair.class.map(|c| i64::from(c.rank())), Some(best.1));
    assert!(!e.as_good, "{e:#?}");
    // topoalign publishes pairs best first: the stock allocator would have taken the best.
    assert_eq!(e.claims[0].first_fit, Some(false));
    let why = e.reasons.join("\n");
    assert!(
        why.contains("is not the stock allocator's first fit"),
        "{why}"
    );
    let line = format!(
        "GPU {} got NIC {} ({})",
        e.pairs.pairs[0].gpu,
        e.pairs.pairs[0].nic_name,
        d.class.unwrap()
    );
    assert!(why.contains(&line) && why.contains("was free"), "{why}");
}

#[test]
fn the_best_pair_held_by_another_claim_is_named() {
    let slices = own_slices();
    let pairs = pairs_of_one_gpu(&slices);
    let p = pod(
        json!([{"name": "gpus", "resourceClaimName": "c1"}]),
        json!([]),
    );
    let spec = spec_json(&ClaimSpec::pairs(1));
    // Another claim holds the best pair of that GPU; the pod got the next one. The
    // planner's best is then elsewhere (another GPU's best pair) or as good.
    let other = claim(
        "team-b",
        "hog",
        spec.clone(),
        &[("pairs", DRIVER_NAME, &pairs[0].0)],
    );
    let c = claim("ml", "c1", spec, &[("pairs", DRIVER_NAME, &pairs[1].0)]);
    let e = run(&p, &[c], &slices, &[other], &device_classes()).unwrap();
    let held_gpu = e.pairs.pairs[0].gpu;
    assert_eq!(
        e.pairs.pairs[0].class.map(|c| i64::from(c.rank())),
        Some(pairs[1].1)
    );
    assert!(!e.as_good);
    let why = e.reasons.join("\n");
    let hog_class = PcieClass::ALL
        .into_iter()
        .find(|c| i64::from(c.rank()) == pairs[0].1)
        .unwrap();
    assert!(
        why.contains(&format!("GPU {held_gpu}'s closest NIC "))
            && why.contains(&format!("({hog_class}) was held by claim team-b/hog")),
        "{why}"
    );
    // No free NIC of that GPU is closer than the one it got.
    assert!(!why.contains(&format!("GPU {held_gpu} got NIC")), "{why}");
    assert!(
        why.contains("the best free choice takes other GPUs"),
        "{why}"
    );
}

/// Two NUMA nodes, a GPU and a NIC on each; dra.net lists the far NIC first.
fn mixed_slices() -> Vec<ResourceSlice> {
    let gpu = |name: &str, bdf: &str, numa: i64| {
        json!({"name": name, "attributes": {
            "type": {"string": "gpu"},
            "resource.kubernetes.io/pciBusID": {"string": bdf},
            "resource.kubernetes.io/pcieRoot": {"string": format!("pci0000:{}", &bdf[5..7])},
            "resource.kubernetes.io/numaNode": {"int": numa}}})
    };
    let nic = |name: &str, bdf: &str, numa: i64, rdma: &str| {
        json!({"name": name, "attributes": {
            "dra.net/pciAddress": {"string": bdf},
            "dra.net/rdmaDevice": {"string": rdma},
            "dra.net/numaNode": {"int": numa},
            "resource.kubernetes.io/pcieRoot": {"string": format!("pci0000:{}", &bdf[5..7])}}})
    };
    let slice = |driver: &str, devices: Vec<Value>| -> ResourceSlice {
        serde_json::from_value(json!({
            "metadata": {"name": format!("{NODE}-{driver}")},
            "spec": {"driver": driver, "nodeName": NODE,
                     "pool": {"name": NODE, "generation": 1, "resourceSliceCount": 1},
                     "devices": devices}}))
        .unwrap()
    };
    vec![
        slice(
            "gpu.nvidia.com",
            vec![
                gpu("gpu-0", "0000:1b:00.0", 0),
                gpu("gpu-1", "0000:9b:00.0", 1),
            ],
        ),
        slice(
            "dra.net",
            vec![
                nic("pci-0000-a0-00-0", "0000:a0:00.0", 1, "mlx5_2"),
                nic("pci-0000-20-00-0", "0000:20:00.0", 0, "mlx5_0"),
            ],
        ),
    ]
}

fn mixed_classes() -> Vec<DeviceClass> {
    stand_in_classes(&MixedSpec {
        node: NODE.into(),
        pairs: 1,
        nics_per_gpu: 1,
        gpu_driver: "gpu.nvidia.com".into(),
        gpu_class: "gpu.nvidia.com".into(),
        nic_driver: "dra.net".into(),
        nic_class: "dranet".into(),
    })
}

#[test]
fn a_mixed_claim_taken_first_fit_names_the_far_nic_and_the_near_free_one() {
    let spec = json!({"devices": {"requests": [
        {"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com"}},
        {"name": "nic", "exactly": {"deviceClassName": "dranet"}}]}});
    let c = claim(
        "ml",
        "train-rdma-x7",
        spec,
        &[
            ("gpu", "gpu.nvidia.com", "gpu-0"),
            ("nic", "dra.net", "pci-0000-a0-00-0"),
        ],
    );
    let p = pod(
        json!([{"name": "rdma", "resourceClaimTemplateName": "t"}]),
        json!([{"name": "rdma", "resourceClaimName": "train-rdma-x7"}]),
    );
    let e = run(&p, &[c], &mixed_slices(), &[], &mixed_classes()).unwrap();
    let kinds: Vec<Kind> = e.claims[0].devices.iter().map(|d| d.kind).collect();
    assert_eq!(kinds, [Kind::Gpu, Kind::Nic]);
    assert_eq!(e.claims[0].first_fit, Some(true));
    assert_eq!(e.pairs.worst, Some(PcieClass::Sys));
    assert_eq!(e.best.as_ref().unwrap().worst, Some(PcieClass::Node));
    assert!(!e.as_good);
    assert_eq!(
        e.reasons[..2],
        [
            "the stock allocator takes the first fit and does not score pairs (replayed on the free devices: the same devices)".to_string(),
            "GPU 0000:1b:00.0 got NIC mlx5_2 (SYS) although mlx5_0 (NODE) was free".to_string(),
        ]
    );
}

#[test]
fn the_near_nic_held_by_another_claim_makes_the_pick_the_best_free_one() {
    let spec = json!({"devices": {"requests": [
        {"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com"}},
        {"name": "nic", "exactly": {"deviceClassName": "dranet"}}]}});
    let other = claim(
        "team-b",
        "hog",
        spec.clone(),
        &[
            ("gpu", "gpu.nvidia.com", "gpu-1"),
            ("nic", "dra.net", "pci-0000-20-00-0"),
        ],
    );
    let c = claim(
        "ml",
        "c1",
        spec,
        &[
            ("gpu", "gpu.nvidia.com", "gpu-0"),
            ("nic", "dra.net", "pci-0000-a0-00-0"),
        ],
    );
    let p = pod(
        json!([{"name": "rdma", "resourceClaimName": "c1"}]),
        json!([]),
    );
    let e = run(&p, &[c], &mixed_slices(), &[other], &mixed_classes()).unwrap();
    assert!(e.as_good, "{e:#?}");
    assert_eq!(
        e.reasons[0],
        "no better pair exists: the pod's pairs are as good as the best free choice"
    );
    assert_eq!(
        e.reasons[1],
        "the node's best pairs (worst NODE) were held by claim team-b/hog"
    );
}

#[test]
fn a_device_plugin_pod_says_where_its_devices_come_from() {
    let p: Pod = serde_json::from_value(json!({
        "metadata": {"name": "dp", "namespace": "ml"},
        "spec": {"nodeName": NODE, "containers": [{"name": "c", "image": "x",
            "resources": {"limits": {"nvidia.com/gpu": "2", "cpu": "4", "rdma/ib": "2"}}}]}}))
    .unwrap();
    let facts = vec![(
        "topoalign.dev/used".to_string(),
        r#"{"gpus":["0000:1b:00.0"]}"#.to_string(),
    )];
    let e = explain_pod(&PodInput {
        pod: &p,
        claims: &[],
        slices: &[],
        others: &[],
        classes: &[],
        node_facts: &facts,
        topology: None,
    })
    .unwrap();
    assert_eq!(e.source, "device-plugin");
    let dp = e.device_plugin.unwrap();
    assert_eq!(
        dp.resources["c"].keys().collect::<Vec<_>>(),
        ["nvidia.com/gpu", "rdma/ib"]
    );
    assert_eq!(dp.node["topoalign.dev/used"], facts[0].1);
    assert!(
        e.notes[0].contains("pod-resources API on node n1"),
        "{:?}",
        e.notes
    );
}

#[test]
fn refusals_name_the_pod_or_the_claim() {
    let c = serde_json::from_value::<ResourceClaim>(json!({
        "metadata": {"name": "c1", "namespace": "ml"}, "spec": {}}))
    .unwrap();
    let p = pod(json!([{"name": "g", "resourceClaimName": "c1"}]), json!([]));
    let e = run(&p, &[c], &[], &[], &[]).unwrap_err();
    assert_eq!(
        e.to_string(),
        "ResourceClaim ml/c1 is not allocated yet (no status.allocation)"
    );
    let t = pod(
        json!([{"name": "g", "resourceClaimTemplateName": "t"}]),
        json!([]),
    );
    assert_eq!(
        run(&t, &[], &[], &[], &[]).unwrap_err(),
        PodError::ClaimNotCreated {
            pod: "ml/train".into(),
            entry: "g".into()
        }
    );
    let mut unscheduled = p.clone();
    unscheduled.spec.as_mut().unwrap().node_name = None;
    assert_eq!(
        run(&unscheduled, &[], &[], &[], &[])
            .unwrap_err()
            .to_string(),
        "pod ml/train is not scheduled yet (no spec.nodeName): its claims are allocated when it is"
    );
    assert_eq!(
        run(&p, &[], &[], &[], &[]).unwrap_err(),
        PodError::ClaimMissing {
            claim: "ml/c1".into()
        }
    );
}

#[test]
fn devices_missing_from_the_slices_are_reported_not_guessed() {
    let spec = json!({"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com"}}]}});
    let c = claim("ml", "c1", spec, &[("gpu", "gpu.nvidia.com", "gpu-0")]);
    let p = pod(json!([{"name": "g", "resourceClaimName": "c1"}]), json!([]));
    let e = run(&p, &[c], &[], &[], &mixed_classes()).unwrap();
    assert_eq!(e.claims[0].devices[0].kind, Kind::Unknown);
    assert!(
        e.notes
            .iter()
            .any(|n| n == "node n1 has no ResourceSlices: what its devices are is unknown"),
        "{:?}",
        e.notes
    );
    assert!(e.notes.iter().any(|n| {
        n.contains("gpu.nvidia.com/n1/gpu-0 of claim ml/c1 is not in node n1's ResourceSlices")
    }));
    assert!(e.pairs.pairs.is_empty() && e.best.is_none());
    assert_eq!(
        e.reasons,
        ["the pod holds no GPU with a NIC: there is no pair to compare"]
    );
}

#[test]
fn a_claim_whose_own_selector_asks_for_a_worse_pair_is_first_fit_and_says_so() {
    let slices = own_slices();
    let mut spec = spec_json(&ClaimSpec::pairs(1));
    let expr = r#"device.attributes["topoalign.dev"]["rank"] == 3"#;
    spec["devices"]["requests"][0]["exactly"]["selectors"] = json!([{"cel": {"expression": expr}}]);
    // What the stock allocator takes for it on the empty node.
    let claim_spec: k8s_openapi::api::resource::v1::ResourceClaimSpec =
        serde_json::from_value(spec.clone()).unwrap();
    let node = NodeDevices::gather(&slices, NODE).unwrap();
    let got = first_fit(&claim_spec, &device_classes(), &node, DEFAULT_BUDGET)
        .unwrap()
        .allocation
        .unwrap();
    let c = claim("ml", "c1", spec, &[("pairs", DRIVER_NAME, &got[0].device)]);
    let p = pod(
        json!([{"name": "gpus", "resourceClaimName": "c1"}]),
        json!([]),
    );
    let e = run(&p, &[c], &slices, &[], &device_classes()).unwrap();
    assert_eq!(e.claims[0].first_fit, Some(true));
    assert_eq!(e.claims[0].selectors, [expr]);
    assert_eq!(e.pairs.worst, Some(PcieClass::Node));
    assert!(!e.as_good);
    assert_eq!(
        e.reasons[..2],
        [
            "the stock allocator takes the first fit and does not score pairs (replayed on the free devices: the same devices)".to_string(),
            format!("claim ml/c1's requests narrow the choice with their own selectors: {expr}"),
        ]
    );
    assert!(
        e.reasons[2].contains("(NODE) although") && e.reasons[2].ends_with("(PIX) was free"),
        "{:?}",
        e.reasons
    );
}

#[test]
fn a_pod_asking_an_extended_resource_is_explained_by_the_claim_the_scheduler_made() {
    let slices = own_slices();
    let pairs = pairs_of_one_gpu(&slices);
    let p: Pod = serde_json::from_value(json!({
        "metadata": {"name": "ext", "namespace": "ml"},
        "spec": {"nodeName": NODE, "containers": [{"name": "c", "image": "x",
            "resources": {"limits": {"topoalign.dev/gpu-nic-pair": "1"}}}]},
        "status": {"extendedResourceClaimStatus": {
            "resourceClaimName": "ext-extended-resources-x7k2p",
            "requestMappings": [{"containerName": "c", "resourceName": "topoalign.dev/gpu-nic-pair",
                                 "requestName": "container-0-request-0"}]}}}))
    .unwrap();
    let refs = claim_refs(&p).unwrap();
    assert_eq!(refs.len(), 1);
    assert_eq!(refs[0].claim, "ext-extended-resources-x7k2p");
    let c = claim(
        "ml",
        "ext-extended-resources-x7k2p",
        json!({"devices": {"requests": [{"name": "container-0-request-0",
            "exactly": {"deviceClassName": "gpu-nic-pair.topoalign.dev", "count": 1}}]}}),
        &[("container-0-request-0", DRIVER_NAME, &pairs[0].0)],
    );
    let e = run(&p, &[c], &slices, &[], &device_classes()).unwrap();
    assert_eq!(e.source, "claims");
    assert_eq!(e.claims[0].devices[0].kind, Kind::Pair);
    assert_eq!(e.pairs.pairs.len(), 1);
}
