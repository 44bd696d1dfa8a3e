//! Responsiveness under costly pods (issue 22), over real HTTP on loopback on a
//! two-worker runtime like the serving process: 200 nodes; three pods of 10,000
//! containers each (distinct shapes) sent at once, and meanwhile `/healthz` and an
//! ordinary filter call (cached) timed one after the other; then node updates timed
//! while a costly pod is judged. Bounded in count and time. Prints p50 / p99 / max.
//! Uses only `App::new` and `serve`, so the same file measures a tree before the
//! change.

// A measurement harness: a failure to bind or connect on loopback must abort the run.
#![allow(clippy::expect_used)]

use std::net::SocketAddr;
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use serde_json::{Value, json};
use topoalign_extender::ClusterState;
use topoalign_extender::Decider;
use topoalign_extender::Interner;
use topoalign_extender::synth_nodes;
use topoalign_extender::{App, serve};
use topoalign_kube_types::kubelet_settings::Policy;
use topoalign_tm::ResourceMap;

async fn call(addr: SocketAddr, method: &str, path: &str, body: Bytes) -> (u16, Duration) {
    let t0 = Instant::now();
    let stream = tokio::net::TcpStream::connect(addr).await.expect("connect");
    let (mut send, conn) =
        hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream))
            .await
            .expect("handshake");
    tokio::spawn(conn);
    let req = hyper::Request::builder()
        .method(method)
        .uri(path)
        .header("host", "localhost")
        .header("content-type", "application/json")
        .body(Full::new(body))
        .expect("request");
    let resp = send.send_request(req).await.expect("response");
    let code = resp.status().as_u16();
    let _ = resp.into_body().collect().await.expect("body");
    (code, t0.elapsed())
}

fn heavy_pod(containers: usize) -> Value {
    let mut cs = vec![
        json!({"name": "m", "resources": {"limits": {"amd.com/gpu": 2, "nvidia.com/sriov-rdma-vf": 2}}}),
    ];
    for c in 1..containers {
        cs.push(json!({"name": format!("c{c}"), "resources": {"limits": {"cpu": "1", "memory": "1Mi"}}}));
    }
    json!({"metadata": {"name": format!("heavy-{containers}"), "namespace": "d", "uid": "u"}, "spec": {"containers": cs}})
}

fn report(name: &str, mut v: Vec<Duration>) {
    if v.is_empty() {
        println!("{name:<44} n=0");
        return;
    }
    v.sort();
    let at = |p: f64| v[((v.len() as f64 - 1.0) * p).round() as usize].as_secs_f64() * 1e3;
    println!(
        "{name:<44} n={:<4} p50 {:>9.3} ms   p99 {:>9.3} ms   max {:>9.3} ms",
        v.len(),
        at(0.5),
        at(0.99),
        at(1.0)
    );
}

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let nodes = synth_nodes(
        200,
        7,
        &["mi300x-8", "gb300-4", "dgx-h100"],
        &[Policy::Restricted],
    )
    .expect("profiles");
    let mut interner = Interner::default();
    let mut st = ClusterState::default();
    for n in &nodes {
        st.upsert_node(&n.name, n.entry(&mut interner));
    }
    let names: Vec<&str> = nodes.iter().map(|n| n.name.as_str()).collect();
    let body = |pod: &Value| {
        Bytes::from(
            serde_json::to_vec(&json!({"Pod": pod, "Nodes": null, "NodeNames": names}))
                .expect("json"),
        )
    };
    let small = body(
        &json!({"metadata": {"name": "p", "namespace": "b", "uid": "u"},
        "spec": {"containers": [{"name": "m", "resources": {"limits": {"amd.com/gpu": 2, "nvidia.com/sriov-rdma-vf": 2}}}]}}),
    );
    let heavy: Vec<Bytes> = (0..3).map(|k| body(&heavy_pod(10_000 + k))).collect();
    let app = Arc::new(App::new(
        Arc::new(RwLock::new(st)),
        Decider::new(ResourceMap::default(), 1 << 20),
    ));
    app.set_ready(true);
    rt.block_on(async {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        tokio::spawn(serve(listener, app.clone(), std::future::pending()));
        println!("\n200 nodes; 3 pods of 10,000 containers sent at once; /healthz and a cached filter timed meanwhile");
        let (_, t) = call(addr, "POST", "/filter", heavy[0].clone()).await;
        report("one 10,000-container filter alone (cold)", vec![t]);
        let heavy: Vec<Bytes> = (0..3).map(|k| body(&heavy_pod(20_000 + k))).collect();
        call(addr, "POST", "/filter", small.clone()).await;
        let t0 = Instant::now();
        let tasks: Vec<_> = heavy
            .iter()
            .map(|b| {
                let b = b.clone();
                tokio::spawn(async move { call(addr, "POST", "/filter", b).await })
            })
            .collect();
        let (mut health, mut filter) = (Vec::new(), Vec::new());
        tokio::time::sleep(Duration::from_millis(100)).await;
        while health.len() < 300 && t0.elapsed() < Duration::from_secs(30) && tasks.iter().any(|t| !t.is_finished()) {
            health.push(call(addr, "GET", "/healthz", Bytes::new()).await.1);
            filter.push(call(addr, "POST", "/filter", small.clone()).await.1);
        }
        let mut heavy_t = Vec::new();
        for t in tasks {
            heavy_t.push(t.await.expect("task").1);
        }
        report("/healthz while heavy pods are judged", health);
        report("ordinary filter (cached) meanwhile", filter);
        report("the 3 heavy filter calls", heavy_t);
        // Node updates while a costly pod is judged.
        let b = body(&heavy_pod(30_000));
        let task = tokio::spawn(async move { call(addr, "POST", "/filter", b).await });
        tokio::time::sleep(Duration::from_millis(200)).await;
        let a = app.clone();
        let writes = tokio::task::spawn_blocking(move || {
            let mut v = Vec::new();
            let mut i = Interner::default();
            let n = synth_nodes(20, 9, &["mi300x-8"], &[Policy::Restricted]).expect("profiles");
            for (k, node) in n.iter().enumerate() {
                let t0 = Instant::now();
                a.state.write().unwrap_or_else(|p| p.into_inner()).upsert_node(&format!("new-{k}"), node.entry(&mut i));
                v.push(t0.elapsed());
                std::thread::sleep(Duration::from_millis(20));
            }
            v
        })
        .await
        .expect("writes");
        report("node update (state write) during a heavy call", writes);
        let _ = task.await;
    });
}
