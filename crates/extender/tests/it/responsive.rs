//! The extender stays responsive under costly pods, floods and large bodies (issue 22),
//! over real HTTP on loopback on a two-worker runtime like the serving process. Every
//! loop is bounded in count and time; the bounds are generous (debug builds, a shared
//! two-core machine): what they catch is a stall of seconds, not a slow millisecond.

use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant, SystemTime};

use crate::common::*;
use serde_json::{Value, json};
use topoalign_extender::CallLimits;
use topoalign_extender::ClusterState;
use topoalign_extender::Decider;
use topoalign_extender::Interner;
use topoalign_extender::synth_nodes;
use topoalign_extender::{App, WARM_ROUND, serve};
use topoalign_kube_types::kubelet_settings::Policy;
use topoalign_tm::ResourceMap;

const NODES: usize = 200;

/// 200 nodes of three profiles with random occupancy (distinct node states).
fn cluster() -> (ClusterState, Vec<String>) {
    let nodes = synth_nodes(
        NODES,
        7,
        &["mi300x-8", "gb300-4", "dgx-h100"],
        &[Policy::Restricted],
    )
    .unwrap();
    let mut interner = Interner::default();
    let mut st = ClusterState::default();
    for n in &nodes {
        st.upsert_node(&n.name, n.entry(&mut interner));
    }
    (st, nodes.into_iter().map(|n| n.name).collect())
}

/// A pod of `containers` containers (one asks 2 GPUs + 2 VFs, the rest CPU and memory):
/// about 1.4 s a call over 200 nodes in a release build; each count is its own shape.
fn heavy_pod(containers: usize) -> Value {
    let mut cs = vec![
        json!({"name": "m", "resources": {"limits": {"amd.com/gpu": 2, "nvidia.com/sriov-rdma-vf": 2}}}),
    ];
    for c in 1..containers {
        cs.push(json!({"name": format!("c{c}"), "resources": {"limits": {"cpu": "1", "memory": "1Mi"}}}));
    }
    json!({"metadata": {"name": format!("heavy-{containers}"), "namespace": "d", "uid": "u"},
        "spec": {"containers": cs}})
}

fn ordinary_pod() -> Value {
    pod(
        "small",
        json!({"amd.com/gpu": 2, "nvidia.com/sriov-rdma-vf": 2}),
        json!({}),
    )
}

fn args(pod: &Value, names: &[String]) -> Vec<u8> {
    serde_json::to_vec(&json!({"Pod": pod, "Nodes": null, "NodeNames": names})).unwrap()
}

async fn start(
    st: ClusterState,
    limits: CallLimits,
) -> (
    std::net::SocketAddr,
    Arc<App>,
    tokio::sync::oneshot::Sender<()>,
) {
    let app = Arc::new(App::with_limits(
        Arc::new(RwLock::new(st)),
        Decider::new(ResourceMap::default(), 1 << 20),
        limits,
    ));
    app.set_ready(true);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(serve(listener, app.clone(), async move {
        let _ = rx.await;
    }));
    (addr, app, tx)
}

async fn timed(addr: std::net::SocketAddr, path: &str, body: Vec<u8>) -> (u16, String, Duration) {
    let method = if body.is_empty() { "GET" } else { "POST" };
    let t0 = Instant::now();
    let (code, text) = http(addr, method, path, body).await;
    (code, text, t0.elapsed())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn healthz_and_ordinary_calls_answer_while_heavy_pods_are_judged() {
    let (st, names) = cluster();
    let limits = CallLimits {
        budget: Duration::from_secs(3),
        ..CallLimits::default()
    };
    let (addr, _app, stop) = start(st, limits).await;
    let small = args(&ordinary_pod(), &names);
    // The ordinary pod's verdicts are cached first, as in a running cluster.
    assert_eq!(timed(addr, "/filter", small.clone()).await.0, 200);
    let heavy: Vec<_> = (0..3)
        .map(|k| {
            let body = args(&heavy_pod(10_000 + k), &names);
            tokio::spawn(async move { timed(addr, "/filter", body).await })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(300)).await;
    let mut health = Vec::new();
    let mut calls = Vec::new();
    for _ in 0..10 {
        let (code, _, t) = timed(addr, "/healthz", Vec::new()).await;
        assert_eq!(code, 200);
        health.push(t);
        let (code, body, t) = timed(addr, "/filter", small.clone()).await;
        assert_eq!(code, 200, "{body}");
        calls.push(t);
    }
    let worst = |v: &[Duration]| v.iter().max().copied().unwrap_or_default();
    assert!(
        worst(&health) < Duration::from_millis(300),
        "/healthz {health:?}"
    );
    assert!(
        worst(&calls) < Duration::from_millis(500),
        "filter {calls:?}"
    );
    for h in heavy {
        let (code, body, t) = h.await.unwrap();
        assert_eq!(code, 200, "{body}");
        // Within the budget (3 s) plus parsing and answering.
        assert!(t < Duration::from_millis(4_500), "{t:?}");
    }
    stop.send(()).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_past_its_budget_answers_neutral_in_time_and_later_calls_catch_up() {
    let (st, names) = cluster();
    let body = args(&heavy_pod(10_000), &names);
    // How long the whole pod takes to judge on this machine, with room to spare: the
    // budget is then a third of it, short enough on any machine that judging every node
    // state does not fit (the budget counts from the call's arrival, reading the
    // 10,000-container pod included; judging its containers on 200 nodes is most of it).
    let (addr, _, stop) = start(
        cluster().0,
        CallLimits {
            budget: Duration::from_secs(120),
            ..CallLimits::default()
        },
    )
    .await;
    let (code, _, whole_call) = timed(addr, "/filter", body.clone()).await;
    assert_eq!(code, 200);
    stop.send(()).unwrap();
    let limits = CallLimits {
        budget: whole_call / 3,
        ..CallLimits::default()
    };
    let (addr, app, stop) = start(st, limits).await;
    let (code, text, t) = timed(addr, "/filter", body.clone()).await;
    assert_eq!(code, 200, "{}", &text[..text.len().min(300)]);
    assert!(
        t < limits.budget + Duration::from_millis(1_500),
        "{t:?} for a budget of {:?}",
        limits.budget
    );
    let m = app.metrics.render();
    assert!(
        m.contains(r#"topoalign_extender_budget_spent_total{verb="filter"} 1"#),
        "{m}"
    );
    assert!(
        m.contains(r#"topoalign_extender_nodes_neutral_total{reason="budget"}"#),
        "{m}"
    );
    let r: Value = serde_json::from_str(&text).unwrap();
    let passed = r["NodeNames"].as_array().unwrap().len();
    let failed = r["FailedNodes"].as_object().unwrap().len()
        + r["FailedAndUnresolvableNodes"].as_object().unwrap().len();
    assert_eq!(passed + failed, NODES);
    // Each call judges more (the verdicts are kept): the pod is judged whole in a few.
    let mut whole = false;
    for _ in 0..40 {
        let (code, _, _) = timed(addr, "/filter", body.clone()).await;
        assert_eq!(code, 200);
        let m = app.metrics.render();
        let spent = m
            .lines()
            .find(|l| l.starts_with(r#"topoalign_extender_budget_spent_total{verb="filter"}"#))
            .unwrap()
            .to_string();
        let (code, _, _) = timed(addr, "/filter", body.clone()).await;
        assert_eq!(code, 200);
        if app.metrics.render().contains(&spent) {
            whole = true;
            break;
        }
    }
    assert!(whole, "the budget kept running out");
    stop.send(()).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_past_the_in_flight_cap_get_an_answer() {
    let (st, names) = cluster();
    let limits = CallLimits {
        max_in_flight: 1,
        queue_wait: Duration::from_millis(50),
        budget: Duration::from_secs(2),
        ..CallLimits::default()
    };
    let (addr, app, stop) = start(st, limits).await;
    let heavy = args(&heavy_pod(10_000), &names);
    let busy = tokio::spawn(async move { timed(addr, "/filter", heavy).await });
    // The next call goes once the heavy one holds the only slot (the gauge says so), not
    // after a fixed sleep a fast build outruns.
    let t0 = Instant::now();
    while app.metrics.in_flight.get() < 1 {
        assert!(
            t0.elapsed() < Duration::from_secs(5),
            "the heavy call never started"
        );
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    let (code, text, t) = timed(addr, "/filter", args(&ordinary_pod(), &names)).await;
    assert_eq!(code, 503, "{text}");
    assert!(text.contains("--max-in-flight"), "{text}");
    assert!(t < Duration::from_millis(1_000), "{t:?}");
    // The probes are not behind the gate.
    assert_eq!(timed(addr, "/healthz", Vec::new()).await.0, 200);
    assert_eq!(busy.await.unwrap().0, 200);
    let m = app.metrics.render();
    assert!(
        m.contains(r#"topoalign_extender_refused_total{reason="busy"} 1"#),
        "{m}"
    );
    stop.send(()).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_413_names_the_limit_and_the_flag_that_raises_it() {
    let (st, names) = cluster();
    let limits = CallLimits {
        max_body_bytes: 1024,
        ..CallLimits::default()
    };
    let (addr, _app, stop) = start(st, limits).await;
    let (code, text) = http(addr, "POST", "/filter", args(&ordinary_pod(), &names)).await;
    assert_eq!(code, 413, "{}", &text[..text.len().min(300)]);
    assert!(
        text.contains("limit of 1024 bytes") && text.contains("--max-body-bytes"),
        "{text}"
    );
    let few = args(&ordinary_pod(), &names[..3]);
    assert_eq!(http(addr, "POST", "/filter", few).await.0, 200);
    stop.send(()).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_events_are_applied_while_a_heavy_pod_is_judged() {
    let (st, names) = cluster();
    let limits = CallLimits {
        budget: Duration::from_secs(3),
        ..CallLimits::default()
    };
    let (addr, app, stop) = start(st, limits).await;
    let heavy = args(&heavy_pod(10_000), &names);
    let call = tokio::spawn(async move { timed(addr, "/filter", heavy).await });
    tokio::time::sleep(Duration::from_millis(800)).await;
    let a = app.clone();
    let took = tokio::task::spawn_blocking(move || {
        let mut i = Interner::default();
        let mut worst = Duration::ZERO;
        for k in 0..20 {
            let t0 = Instant::now();
            a.state.write().unwrap().upsert_node(
                &format!("new-{k}"),
                node(&mut i, "mi300x-8", Policy::Restricted, &[], &[]),
            );
            a.note_changed();
            worst = worst.max(t0.elapsed());
        }
        worst
    })
    .await
    .unwrap();
    assert!(took < Duration::from_millis(200), "{took:?}");
    assert!(app.state.read().unwrap().node("new-19").is_some());
    assert_eq!(call.await.unwrap().0, 200);
    stop.send(()).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn warming_is_bounded_and_skips_costly_shapes() {
    let (st, names) = cluster();
    let (addr, app, stop) = start(st, CallLimits::default()).await;
    // A heavy shape and an ordinary one in the cache.
    assert_eq!(
        timed(addr, "/filter", args(&heavy_pod(10_000), &names[..40]))
            .await
            .0,
        200
    );
    assert_eq!(
        timed(addr, "/filter", args(&ordinary_pod(), &names))
            .await
            .0,
        200
    );
    let a = app.clone();
    let (judged, took) = tokio::task::spawn_blocking(move || {
        let _ = a.warm_changed();
        // Every node changes (a new usage: a new state key).
        let mut i = Interner::default();
        {
            let mut st = a.state.write().unwrap();
            for (k, n) in names.iter().enumerate() {
                let gpus: &[&str] = if k % 2 == 0 {
                    &MI_GPUS_N0[..1]
                } else {
                    &MI_GPUS_N1[..1]
                };
                st.upsert_node(n, node(&mut i, "mi300x-8", Policy::Restricted, gpus, &[]));
            }
        }
        let t0 = Instant::now();
        let judged = a.warm_changed();
        (judged, t0.elapsed())
    })
    .await
    .unwrap();
    assert!(took < WARM_ROUND + Duration::from_millis(300), "{took:?}");
    // Two new node states, judged for the ordinary shape, not the heavy one.
    assert!(judged <= 2, "{judged}");
    let _ = SystemTime::now();
    stop.send(()).unwrap();
}
