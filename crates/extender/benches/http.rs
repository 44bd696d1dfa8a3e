//! The real HTTP stack on loopback: a load generator sends filter + prioritize for one pod
//! over 5,000 nodes to the axum server (one keep-alive connection, as the scheduler's Go
//! client uses) for a bounded count, and reports p50 / p99 / max latency per verb; then
//! the same with the verdict cache disabled (peer) and a trivial handler (`/healthz`,
//! the HTTP floor). Criterion measures the median round trip of each in the same run.
//! Also reports the resident memory per node of the cached state.

// A measurement harness: a failure to bind or connect on loopback must abort the run.
#![allow(clippy::expect_used)]

use std::net::SocketAddr;
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use criterion::Criterion;
use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper::client::conn::http1::SendRequest;
use serde_json::json;
use topoalign_extender::ClusterState;
use topoalign_extender::Decider;
use topoalign_extender::Interner;
use topoalign_extender::synth_nodes;
use topoalign_extender::{App, serve};
use topoalign_kube_types::kubelet_settings::Policy;
use topoalign_tm::ResourceMap;

const NODES: usize = 5_000;

fn rss_bytes() -> u64 {
    std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|s| {
            s.split_whitespace()
                .nth(1)
                .and_then(|p| p.parse::<u64>().ok())
        })
        .map_or(0, |pages| pages * 4096)
}

async fn start(state: Arc<RwLock<ClusterState>>, cache: usize) -> SocketAddr {
    let app = Arc::new(App::new(state, Decider::new(ResourceMap::default(), cache)));
    app.set_ready(true);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind loopback");
    let addr = listener.local_addr().expect("local addr");
    tokio::spawn(serve(listener, app, std::future::pending()));
    addr
}

async fn connect(addr: SocketAddr) -> SendRequest<Full<Bytes>> {
    let stream = tokio::net::TcpStream::connect(addr).await.expect("connect");
    let _ = stream.set_nodelay(true);
    let (send, conn) = hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream))
        .await
        .expect("handshake");
    tokio::spawn(conn);
    send
}

async fn call(
    send: &mut SendRequest<Full<Bytes>>,
    method: &str,
    path: &str,
    body: &Bytes,
) -> Duration {
    let t0 = Instant::now();
    send.ready().await.expect("connection ready");
    let req = hyper::Request::builder()
        .method(method)
        .uri(path)
        .header("host", "localhost")
        .header("content-type", "application/json")
        .body(Full::new(body.clone()))
        .expect("request");
    let resp = send.send_request(req).await.expect("response");
    assert_eq!(resp.status(), 200, "{path}");
    let _ = resp.into_body().collect().await.expect("body");
    t0.elapsed()
}

fn pct(v: &mut [Duration], p: f64) -> Duration {
    v.sort();
    v[((v.len() as f64 - 1.0) * p).round() as usize]
}

fn report(name: &str, mut v: Vec<Duration>) {
    let (p50, p99) = (pct(&mut v, 0.50), pct(&mut v, 0.99));
    let max = v.last().copied().unwrap_or_default();
    println!(
        "{name:<42} n={:<5} p50 {:>9.3} ms   p99 {:>9.3} ms   max {:>9.3} ms",
        v.len(),
        p50.as_secs_f64() * 1e3,
        p99.as_secs_f64() * 1e3,
        max.as_secs_f64() * 1e3
    );
}

async fn load(
    addr: SocketAddr,
    body: &Bytes,
    count: usize,
    budget: Duration,
) -> (Vec<Duration>, Vec<Duration>) {
    let mut send = connect(addr).await;
    let (mut f, mut p) = (Vec::new(), Vec::new());
    let t0 = Instant::now();
    while f.len() < count && t0.elapsed() < budget {
        f.push(call(&mut send, "POST", "/filter", body).await);
        p.push(call(&mut send, "POST", "/prioritize", body).await);
    }
    (f, p)
}

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let rss0 = rss_bytes();
    let policies = [
        Policy::Restricted,
        Policy::SingleNumaNode,
        Policy::BestEffort,
        Policy::None,
    ];
    let nodes =
        synth_nodes(NODES, 1, &["mi300x-8", "gb300-4", "dgx-h100"], &policies).expect("profiles");
    let mut interner = Interner::default();
    let mut st = ClusterState::default();
    for n in &nodes {
        st.upsert_node(&n.name, n.entry(&mut interner));
    }
    let rss_state = rss_bytes();
    let names: Vec<&str> = nodes.iter().map(|n| n.name.as_str()).collect();
    let pod = json!({"metadata": {"name": "p", "namespace": "bench", "uid": "u"},
        "spec": {"containers": [{"name": "m", "resources": {"limits": {"amd.com/gpu": 2, "nvidia.com/sriov-rdma-vf": 2}}}]}});
    let body = Bytes::from(
        serde_json::to_vec(&json!({"Pod": pod, "Nodes": null, "NodeNames": names})).expect("json"),
    );
    let state = Arc::new(RwLock::new(st));
    let (cached, plain) = rt.block_on(async {
        (
            start(state.clone(), 1 << 20).await,
            start(state.clone(), 0).await,
        )
    });
    println!(
        "\nextender over HTTP on 127.0.0.1, one pod (2 GPU + 2 VF) x {NODES} candidate nodes, body {} KiB",
        body.len() / 1024
    );
    let (cold, _) = rt.block_on(load(cached, &body, 1, Duration::from_secs(60)));
    report("filter, cache cold (first call)", cold);
    let rss_cache = rss_bytes();
    let (f, p) = rt.block_on(load(cached, &body, 500, Duration::from_secs(20)));
    report("filter, cache warm", f);
    report("prioritize, cache warm", p);
    let (f, p) = rt.block_on(load(plain, &body, 5, Duration::from_secs(20)));
    report("filter, cache disabled (peer)", f);
    report("prioritize, cache disabled (peer)", p);
    let floor: Vec<Duration> = rt.block_on(async {
        let mut s = connect(cached).await;
        let mut v = Vec::new();
        let empty = Bytes::new();
        for _ in 0..500 {
            v.push(call(&mut s, "GET", "/healthz", &empty).await);
        }
        v
    });
    report("GET /healthz (HTTP floor, peer)", floor);
    println!(
        "memory: cluster state {:.1} KiB/node, verdict cache for one pod shape {:.2} KiB/node (RSS deltas over {NODES} nodes)\n",
        (rss_state.saturating_sub(rss0)) as f64 / 1024.0 / NODES as f64,
        (rss_cache.saturating_sub(rss_state)) as f64 / 1024.0 / NODES as f64,
    );

    let mut c = Criterion::default()
        .configure_from_args()
        .sample_size(30)
        .measurement_time(Duration::from_secs(5))
        .warm_up_time(Duration::from_secs(1));
    let mut g = c.benchmark_group("http round trip/5000 nodes");
    let mut send = rt.block_on(connect(cached));
    g.bench_function("filter+prioritize, cache warm", |b| {
        b.iter(|| {
            rt.block_on(async {
                call(&mut send, "POST", "/filter", &body).await;
                call(&mut send, "POST", "/prioritize", &body).await;
            })
        })
    });
    let empty = Bytes::new();
    g.bench_function("GET /healthz (peer)", |b| {
        b.iter(|| rt.block_on(call(&mut send, "GET", "/healthz", &empty)))
    });
    g.finish();
    c.final_summary();
}
