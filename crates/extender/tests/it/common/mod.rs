//! Shared builders: cluster states from the built-in profiles, pods as the scheduler sends
//! them.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::SystemTime;

use serde_json::{Value, json};
use topoalign_extender::Interner;
use topoalign_extender::{ClusterState, NodeEntry, NodeInfo, Source};
use topoalign_kube_types::kubelet_settings::{Policy, Settings};
use topoalign_topology::NodeUsage;

/// A node from a profile with `gpus`/`nics` in use under `policy`.
pub(crate) fn node(
    interner: &mut Interner,
    profile: &str,
    policy: Policy,
    gpus: &[&str],
    nics: &[&str],
) -> NodeEntry {
    let topology = interner.profile(profile).unwrap();
    let settings = Settings {
        topology_manager_policy: policy,
        ..Settings::default()
    };
    let used = NodeUsage {
        gpus: gpus.iter().map(|b| b.parse().unwrap()).collect(),
        nics: nics.iter().map(|b| b.parse().unwrap()).collect(),
        ..NodeUsage::default()
    };
    NodeEntry::Known(NodeInfo {
        topology,
        settings: Arc::new(settings),
        used,
        source: Source::Labels,
        reported_at: None,
        reported_pods: BTreeSet::new(),
    })
}

/// Marks a known entry as reported by an agent at `at`.
pub(crate) fn reported(entry: NodeEntry, at: SystemTime) -> NodeEntry {
    match entry {
        NodeEntry::Known(mut i) => {
            i.source = Source::Nrt;
            i.reported_at = Some(at);
            NodeEntry::Known(i)
        }
        b => b,
    }
}

/// A pod with one container limited to `limits`, with `annotations`.
pub(crate) fn pod(name: &str, limits: Value, annotations: Value) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "uid": format!("uid-{name}"), "annotations": annotations},
        "spec": {"containers": [{"name": "main", "image": "x", "resources": {"limits": limits, "requests": limits}}]}
    })
}

/// An empty state with default clocks.
pub(crate) fn state() -> ClusterState {
    ClusterState::default()
}

/// mi300x-8 addresses from seed 000: GPUs per NUMA node, and the PFs.
pub(crate) const MI_GPUS_N0: [&str; 4] = [
    "0000:11:00.0",
    "0000:2f:00.0",
    "0000:46:00.0",
    "0000:5d:00.0",
];
/// NUMA 1 GPUs.
pub(crate) const MI_GPUS_N1: [&str; 4] = [
    "0000:8b:00.0",
    "0000:aa:00.0",
    "0000:c2:00.0",
    "0000:da:00.0",
];

/// One HTTP/1.1 request to `addr` (hyper's client over a fresh TCP connection).
pub(crate) async fn http(
    addr: std::net::SocketAddr,
    method: &str,
    path: &str,
    body: Vec<u8>,
) -> (u16, String) {
    use http_body_util::{BodyExt, Full};
    use hyper::body::Bytes;
    let stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    let io = hyper_util::rt::TokioIo::new(stream);
    let (mut send, conn) = hyper::client::conn::http1::handshake(io).await.unwrap();
    tokio::spawn(conn);
    let req = hyper::Request::builder()
        .method(method)
        .uri(path)
        .header("host", "localhost")
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from(body)))
        .unwrap();
    let resp = send.send_request(req).await.unwrap();
    let status = resp.status().as_u16();
    let bytes = resp.into_body().collect().await.unwrap().to_bytes();
    (status, String::from_utf8_lossy(&bytes).into_owned())
}

/// The two-node state of the protocol fixtures: `mi-free` (restricted, empty) and
/// `mi-split` (restricted, two GPUs taken on each socket).
pub(crate) fn fixture_state() -> ClusterState {
    let mut i = Interner::default();
    let mut st = state();
    let split = [MI_GPUS_N0[0], MI_GPUS_N0[1], MI_GPUS_N1[0], MI_GPUS_N1[1]];
    st.upsert_node(
        "mi-free",
        node(&mut i, "mi300x-8", Policy::Restricted, &[], &[]),
    );
    st.upsert_node(
        "mi-split",
        node(&mut i, "mi300x-8", Policy::Restricted, &split, &[]),
    );
    st
}

/// deploy/gang/rails.yaml: the NIC nearest GPU i is rail i.
const RAILS: &str = include_str!("../../../../../deploy/gang/rails.yaml");

/// A dgx-h100 named `node` with rails from deploy/gang/rails.yaml, and the GPU devices
/// whose pairs are on `rails`.
pub(crate) fn railed_node(
    node: &str,
    rails: &BTreeSet<u32>,
) -> (topoalign_dra::publish::Inventory, Vec<String>) {
    let topo = topoalign_profiles::get("dgx-h100").unwrap();
    let resolved = topoalign_fabric::nic_rails(
        &topo,
        &topoalign_fabric::parse_rail_source(RAILS, "rails.yaml").unwrap(),
    )
    .unwrap();
    let mut inv = topoalign_dra::publish::Inventory::from_topology(&topo);
    inv.set_rails(|b| resolved.rail_of(b));
    let gpus: BTreeSet<String> = topoalign_dra::publish::slices_for(&inv, node, 1)
        .unwrap()
        .iter()
        .flat_map(|s| s.spec.devices.iter().flatten())
        .filter_map(|d| {
            let a = d.attributes.as_ref()?;
            let rail = a.get("rail")?.int?;
            let on = rails.contains(&u32::try_from(rail).ok()?);
            (d.name.starts_with("pair-") && on).then(|| a.get("gpu")?.string.clone())?
        })
        .collect();
    (inv, gpus.into_iter().collect())
}
