//! The DRA path through the real HTTP server on loopback: pods with claims of
//! topoalign.dev classes are judged on the nodes' ResourceSlices (filter and prioritize),
//! nodes without slices pass with the neutral score, and the verdicts are counted. Pods
//! whose claims take GPUs from NVIDIA's driver and NICs from dranet are judged on what the
//! stock allocator gives them on each node's free devices.

use std::sync::{Arc, RwLock};

use crate::common::http;
use k8s_openapi::api::resource::v1::{
    DeviceClass, ResourceClaim, ResourceClaimTemplate, ResourceSlice,
};
use serde_json::{Value, json};
use topoalign_dra::{
    claim::{ClaimSpec, claim_template},
    publish::{PublishOptions, device_classes, resource_slices},
};
use topoalign_extender::ClusterState;
use topoalign_extender::Decider;
use topoalign_extender::{App, serve};
use topoalign_tm::ResourceMap;

/// An extender with topoalign's DeviceClasses and no node yet, keeping no room for
/// waiting pods (pair quality, then packing).
pub(crate) fn bare_app() -> Arc<App> {
    let app = Arc::new(App::new(
        Arc::new(RwLock::new(ClusterState::default())),
        Decider::new(ResourceMap::default(), 1000),
    ));
    {
        let mut st = app.dra.write();
        st.keep_room = false;
        for c in device_classes() {
            st.apply_class(&c);
        }
    }
    app
}

fn app() -> Arc<App> {
    let app = bare_app();
    {
        let mut st = app.dra.write();
        for (node, profile) in [("mi", "mi300x-8"), ("gb", "gb300-4"), ("mi2", "mi300x-8")] {
            let topo = topoalign_profiles::get(profile).unwrap();
            for s in resource_slices(&topo, node, &PublishOptions::default()).unwrap() {
                st.apply_slice(&s);
            }
        }
        for (name, n, max_rank) in [
            ("pairs-2", 2, None),
            ("pairs-8", 8, None),
            ("pxb-1", 1, Some(1)),
        ] {
            let mut spec = ClaimSpec::pairs(n);
            spec.max_rank = max_rank;
            let mut t = claim_template(&spec).unwrap();
            t.metadata.name = Some(name.into());
            t.metadata.namespace = Some("ns".into());
            st.apply_template(&t);
        }
    }
    app
}

fn args(template: &str) -> Vec<u8> {
    args_on(template, &["mi", "gb", "plain"])
}

fn args_on(template: &str, nodes: &[&str]) -> Vec<u8> {
    let pod = json!({
        "metadata": {"namespace": "ns", "name": "p", "uid": "u1"},
        "spec": {"containers": [{"name": "c", "resources": {"claims": [{"name": "g"}]}}],
                 "resourceClaims": [{"name": "g", "resourceClaimTemplateName": template}]},
    });
    serde_json::to_vec(&json!({"Pod": pod, "NodeNames": nodes})).unwrap()
}

async fn priorities(addr: std::net::SocketAddr, body: Vec<u8>) -> Vec<(String, i64)> {
    let (code, body) = http(addr, "POST", "/prioritize", body).await;
    assert_eq!(code, 200, "{body}");
    serde_json::from_str::<Vec<Value>>(&body)
        .unwrap()
        .iter()
        .map(|h| {
            (
                h["Host"].as_str().unwrap().to_string(),
                h["Score"].as_i64().unwrap(),
            )
        })
        .collect()
}

#[tokio::test]
async fn claims_pods_are_judged_on_slices_over_http() {
    let app = app();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(serve(listener, app.clone(), async move {
        let _ = rx.await;
    }));

    // rank <= 1: gb300-4 publishes NODE pairs only and is dropped; the node without
    // slices passes (never filtered).
    let (code, body) = http(addr, "POST", "/filter", args("pxb-1")).await;
    assert_eq!(code, 200, "{body}");
    let r: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(r["NodeNames"], json!(["mi", "plain"]));
    assert!(
        r["FailedNodes"]["gb"]
            .as_str()
            .unwrap()
            .contains("cannot be allocated"),
        "{body}"
    );
    assert_eq!(r["FailedAndUnresolvableNodes"], json!({}));

    // Two pairs: PIX pairs on mi300x-8 first (10, alone), NODE pairs on gb300-4 a step
    // below (8; 9 is for candidates as good as the first); no slices: neutral 5.
    let scores = priorities(addr, args("pairs-2")).await;
    assert_eq!(
        scores,
        [
            ("mi".to_string(), 10),
            ("gb".to_string(), 8),
            ("plain".to_string(), 5)
        ]
    );

    // Room for what waits: while a pod of 8 pairs waits, the 2-pair pod goes where it
    // leaves a whole node for it (the free gb300-4, though its pairs are worse).
    let waiter: k8s_openapi::api::core::v1::Pod = serde_json::from_value(json!({
        "metadata": {"namespace": "ns", "name": "big", "uid": "u-big",
                     "creationTimestamp": "2026-01-01T00:00:00Z"},
        "spec": {"containers": [{"name": "c"}],
                 "resourceClaims": [{"name": "g", "resourceClaimTemplateName": "pairs-8"}]},
    }))
    .unwrap();
    app.dra.write().keep_room = true;
    let both = ["mi", "gb"];
    let free = priorities(addr, args_on("pairs-2", &both)).await;
    assert_eq!((free[0].1, free[1].1), (10, 8), "{free:?}");
    app.dra.apply_pending(&waiter);
    assert_eq!(app.dra.waiting_count(), 1);
    let kept = priorities(addr, args_on("pairs-2", &both)).await;
    assert_eq!((kept[0].1, kept[1].1), (8, 10), "{kept:?}");
    let mut bound = waiter.clone();
    if let Some(spec) = bound.spec.as_mut() {
        spec.node_name = Some("mi2".into());
    }
    app.dra.apply_pending(&bound);
    assert_eq!(app.dra.waiting_count(), 0);
    // Bound, it is a shape that came lately: on mi the pod would leave no room for
    // another like it, so the cluster runs full for it and pair quality is not weighed:
    // by name, gb first (9 for mi: as good, after it by name).
    let after = priorities(addr, args_on("pairs-2", &both)).await;
    assert_eq!((after[0].1, after[1].1), (9, 10), "{after:?}");
    app.dra.write().keep_room = false;

    // A template not in the watch cache: every node neutral, nothing filtered.
    let (_, body) = http(addr, "POST", "/filter", args("unknown")).await;
    let r: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(r["NodeNames"], json!(["mi", "gb", "plain"]));

    // Readiness waits for the DRA lists when they are expected.
    app.set_ready(true);
    app.dra.expect_lists();
    assert_eq!(http(addr, "GET", "/readyz", vec![]).await.0, 503);
    app.dra.set_ready();
    assert_eq!(http(addr, "GET", "/readyz", vec![]).await.0, 200);

    let (_, metrics) = http(addr, "GET", "/metrics", vec![]).await;
    for want in [
        r#"topoalign_extender_dra_verdicts_total{verb="filter",outcome="fit"} 1"#,
        r#"topoalign_extender_dra_verdicts_total{verb="filter",outcome="reject"} 1"#,
        r#"topoalign_extender_dra_verdicts_total{verb="prioritize",outcome="fit"} 8"#,
        r#"topoalign_extender_dra_verdicts_total{verb="filter",outcome="dra_claim_unseen"} 3"#,
        r#"topoalign_extender_nodes_filtered_total{reason="dra_claim"} 1"#,
        r#"topoalign_extender_nodes_neutral_total{reason="dra_no_slices"} 2"#,
        r#"topoalign_extender_dra_state{what="nodes"} 3"#,
    ] {
        assert!(metrics.contains(want), "{want} missing in:\n{metrics}");
    }
    tx.send(()).unwrap();
    server.await.unwrap().unwrap();
}

/// The fixture's slices of NVIDIA's GPU driver and dranet for `node` (copied from the
/// fixture's node `from`), and its classes.
fn foreign_objects(from: &str, node: &str) -> (Vec<ResourceSlice>, Vec<DeviceClass>) {
    let list: Value =
        serde_json::from_str(include_str!("../fixtures/gb300-nvidia-dranet.json")).unwrap();
    let (mut slices, mut classes) = (Vec::new(), Vec::new());
    for item in list["items"].as_array().unwrap() {
        if item["kind"] == "DeviceClass" {
            classes.push(serde_json::from_value(item.clone()).unwrap());
            continue;
        }
        if item["spec"]["nodeName"] != from {
            continue;
        }
        let mut item = item.clone();
        let name = item["metadata"]["name"]
            .as_str()
            .unwrap()
            .replace(from, node);
        item["metadata"]["name"] = json!(name);
        item["spec"]["nodeName"] = json!(node);
        item["spec"]["pool"]["name"] = json!(node);
        slices.push(serde_json::from_value::<ResourceSlice>(item).unwrap());
    }
    (slices, classes)
}

/// An allocated claim holding `devices` (driver, device) of `node`'s pools.
pub(crate) fn holding(name: &str, node: &str, devices: &[(&str, &str)]) -> ResourceClaim {
    let results: Vec<Value> = devices
        .iter()
        .map(|(driver, d)| json!({"request": "r", "driver": driver, "pool": node, "device": d}))
        .collect();
    serde_json::from_value(json!({
        "metadata": {"namespace": "ns", "name": name},
        "spec": {"devices": {"requests": []}},
        "status": {"allocation": {"devices": {"results": results}}},
    }))
    .unwrap()
}

#[tokio::test]
async fn gpu_and_nic_claims_of_other_drivers_are_judged_over_http() {
    let app = Arc::new(App::new(
        Arc::new(RwLock::new(ClusterState::default())),
        Decider::new(ResourceMap::default(), 1000),
    ));
    {
        let mut st = app.dra.write();
        st.keep_room = false;
        for (from, node) in [
            ("gb-new", "aligned"),
            ("gb-new", "crossed"),
            ("gb-new", "full"),
            ("gb-old", "old-driver"),
        ] {
            let (slices, classes) = foreign_objects(from, node);
            for c in &classes {
                st.apply_class(c);
            }
            for s in &slices {
                st.apply_slice(s);
            }
        }
        // crossed: both NUMA-0 NICs held, so the allocator gives GPU 0 (NUMA 0) the
        // NUMA-1 NIC; full: every GPU held.
        st.apply_claim(&holding(
            "nics",
            "crossed",
            &[
                ("dra.net", "pci-0101-00-00-0"),
                ("dra.net", "pci-0102-00-00-0"),
            ],
        ));
        let gpus: Vec<(&str, &str)> = ["gpu-0", "gpu-1", "gpu-2", "gpu-3"]
            .map(|g| ("gpu.nvidia.com", g))
            .to_vec();
        st.apply_claim(&holding("gpus", "full", &gpus));
        // Seed 001's claim without its matchAttribute: one GPU, one NIC.
        let t: ResourceClaimTemplate = serde_json::from_value(json!({
            "metadata": {"namespace": "ns", "name": "gpu-nic"},
            "spec": {"spec": {"devices": {"requests": [
                {"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com"}},
                {"name": "nic", "exactly": {"deviceClassName": "dranet.net"}}]}}}}))
        .unwrap();
        st.apply_template(&t);
    }
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(serve(listener, app.clone(), async move {
        let _ = rx.await;
    }));
    let nodes = ["aligned", "crossed", "full", "old-driver", "plain"];

    // The node whose GPUs are all held is dropped; the others pass (the old driver's
    // and the node without slices are not judged, never filtered).
    let (code, body) = http(addr, "POST", "/filter", args_on("gpu-nic", &nodes)).await;
    assert_eq!(code, 200, "{body}");
    let r: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(
        r["NodeNames"],
        json!(["aligned", "crossed", "old-driver", "plain"])
    );
    assert!(
        r["FailedNodes"]["full"]
            .as_str()
            .unwrap()
            .contains("cannot be allocated"),
        "{body}"
    );

    // The class the allocator gives comes first: same NUMA node (NODE) in the band
    // 8 … 6, cross-NUMA (SYS) 4 … 1; the best candidate alone scores its band's top, the
    // next one step below (SYS: 3). No NUMA node published, and no slices: neutral 5,
    // between the two.
    let scores = priorities(addr, args_on("gpu-nic", &nodes)).await;
    let by: std::collections::BTreeMap<&str, i64> =
        scores.iter().map(|(n, s)| (n.as_str(), *s)).collect();
    assert_eq!(by["aligned"], 8, "{scores:?}");
    assert_eq!(by["crossed"], 3, "{scores:?}");
    assert_eq!((by["full"], by["old-driver"], by["plain"]), (0, 5, 5));

    let (_, metrics) = http(addr, "GET", "/metrics", vec![]).await;
    for want in [
        r#"topoalign_extender_dra_verdicts_total{verb="filter",outcome="fit"} 2"#,
        r#"topoalign_extender_dra_verdicts_total{verb="filter",outcome="reject"} 1"#,
        r#"topoalign_extender_dra_verdicts_total{verb="prioritize",outcome="dra_blind"} 1"#,
        r#"topoalign_extender_nodes_neutral_total{reason="dra_blind"} 2"#,
        r#"topoalign_extender_dra_state{what="nodes"} 4"#,
    ] {
        assert!(metrics.contains(want), "{want} missing in:\n{metrics}");
    }
    tx.send(()).unwrap();
    server.await.unwrap().unwrap();
}

/// A claim of dra-driver-cpu's CPUs held by another pod: allocated `cpus` CPUs of
/// `node`'s grouped CPU device of NUMA node `numa`.
fn cpu_share_claim(name: &str, node: &str, numa: u32, cpus: usize) -> ResourceClaim {
    serde_json::from_value(json!({
        "metadata": {"namespace": "ns", "name": name},
        "spec": {},
        "status": {"allocation": {"devices": {"results": [{
            "request": "cpus", "driver": "dra.cpu", "pool": node,
            "device": format!("cpudevnuma{numa:03}"),
            "consumedCapacity": {"dra.cpu/cpu": cpus.to_string()},
        }]}}},
    }))
    .unwrap()
}

/// Pods asking CPUs beside their pairs (`claims --cpus`) through the HTTP filter: a
/// node whose CPU groups other pods' claims have used up is filtered, and passes again
/// once a share is released.
#[tokio::test]
async fn cpu_groups_used_up_by_other_claims_filter_the_node_over_http() {
    use topoalign_dra::claim::{CpuClaim, CpuMode, CpuRelease, cpu_device_class, cpu_slices};
    let app = bare_app();
    let topo = topoalign_profiles::get("dgx-h100").unwrap();
    let per_group = |numa: usize| topo.numa[numa].cpus.len();
    {
        let mut st = app.dra.write();
        st.apply_class(&cpu_device_class("dra.cpu"));
        for node in ["a", "b"] {
            for s in resource_slices(&topo, node, &PublishOptions::default()).unwrap() {
                st.apply_slice(&s);
            }
            for s in cpu_slices(&topo, node, CpuMode::Grouped, CpuRelease::Main).unwrap() {
                st.apply_slice(&s);
            }
        }
        let mut spec = ClaimSpec::pairs(2);
        spec.cpus = Some(CpuClaim::new(16));
        let mut t = claim_template(&spec).unwrap();
        t.metadata.name = Some("cpus-16".into());
        t.metadata.namespace = Some("ns".into());
        st.apply_template(&t);
        // Node a: NUMA 0's CPUs all taken, NUMA 1's all but 8 (fewer than 16).
        st.apply_claim(&cpu_share_claim("full0", "a", 0, per_group(0)));
        st.apply_claim(&cpu_share_claim("most1", "a", 1, per_group(1) - 8));
    }
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(serve(listener, app.clone(), async move {
        let _ = rx.await;
    }));
    let filter = || async {
        let (code, body) = http(addr, "POST", "/filter", args_on("cpus-16", &["a", "b"])).await;
        assert_eq!(code, 200, "{body}");
        serde_json::from_str::<Value>(&body).unwrap()
    };
    let r = filter().await;
    assert_eq!(r["NodeNames"], json!(["b"]), "{r}");
    assert!(
        r["FailedNodes"]["a"]
            .as_str()
            .unwrap()
            .contains("cannot be allocated"),
        "{r}"
    );
    // NUMA 1's big share released: 16 CPUs fit there, beside NUMA 1's pairs.
    app.dra.write().delete_claim(&("ns".into(), "most1".into()));
    let r = filter().await;
    assert_eq!(r["NodeNames"], json!(["a", "b"]), "{r}");
    tx.send(()).unwrap();
    server.await.unwrap().unwrap();
}
