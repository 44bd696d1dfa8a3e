//! The NICs' neighbours read again while the agent runs, from a saved `lldpctl -f json`
//! that changes between reads: the same neighbours change nothing, a recabled node moves
//! its rails and its leaf (republished in the NodeResourceTopology object and the domain
//! labels), a file that no longer reads keeps the last good neighbours and is counted.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Map, Value, json};
use tokio_stream::wrappers::UnixListenerStream;
use tonic::{Request, Response, Status};
use topoalign_fabric::{RailSource, parse_rail_source};
use topoalign_kube_types::kubelet_settings::Settings;
use topoalign_kube_types::labels::RAILS_ANNOTATION;
use topoalign_node_facts::{Follower, NodeFacts, WiringFlags};
use topoalign_topology::Topology;

use super::*;
use crate::pod_resources_api::pod_resources_lister_server::{
    PodResourcesLister, PodResourcesListerServer,
};
use crate::pod_resources_api::*;
use crate::run::Config;

const LEAF: &str = "fabric.topograph.run/tier-0";

/// `lldpctl -f json` as lldpd prints it for NICs `rdma<i>` cabled to `switches[i]`
/// (port `swp<i + 1>`).
fn lldpctl_json(switches: &[String]) -> String {
    let interface: Vec<Value> = (switches.iter().enumerate())
        .map(|(i, switch)| {
            let mut chassis = Map::new();
            chassis.insert(
                switch.clone(),
                json!({"id": {"type": "mac", "value": format!("0c:42:a1:00:10:{i:02x}")},
                       "descr": "test switch"}),
            );
            let mut one = Map::new();
            one.insert(
                format!("rdma{i}"),
                json!({"via": "LLDP", "rid": (i + 1).to_string(), "chassis": chassis,
                       "port": {"id": {"type": "ifname", "value": format!("swp{}", i + 1)}}}),
            );
            Value::Object(one)
        })
        .collect();
    serde_json::to_string_pretty(&json!({"lldp": {"interface": interface}})).unwrap()
}

/// The eight leaves of scalable unit `su`, one per rail (`leaf-r<rail>-su<su>`).
fn leaves(su: u32) -> Vec<String> {
    (0..8).map(|r| format!("leaf-r{r}-su{su}")).collect()
}

fn rail_source() -> RailSource {
    parse_rail_source(
        "rule: switch\nrails: 8\nswitchPattern: \"leaf-r{rail}-*\"\n",
        "rails.yaml",
    )
    .unwrap()
}

/// A saved lldpctl output at `dir/lldp.json` with `switches`, followed with the rail
/// source.
fn setup(dir: &Path, switches: &[String]) -> (PathBuf, Follower) {
    let file = dir.join("lldp.json");
    std::fs::write(&file, lldpctl_json(switches)).unwrap();
    let flags = WiringFlags {
        lldp_from: Some(file.display().to_string()),
        ..WiringFlags::default()
    };
    let rw = Follower::new(flags, Some(rail_source()));
    assert!(rw.rereads());
    (file, rw)
}

/// The facts at start, as `AgentArgs::config` reads them.
fn at_start(rw: &Follower, topo: &Topology) -> NodeFacts {
    let wiring = rw.read(topo).unwrap();
    rw.refresh(&NodeFacts::default(), topo, wiring).unwrap()
}

/// The rail of the NIC named `netdev`.
fn rail(facts: &NodeFacts, topo: &Topology, netdev: &str) -> Option<u32> {
    let i = (topo.nics.iter())
        .position(|n| n.netdev.as_deref() == Some(netdev))
        .unwrap();
    facts.rails.as_ref().unwrap().rail_of(topo.nic_bdf(i))
}

/// Replaces `file` with `text` at once (the running loop never reads half a file).
fn put(file: &Path, text: &str) {
    let tmp = file.with_extension("tmp");
    std::fs::write(&tmp, text).unwrap();
    std::fs::rename(&tmp, file).unwrap();
}

fn errors(m: &Metrics) -> u64 {
    m.errors
        .get_or_create(&crate::metrics::Component {
            component: COMPONENT,
        })
        .get()
}

#[tokio::test]
async fn a_read_again_follows_a_recabled_node_and_keeps_the_last_good_on_a_bad_read() {
    let topo = topoalign_profiles::get("mi300x-8").unwrap();
    let dir = tempfile::tempdir().unwrap();
    let (file, rw) = setup(dir.path(), &leaves(1));
    let facts = at_start(&rw, &topo);
    let leaf_su1 = facts.leaf.clone().unwrap().value.unwrap();
    assert_eq!(
        (rail(&facts, &topo, "rdma0"), rail(&facts, &topo, "rdma1")),
        (Some(0), Some(1))
    );
    let m = Metrics::new();

    // The same neighbours: nothing new.
    assert_eq!(rescan(&rw, &facts, &topo, &m).await, None);

    // rdma0 and rdma1 swap cables, and the node moves to scalable unit 2.
    let mut su2 = leaves(2);
    su2.swap(0, 1);
    std::fs::write(&file, lldpctl_json(&su2)).unwrap();
    let moved = rescan(&rw, &facts, &topo, &m).await.unwrap();
    assert_eq!(
        (rail(&moved, &topo, "rdma0"), rail(&moved, &topo, "rdma1")),
        (Some(1), Some(0))
    );
    let leaf_su2 = moved.leaf.clone().unwrap().value.unwrap();
    assert_ne!(leaf_su2, leaf_su1);
    let labels = moved.labels(&BTreeMap::new(), &Default::default());
    assert_eq!(labels.write[LEAF], leaf_su2);
    assert_eq!(errors(&m), 0);
    // Read again, the new neighbours are the facts' own: nothing new.
    assert_eq!(rescan(&rw, &moved, &topo, &m).await, None);

    // A file that no longer reads, then none at all: nothing new, each read counted.
    std::fs::write(&file, "{\"lldp\": {\"interface\": [").unwrap();
    assert_eq!(rescan(&rw, &moved, &topo, &m).await, None);
    assert_eq!(errors(&m), 1);
    std::fs::remove_file(&file).unwrap();
    assert_eq!(rescan(&rw, &moved, &topo, &m).await, None);
    assert_eq!(errors(&m), 2);

    // Neighbours the rail source cannot place (one NIC's switch gone): the last good
    // stay, counted, and the next good read is taken.
    let mut short = leaves(3);
    short.truncate(7);
    std::fs::write(&file, lldpctl_json(&short)).unwrap();
    let read = rw.read(&topo).map_err(Box::new);
    assert!(read.is_ok(), "{read:?}");
    let kept = follow(&rw, &moved, &topo, read, &m);
    assert_eq!(kept, None);
    assert_eq!(errors(&m), 3);
    std::fs::write(&file, lldpctl_json(&leaves(3))).unwrap();
    let su3 = rescan(&rw, &moved, &topo, &m).await.unwrap();
    assert_ne!(su3.leaf, moved.leaf);
}

/// The stand-in kubelet: no devices, no pods (the report never changes).
struct Kubelet;

#[tonic::async_trait]
impl PodResourcesLister for Kubelet {
    async fn list(
        &self,
        _: Request<ListPodResourcesRequest>,
    ) -> Result<Response<ListPodResourcesResponse>, Status> {
        Ok(Response::new(ListPodResourcesResponse::default()))
    }

    async fn get_allocatable_resources(
        &self,
        _: Request<AllocatableResourcesRequest>,
    ) -> Result<Response<AllocatableResourcesResponse>, Status> {
        Ok(Response::new(AllocatableResourcesResponse::default()))
    }

    async fn get(
        &self,
        _: Request<GetPodResourcesRequest>,
    ) -> Result<Response<GetPodResourcesResponse>, Status> {
        Err(Status::unimplemented("not used"))
    }
}

/// What the fake API server saw: the rails annotation of each NodeResourceTopology
/// apply, the labels of each Node apply, and the reads of the Node.
#[derive(Debug, Default)]
struct Seen {
    rails: Vec<Value>,
    labels: Vec<BTreeMap<String, String>>,
    node_reads: usize,
}

/// A client of a fake API server holding Node n1 and its NodeResourceTopology object: a
/// read answers the node with the labels applied last, owned by the agent.
fn fake_api(seen: Arc<Mutex<Seen>>) -> kube::Client {
    let svc = tower::service_fn(move |req: http::Request<kube::client::Body>| {
        let seen = seen.clone();
        async move {
            let apply = req.method() == http::Method::PATCH;
            let nrt = req.uri().path().contains("noderesourcetopologies");
            let body = req.into_body().collect_bytes().await?;
            let mut seen = seen.lock().unwrap();
            let reply = if nrt {
                let v: Value = serde_json::from_slice(&body).unwrap();
                let rails = &v["metadata"]["annotations"][RAILS_ANNOTATION];
                seen.rails.push(rails.clone());
                v
            } else {
                if apply {
                    let v: Value = serde_json::from_slice(&body).unwrap();
                    let labels = serde_json::from_value(v["metadata"]["labels"].clone());
                    seen.labels.push(labels.unwrap());
                } else {
                    seen.node_reads += 1;
                }
                let labels = seen.labels.last().cloned().unwrap_or_default();
                let owned: Map<String, Value> = (labels.keys())
                    .map(|k| (format!("f:{k}"), json!({})))
                    .collect();
                json!({
                    "apiVersion": "v1", "kind": "Node",
                    "metadata": {"name": "n1", "labels": labels, "managedFields": [
                        {"manager": crate::publish::FIELD_MANAGER, "operation": "Apply",
                         "fieldsType": "FieldsV1",
                         "fieldsV1": {"f:metadata": {"f:labels": owned}}}]}
                })
            };
            let body = kube::client::Body::from(serde_json::to_vec(&reply).unwrap());
            Ok::<_, kube::Error>(http::Response::new(body))
        }
    });
    kube::Client::new(svc, "default")
}

/// Waits up to 10 s for `done` to hold on what the server saw and the metrics say.
async fn until(seen: &Mutex<Seen>, m: &Metrics, done: impl Fn(&Seen, &Metrics) -> bool) {
    for _ in 0..1000 {
        if done(&seen.lock().unwrap(), m) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("not reached: {:?}", seen.lock().unwrap());
}

/// The agent's loop against a stand-in kubelet and a fake API server, the saved lldpctl
/// output changing between its reads.
#[tokio::test]
async fn the_loop_republishes_rails_and_leaf_only_when_the_neighbours_change() {
    let topo = topoalign_profiles::get("mi300x-8").unwrap();
    let dir = tempfile::tempdir().unwrap();
    let every = Duration::from_millis(40);
    let (file, rw) = setup(dir.path(), &leaves(1));
    let facts = at_start(&rw, &topo);
    let leaf_su1 = facts.leaf.clone().unwrap().value.unwrap();
    let socket = dir.path().join("kubelet.sock");
    let listener = tokio::net::UnixListener::bind(&socket).unwrap();
    tokio::spawn(
        tonic::transport::Server::builder()
            .add_service(PodResourcesListerServer::new(Kubelet))
            .serve_with_incoming(UnixListenerStream::new(listener)),
    );
    let cfg = Config {
        node: "n1".into(),
        topology: topo.clone(),
        settings: Settings::default(),
        socket,
        interval: Duration::from_millis(20),
        heartbeat: Duration::from_secs(3600),
        label_hold: Duration::from_secs(3600),
        timeout: Duration::from_secs(5),
        facts,
        follower: rw,
        rescan_interval: every,
    };
    let seen = Arc::new(Mutex::new(Seen::default()));
    let m = Arc::new(Metrics::new());
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let agent = tokio::spawn(crate::daemon::run(
        cfg,
        fake_api(seen.clone()),
        m.clone(),
        async {
            let _ = stopped.await;
        },
    ));
    until(&seen, &m, |s, _| s.rails.len() == 1 && s.labels.len() == 1).await;
    let rails_su1 = seen.lock().unwrap().rails[0].clone();
    assert!(rails_su1.is_string(), "{rails_su1}");
    assert_eq!(seen.lock().unwrap().labels[0][LEAF], leaf_su1);

    // Unchanged neighbours, read again several times: nothing written, the node not read.
    tokio::time::sleep(every * 8).await;
    {
        let s = seen.lock().unwrap();
        assert_eq!(
            (s.rails.len(), s.labels.len(), s.node_reads),
            (1, 1, 1),
            "{s:?}"
        );
    }

    // Recabled: rdma0 and rdma1 swap, the node moves to scalable unit 2.
    let mut su2 = leaves(2);
    su2.swap(0, 1);
    put(&file, &lldpctl_json(&su2));
    until(&seen, &m, |s, _| s.rails.len() == 2 && s.labels.len() == 2).await;
    let (rails_su2, labels_su2) = {
        let s = seen.lock().unwrap();
        (s.rails[1].clone(), s.labels[1].clone())
    };
    let rails_of = |v: &Value| -> Value { serde_json::from_str(v.as_str().unwrap()).unwrap() };
    let (before, after) = (rails_of(&rails_su1), rails_of(&rails_su2));
    let bdf = |netdev: &str| {
        let i = (topo.nics.iter())
            .position(|n| n.netdev.as_deref() == Some(netdev))
            .unwrap();
        topo.nic_bdf(i).to_string()
    };
    let (r0, r1) = (bdf("rdma0"), bdf("rdma1"));
    assert_eq!(
        (&before["nics"][&r0], &before["nics"][&r1]),
        (&json!(0), &json!(1))
    );
    assert_eq!(
        (&after["nics"][&r0], &after["nics"][&r1]),
        (&json!(1), &json!(0))
    );
    assert_ne!(labels_su2[LEAF], leaf_su1);
    assert!(labels_su2[LEAF].contains("su2"), "{labels_su2:?}");

    // A file that no longer reads, then none: counted, the last good kept, nothing
    // written.
    put(&file, "{\"lldp\": ");
    until(&seen, &m, |_, m| errors(m) >= 1).await;
    std::fs::remove_file(&file).unwrap();
    let now = errors(&m);
    until(&seen, &m, |_, m| errors(m) > now).await;
    tokio::time::sleep(every * 4).await;
    {
        let s = seen.lock().unwrap();
        assert_eq!((s.rails.len(), s.labels.len()), (2, 2), "{s:?}");
    }
    stop.send(()).unwrap();
    tokio::time::timeout(Duration::from_secs(5), agent)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
}
