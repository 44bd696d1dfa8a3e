//! The pod-resources client over a real unix socket against a tonic server fed fixed
//! allocations (the kubelet's own Go server is exercised by the end-to-end harness), and
//! what the agent then publishes for an mi300x-8 node.

use std::collections::BTreeMap;
use std::time::Duration;

use tokio_stream::wrappers::UnixListenerStream;
use tonic::{Request, Response, Status};
use topoalign_agent::pod_resources_api::pod_resources_lister_server::{
    PodResourcesLister, PodResourcesListerServer,
};
use topoalign_agent::pod_resources_api::*;
use topoalign_agent::{Config, NodeFacts, run_once};
use topoalign_kube_types::kubelet_settings::{Policy, Settings};
use topoalign_kube_types::labels::{PODS_ANNOTATION, REPORTED_AT_ANNOTATION, USED_ANNOTATION};

struct Kubelet;

fn devs(resource: &str, ids: &[&str], numa: i64) -> ContainerDevices {
    ContainerDevices {
        resource_name: resource.to_string(),
        device_ids: ids.iter().map(|s| s.to_string()).collect(),
        topology: Some(TopologyInfo {
            nodes: vec![NumaNode { id: numa }],
        }),
    }
}

const GPUS0: [&str; 4] = [
    "0000:11:00.0",
    "0000:2f:00.0",
    "0000:46:00.0",
    "0000:5d:00.0",
];
const GPUS1: [&str; 4] = [
    "0000:8b:00.0",
    "0000:aa:00.0",
    "0000:c2:00.0",
    "0000:da:00.0",
];
const VFS0: [&str; 4] = [
    "0000:0c:00.1",
    "0000:2a:00.1",
    "0000:41:00.1",
    "0000:58:00.1",
];
const VFS1: [&str; 4] = [
    "0000:86:00.1",
    "0000:a5:00.1",
    "0000:bd:00.1",
    "0000:d5:00.1",
];

#[tonic::async_trait]
impl PodResourcesLister for Kubelet {
    async fn list(
        &self,
        _: Request<ListPodResourcesRequest>,
    ) -> Result<Response<ListPodResourcesResponse>, Status> {
        // One pod holds socket 0's GPUs and one VF per PF there, plus CPUs 2-3.
        Ok(Response::new(ListPodResourcesResponse {
            pod_resources: vec![PodResources {
                name: "train-0".into(),
                namespace: "ml".into(),
                containers: vec![ContainerResources {
                    name: "main".into(),
                    devices: vec![
                        devs("amd.com/gpu", &GPUS0, 0),
                        devs("nvidia.com/sriov-rdma-vf", &VFS0, 0),
                    ],
                    cpu_ids: vec![2, 3],
                    ..Default::default()
                }],
                ..Default::default()
            }],
        }))
    }

    async fn get_allocatable_resources(
        &self,
        _: Request<AllocatableResourcesRequest>,
    ) -> Result<Response<AllocatableResourcesResponse>, Status> {
        Ok(Response::new(AllocatableResourcesResponse {
            devices: vec![
                devs("amd.com/gpu", &GPUS0, 0),
                devs("amd.com/gpu", &GPUS1, 1),
                devs("nvidia.com/sriov-rdma-vf", &VFS0, 0),
                devs("nvidia.com/sriov-rdma-vf", &VFS1, 1),
            ],
            cpu_ids: (0..16).collect(),
            memory: vec![],
        }))
    }

    async fn get(
        &self,
        _: Request<GetPodResourcesRequest>,
    ) -> Result<Response<GetPodResourcesResponse>, Status> {
        Err(Status::unimplemented("not used"))
    }
}

/// The stand-in kubelet served on `dir/kubelet.sock`; returns the socket's path.
fn serve_kubelet(dir: &std::path::Path) -> std::path::PathBuf {
    let sock = dir.join("kubelet.sock");
    let listener = tokio::net::UnixListener::bind(&sock).unwrap();
    tokio::spawn(
        tonic::transport::Server::builder()
            .add_service(PodResourcesListerServer::new(Kubelet))
            .serve_with_incoming(UnixListenerStream::new(listener)),
    );
    sock
}

fn config(socket: std::path::PathBuf) -> Config {
    Config {
        node: "mi-0".into(),
        topology: topoalign_profiles::get("mi300x-8").unwrap(),
        settings: Settings {
            topology_manager_policy: Policy::Restricted,
            ..Settings::default()
        },
        socket,
        interval: Duration::from_secs(10),
        heartbeat: Duration::from_secs(60),
        label_hold: Duration::from_secs(120),
        timeout: Duration::from_secs(5),
        facts: NodeFacts::default(),
        follower: Default::default(),
        rescan_interval: std::time::Duration::from_secs(60),
    }
}

#[tokio::test]
async fn once_reads_the_socket_and_builds_the_nrt_object() {
    let dir = tempfile::tempdir().unwrap();
    let sock = serve_kubelet(dir.path());
    let out = run_once(&config(sock)).await.unwrap();
    assert_eq!(out.report.pods, ["ml/train-0"]);
    assert_eq!(out.report.used.gpus.len(), 4);
    assert_eq!(out.report.used.nics.len(), 4);
    assert_eq!(out.report.best_pair.map(|c| c.as_str()), Some("PIX"));
    assert_eq!(out.labels["topoalign.dev/best-pair-class"], "PIX");
    assert_eq!(out.labels["topoalign.dev/gpu-fabric"], "xgmi");
    let nrt = &out.node_resource_topology;
    assert_eq!(nrt["apiVersion"], "topology.node.k8s.io/v1alpha2");
    assert_eq!(nrt["kind"], "NodeResourceTopology");
    assert_eq!(nrt["topologyPolicies"][0], "RestrictedContainerLevel");
    assert_eq!(nrt["attributes"][0]["name"], "topologyManagerPolicy");
    assert_eq!(nrt["attributes"][0]["value"], "restricted");
    let zones = nrt["zones"].as_array().unwrap();
    assert_eq!(zones.len(), 2);
    assert_eq!(zones[0]["name"], "node-0");
    assert_eq!(zones[0]["type"], "Node");
    let gpu0 = zones[0]["resources"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == "amd.com/gpu")
        .unwrap();
    assert_eq!(
        (gpu0["allocatable"].as_str(), gpu0["available"].as_str()),
        (Some("4"), Some("0"))
    );
    let gpu1 = zones[1]["resources"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == "amd.com/gpu")
        .unwrap();
    assert_eq!(gpu1["available"], "4");
    // What the extender reads back as this node's data (the round trip through the
    // extender's reader is the CLI's contract test, `agent_extender`).
    let notes = &nrt["metadata"]["annotations"];
    let used: serde_json::Value =
        serde_json::from_str(notes[USED_ANNOTATION].as_str().unwrap()).unwrap();
    assert_eq!(used["gpus"].as_array().unwrap().len(), 4);
    assert!(notes[REPORTED_AT_ANNOTATION].is_string());
    let pods: Vec<String> = serde_json::from_str(notes[PODS_ANNOTATION].as_str().unwrap()).unwrap();
    assert!(pods.contains(&"ml/train-0".to_string()), "{pods:?}");
}

/// With a clique, an operator's domain file and rails, `--once` labels the levels (as on
/// a node without domain labels) and puts each domain label and the rails in the NRT.
#[tokio::test]
async fn once_with_node_facts_labels_domains_and_publishes_rails() {
    let dir = tempfile::tempdir().unwrap();
    let sock = serve_kubelet(dir.path());
    let mut cfg = config(sock);
    let operator = BTreeMap::from([(
        "fabric.topograph.run/tier-0".to_string(),
        "leaf-7".to_string(),
    )]);
    let rails = topoalign_fabric::parse_rail_source("rule: nearest-gpu\n", "rails.yaml").unwrap();
    cfg.facts = NodeFacts {
        clique: Some((
            topoalign_mig::NodeClique::One {
                clique: "uuid-1.4".into(),
            },
            "q.txt".into(),
        )),
        operator: Some((operator, "domains.yaml".into())),
        rails: Some(topoalign_fabric::nic_rails(&cfg.topology, &rails).unwrap()),
        ..NodeFacts::default()
    };
    let out = run_once(&cfg).await.unwrap();
    assert_eq!(out.labels["nvidia.com/gpu.clique"], "uuid-1.4");
    assert_eq!(out.labels["fabric.topograph.run/tier-0"], "leaf-7");
    assert_eq!(
        out.domains.sources["fabric.topograph.run/tier-0"],
        "domains.yaml"
    );
    let nrt = &out.node_resource_topology;
    let attrs = nrt["attributes"].as_array().unwrap();
    assert!(
        attrs
            .iter()
            .any(|a| a["name"] == "fabric.topograph.run/tier-0" && a["value"] == "leaf-7"),
        "{attrs:?}"
    );
    let rails: serde_json::Value = serde_json::from_str(
        nrt["metadata"]["annotations"]["topoalign.dev/rails"]
            .as_str()
            .unwrap(),
    )
    .unwrap();
    assert_eq!(rails["rails"], 8);
    let mut got: Vec<u64> = (rails["nics"].as_object().unwrap().values())
        .map(|r| r.as_u64().unwrap())
        .collect();
    got.sort();
    assert_eq!(
        got,
        (0..8).collect::<Vec<u64>>(),
        "one NIC per rail on mi300x-8"
    );
    let table = out.table();
    assert!(
        table.contains("fabric.topograph.run/tier-0 from domains.yaml"),
        "{table}"
    );
}

#[tokio::test]
async fn a_missing_socket_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let err = run_once(&config(dir.path().join("absent.sock")))
        .await
        .unwrap_err();
    let text = err.to_string();
    assert!(
        text.contains("absent.sock") && text.contains("pod-resources"),
        "{text}"
    );
}

#[tokio::test]
async fn a_path_that_is_no_socket_says_what_it_is() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("kubelet.sock");
    std::fs::write(&file, b"not a socket").unwrap();
    let text = run_once(&config(file)).await.unwrap_err().to_string();
    assert!(
        text.contains("kubelet.sock: a regular file, not a socket"),
        "{text}"
    );
    assert!(!text.contains("refused"), "{text}");
    let text = run_once(&config(dir.path().to_path_buf()))
        .await
        .unwrap_err()
        .to_string();
    assert!(text.contains("a directory, not a socket"), "{text}");
    let text = run_once(&config(dir.path().join("absent.sock")))
        .await
        .unwrap_err()
        .to_string();
    assert!(text.contains("absent.sock: no such file"), "{text}");
    // A socket nobody listens on any more: the connection error, with the path.
    let stale = dir.path().join("stale.sock");
    drop(std::os::unix::net::UnixListener::bind(&stale).unwrap());
    let text = run_once(&config(stale)).await.unwrap_err().to_string();
    assert!(text.contains("stale.sock"), "{text}");
}
