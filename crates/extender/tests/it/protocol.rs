//! The wire protocol against golden JSON written from the Go types' field names, and the
//! real HTTP server on loopback: verbs, bad input, health, readiness, metrics, shutdown.

use std::sync::{Arc, RwLock};

use crate::common::*;
use serde_json::Value;
use topoalign_extender::Decider;
use topoalign_extender::{App, serve};
use topoalign_extender::{ExtenderArgs, ExtenderFilterResult, HostPriority};
use topoalign_tm::ResourceMap;

const ARGS_NAMES: &str = include_str!("../fixtures/filter_args_names.json");
const ARGS_NODES: &str = include_str!("../fixtures/filter_args_nodes.json");
const FILTER_RESULT: &str = include_str!("../fixtures/filter_result.json");
const PRIORITIZE_RESULT: &str = include_str!("../fixtures/prioritize_result.json");

#[test]
fn golden_types_round_trip_with_go_field_names() {
    let args: ExtenderArgs = serde_json::from_str(ARGS_NAMES).unwrap();
    assert_eq!(
        args.node_names.as_deref().unwrap(),
        ["mi-free", "mi-split", "ghost"]
    );
    assert!(args.nodes.is_none());
    let again: Value = serde_json::to_value(&args).unwrap();
    let keys: Vec<&str> = again
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(keys, ["Pod", "Nodes", "NodeNames"]);
    let r: ExtenderFilterResult = serde_json::from_str(FILTER_RESULT).unwrap();
    assert_eq!(serde_json::to_string(&r).unwrap(), FILTER_RESULT.trim());
    let p: Vec<HostPriority> = serde_json::from_str(PRIORITIZE_RESULT).unwrap();
    assert_eq!(serde_json::to_string(&p).unwrap(), PRIORITIZE_RESULT.trim());
    // Go reads field names case-insensitively; the lower-case spelling is accepted too.
    let lower: ExtenderArgs = serde_json::from_str(r#"{"pod":{},"nodeNames":["a"]}"#).unwrap();
    assert_eq!(lower.node_names.unwrap(), ["a"]);
}

async fn start() -> (
    std::net::SocketAddr,
    Arc<App>,
    tokio::sync::oneshot::Sender<()>,
    tokio::task::JoinHandle<std::io::Result<()>>,
) {
    let app = Arc::new(App::new(
        Arc::new(RwLock::new(fixture_state())),
        Decider::new(ResourceMap::default(), 1000),
    ));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(serve(listener, app.clone(), async move {
        let _ = rx.await;
    }));
    (addr, app, tx, server)
}

#[tokio::test]
async fn filter_and_prioritize_over_http_match_the_goldens() {
    let (addr, app, stop, server) = start().await;
    let (code, body) = http(addr, "POST", "/filter", ARGS_NAMES.as_bytes().to_vec()).await;
    assert_eq!(code, 200, "{body}");
    assert_eq!(body, FILTER_RESULT.trim());
    let (code, body) = http(addr, "POST", "/prioritize", ARGS_NAMES.as_bytes().to_vec()).await;
    assert_eq!(code, 200, "{body}");
    assert_eq!(body, PRIORITIZE_RESULT.trim());
    // With a NodeList the passing items come back whole, in `Nodes`.
    let (code, body) = http(addr, "POST", "/filter", ARGS_NODES.as_bytes().to_vec()).await;
    assert_eq!(code, 200, "{body}");
    let r: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(r["NodeNames"], Value::Null);
    assert_eq!(r["Nodes"]["metadata"]["resourceVersion"], "42");
    assert_eq!(r["Nodes"]["items"].as_array().unwrap().len(), 1);
    assert_eq!(
        r["Nodes"]["items"][0]["metadata"]["labels"]["topoalign.dev/profile"],
        "mi300x-8"
    );
    assert!(
        r["FailedNodes"]["mi-split"]
            .as_str()
            .unwrap()
            .contains("TopologyAffinityError")
    );
    // Readiness follows the watchers; health does not.
    assert_eq!(http(addr, "GET", "/healthz", vec![]).await.0, 200);
    assert_eq!(http(addr, "GET", "/readyz", vec![]).await.0, 503);
    app.set_ready(true);
    assert_eq!(http(addr, "GET", "/readyz", vec![]).await.0, 200);
    let (_, metrics) = http(addr, "GET", "/metrics", vec![]).await;
    assert!(
        metrics.contains(r#"topoalign_extender_requests_total{verb="filter",code="200"} 2"#),
        "{metrics}"
    );
    assert!(
        metrics.contains(r#"topoalign_extender_nodes_filtered_total{reason="topology_manager"} 2"#),
        "{metrics}"
    );
    assert!(
        metrics.contains(r#"topoalign_extender_nodes_neutral_total{reason="unknown_node"}"#),
        "{metrics}"
    );
    assert!(
        metrics.contains("topoalign_extender_state_nodes{status=\"known\"} 2"),
        "{metrics}"
    );
    stop.send(()).unwrap();
    server.await.unwrap().unwrap();
}

#[tokio::test]
async fn bad_requests_get_400_with_the_field_named() {
    let (addr, app, stop, server) = start().await;
    let cases: [(&str, &str); 6] = [
        ("{", "not ExtenderArgs JSON"),
        (r#"{"NodeNames":["a"]}"#, "`Pod`: missing"),
        (
            r#"{"Pod":{"spec":{"containers":[]}}}"#,
            "`NodeNames` and `Nodes` are both missing",
        ),
        (
            r#"{"Pod":{},"Nodes":{"items":[{}]}}"#,
            "Nodes.items[0].metadata.name",
        ),
        (
            r#"{"Pod":{"spec":{}},"NodeNames":["a"]}"#,
            "spec.containers",
        ),
        (
            r#"{"Pod":{"metadata":{"annotations":{"topoalign.dev/min-pair-class":"FAST"}},"spec":{"containers":[{"name":"c","resources":{"limits":{"amd.com/gpu":"1"}}}]}},"NodeNames":["a"]}"#,
            "topoalign.dev/min-pair-class",
        ),
    ];
    for (body, expect) in cases {
        for verb in ["/filter", "/prioritize"] {
            let (code, text) = http(addr, "POST", verb, body.as_bytes().to_vec()).await;
            assert_eq!(code, 400, "{verb} {body}: {text}");
            assert!(text.contains(expect), "{verb} {body}: {text}");
        }
    }
    // A wrong method or path is refused by the router.
    assert_eq!(http(addr, "GET", "/filter", vec![]).await.0, 405);
    assert_eq!(http(addr, "POST", "/bind", b"{}".to_vec()).await.0, 404);
    let m = app.metrics.render();
    assert!(
        m.contains(r#"topoalign_extender_requests_total{verb="filter",code="400"} 6"#),
        "{m}"
    );
    stop.send(()).unwrap();
    server.await.unwrap().unwrap();
}
