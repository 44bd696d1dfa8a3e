//! The real HTTP stack on loopback: a load generator sends filter + prioritize for one pod
//! over 20,000 nodes to the axum server (one keep-alive connection, as the scheduler's Go
//! client uses) for a bounded count, and reports p50 / p99 / max latency per verb; then
//! the same with the verdict cache disabled (peer) and a trivial handler (`/healthz`,
//! the HTTP floor). Both wings: a device-plugin pod (2 GPUs + 2 VFs) on 20,000 synthetic
//! nodes, and a DRA pod (a claim of 2 pairs) on 20,000 nodes publishing the driver's
//! slices with random occupancy, weighed against 64 pods waiting for a node. Each pod's
//! candidate list comes in its own order (the scheduler's parallel filter lists nodes as
//! they pass): [`ORDERS`] permutations taken in turn, so that no call finds the list of
//! the call before; prioritize is asked, as the scheduler asks it, on the candidates the
//! filter passed, in their order. The first call of a new pod shape is measured for the
//! process's first call and for 72 shapes met by a running extender. Criterion measures
//! the median round trip of each in the same run. Also reports the resident
//! memory per node of each wing's state and of one pod shape's verdicts (RSS deltas).

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
use topoalign_extender::DraState;
use topoalign_extender::Interner;
use topoalign_extender::synth_nodes;
use topoalign_extender::{App, serve};
use topoalign_kube_types::kubelet_settings::Policy;
use topoalign_tm::ResourceMap;

mod common;
use common::{add_waiting, dra_cluster, dra_pod};

const NODES: usize = 20_000;

/// Candidate orders taken in turn, one per pod (more than the extender keeps).
const ORDERS: usize = 8;

/// The call body of `pod` on the candidates `names`, in their order.
fn body<N: serde::Serialize>(pod: &serde_json::Value, names: &N) -> Bytes {
    let body = json!({"Pod": pod, "Nodes": null, "NodeNames": names});
    Bytes::from(serde_json::to_vec(&body).expect("json"))
}

/// The call bodies of `pod` on `names` in [`ORDERS`] orders (the first as given).
fn bodies(pod: &serde_json::Value, names: &[&str]) -> Vec<Bytes> {
    let mut rng = topoalign_rng::Rng::new(5);
    let mut order: Vec<&str> = names.to_vec();
    (0..ORDERS)
        .map(|k| {
            if k > 0 {
                rng.shuffle(&mut order);
            }
            body(pod, &order)
        })
        .collect()
}

/// Each of `filter` with the prioritize body the scheduler sends after it: the pod on the
/// candidates the filter passed, in their order (asked of the server at `addr`).
async fn with_passed(
    addr: SocketAddr,
    pod: &serde_json::Value,
    filter: &[Bytes],
) -> Vec<(Bytes, Bytes)> {
    let mut send = connect(addr).await;
    let mut out = Vec::new();
    for body in filter {
        let (_, answer) = exchange(&mut send, "POST", "/filter", body).await;
        let answer = answer.to_bytes();
        let answer: serde_json::Value = serde_json::from_slice(&answer).expect("filter answer");
        out.push((body.clone(), self::body(pod, &answer["NodeNames"])));
    }
    out
}

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

async fn start(state: Arc<RwLock<ClusterState>>, dra: &DraState, cache: usize) -> SocketAddr {
    let app = Arc::new(App::new(state, Decider::new(ResourceMap::default(), cache)));
    *app.dra.write() = dra.clone();
    add_waiting(&app.dra, 64);
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

/// One request and its whole answer: the round trip's time and the answer's parts.
async fn exchange(
    send: &mut SendRequest<Full<Bytes>>,
    method: &str,
    path: &str,
    body: &Bytes,
) -> (Duration, http_body_util::Collected<Bytes>) {
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
    let answer = resp.into_body().collect().await.expect("body");
    (t0.elapsed(), answer)
}

/// One request's round trip.
async fn call(
    send: &mut SendRequest<Full<Bytes>>,
    method: &str,
    path: &str,
    body: &Bytes,
) -> Duration {
    exchange(send, method, path, body).await.0
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

/// Filter + prioritize of one pod after another (each with the next (filter, prioritize)
/// body of `bodies`), up to `count` pods or `budget`: the filter and prioritize latencies.
async fn load(
    addr: SocketAddr,
    bodies: &[(Bytes, Bytes)],
    count: usize,
    budget: Duration,
) -> (Vec<Duration>, Vec<Duration>) {
    let mut send = connect(addr).await;
    let (mut f, mut p) = (Vec::new(), Vec::new());
    let t0 = Instant::now();
    for (filter, prioritize) in bodies.iter().cycle() {
        if f.len() >= count || t0.elapsed() >= budget {
            break;
        }
        f.push(call(&mut send, "POST", "/filter", filter).await);
        p.push(call(&mut send, "POST", "/prioritize", prioritize).await);
    }
    (f, p)
}

/// The first call of a shape: `body` to filter and to prioritize.
fn both(body: &Bytes) -> [(Bytes, Bytes); 1] {
    [(body.clone(), body.clone())]
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
    let body = bodies(&pod, &names);
    let state = Arc::new(RwLock::new(st));
    let rss_plugin = rss_bytes();
    let (dra, dra_names, kinds) = dra_cluster(NODES);
    let rss_dra = rss_bytes();
    let dra_names: Vec<&str> = dra_names.iter().map(String::as_str).collect();
    let dra_body = bodies(&dra_pod(), &dra_names);
    let (cached, plain) = rt.block_on(async {
        (
            start(state.clone(), &dra, 1 << 20).await,
            start(state.clone(), &dra, 0).await,
        )
    });
    let rss_apps = rss_bytes();
    println!(
        "\nextender over HTTP on 127.0.0.1, one pod (2 GPU + 2 VF) x {NODES} candidate nodes, body {} KiB",
        body[0].len() / 1024
    );
    let (cold, _) = rt.block_on(load(cached, &both(&body[0]), 1, Duration::from_secs(60)));
    report("filter, the process's first call (cache cold)", cold);
    let rss_cache = rss_bytes();
    let body = rt.block_on(with_passed(cached, &pod, &body));
    println!(
        "prioritize on the candidates the filter passed: body {} KiB",
        body[0].1.len() / 1024
    );
    let (f, p) = rt.block_on(load(cached, &body, 500, Duration::from_secs(20)));
    report("filter, cache warm", f);
    report("prioritize, cache warm", p);
    let (f, p) = rt.block_on(load(cached, &body[..1], 200, Duration::from_secs(10)));
    report("filter, warm, one order for every pod", f);
    report("prioritize, warm, one order for every pod", p);
    // A running extender meets pod shapes it has not judged: the first call of each of
    // 72 new shapes (GPU and VF counts), on the cache the calls above left.
    let mut firsts = Vec::new();
    for gpus in 1..=8 {
        for vfs in 0..=8 {
            let pod = json!({"metadata": {"name": "p", "namespace": "bench", "uid": "u"},
                "spec": {"containers": [{"name": "m", "resources": {"limits": {"amd.com/gpu": gpus, "nvidia.com/sriov-rdma-vf": vfs, "memory": "1Gi"}}}]}});
            let first = both(&self::body(&pod, &names));
            let (f, _) = rt.block_on(load(cached, &first, 1, Duration::from_secs(60)));
            firsts.extend(f);
        }
    }
    report("filter, first call of each of 72 new shapes", firsts);
    let (f, p) = rt.block_on(load(plain, &body, 5, Duration::from_secs(20)));
    report("filter, cache disabled (peer)", f);
    report("prioritize, cache disabled (peer)", p);
    println!(
        "\nDRA pod (a claim of 2 pairs) x {NODES} nodes ({kinds} distinct (profile, devices held)), 64 pods waiting, body {} KiB",
        dra_body[0].len() / 1024
    );
    let rss_dra_cold = rss_bytes();
    let (f, p) = rt.block_on(load(
        cached,
        &both(&dra_body[0]),
        1,
        Duration::from_secs(60),
    ));
    report("DRA filter, first call of the shape", f);
    report("DRA prioritize, first call of the shape", p);
    let rss_dra_cache = rss_bytes();
    let dra_body = rt.block_on(with_passed(cached, &dra_pod(), &dra_body));
    println!(
        "DRA prioritize on the candidates the filter passed: body {} KiB",
        dra_body[0].1.len() / 1024
    );
    let (f, p) = rt.block_on(load(cached, &dra_body, 500, Duration::from_secs(30)));
    report("DRA filter, cache warm", f);
    report("DRA prioritize, cache warm", p);
    let (f, p) = rt.block_on(load(cached, &dra_body[..1], 200, Duration::from_secs(10)));
    report("DRA filter, warm, one order for every pod", f);
    report("DRA prioritize, warm, one order for every pod", p);
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
    let per_node = |a: u64, b: u64| b.saturating_sub(a) as f64 / 1024.0 / NODES as f64;
    println!(
        "memory (RSS deltas over {NODES} nodes, /proc/self/statm): device-plugin state {:.1} KiB/node, its verdicts for one pod shape {:.2} KiB/node; DRA setup {:.1} KiB/node (two servers' copies {:.1} KiB/node), its verdicts for one pod shape {:.2} KiB/node\n",
        per_node(rss0, rss_state),
        per_node(rss_apps, rss_cache),
        per_node(rss_plugin, rss_dra),
        per_node(rss_dra, rss_apps),
        per_node(rss_dra_cold, rss_dra_cache),
    );

    let mut c = Criterion::default()
        .configure_from_args()
        .sample_size(30)
        .measurement_time(Duration::from_secs(5))
        .warm_up_time(Duration::from_secs(1));
    let mut g = c.benchmark_group("http round trip/20000 nodes");
    let mut send = rt.block_on(connect(cached));
    let mut turn = 0usize;
    g.bench_function("filter+prioritize, cache warm", |b| {
        b.iter(|| {
            turn += 1;
            let (filter, prioritize) = &body[turn % ORDERS];
            rt.block_on(async {
                call(&mut send, "POST", "/filter", filter).await;
                call(&mut send, "POST", "/prioritize", prioritize).await;
            })
        })
    });
    g.bench_function("DRA filter+prioritize, cache warm", |b| {
        b.iter(|| {
            turn += 1;
            let (filter, prioritize) = &dra_body[turn % ORDERS];
            rt.block_on(async {
                call(&mut send, "POST", "/filter", filter).await;
                call(&mut send, "POST", "/prioritize", prioritize).await;
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
