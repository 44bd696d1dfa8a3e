//! The server under abuse, every loop bounded: half-sent heads and bodies, clients that
//! never start TLS, more connections than the cap, many reviews at once, and a shutdown
//! with requests open.

use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::common::{call, connect, limits, metric, read_response, review_of, seed_pod, start};

#[tokio::test]
async fn half_sent_heads_and_silent_clients_are_closed_within_the_header_timeout() {
    let r = start(limits(64), 1 << 20, Duration::from_secs(60)).await;
    // A TCP client that never starts TLS.
    let mut silent = TcpStream::connect(r.addr).await.unwrap();
    // A TLS client that sends half a head.
    let mut half = connect(r.addr).await;
    half.write_all(b"POST /mutate HTTP/1.1\r\nHost: x\r\nContent-Le")
        .await
        .unwrap();
    half.flush().await.unwrap();
    let t0 = Instant::now();
    let mut buf = Vec::new();
    let closed = tokio::time::timeout(Duration::from_secs(5), silent.read_to_end(&mut buf)).await;
    assert!(closed.is_ok(), "a silent client is never closed");
    let (code, _) = read_response(&mut half).await;
    assert_ne!(code, 200);
    assert!(t0.elapsed() < Duration::from_secs(4), "{:?}", t0.elapsed());
    // The server still answers.
    assert_eq!(call(r.addr, "GET", "/healthz", b"").await.0, 200);
    assert!(
        metric(r.addr, "topoalign_webhook_connections_timed_out_total")
            .await
            .unwrap()
            >= 2.0
    );
}

#[tokio::test]
async fn a_half_sent_body_gets_408_within_the_body_timeout() {
    let r = start(limits(64), 1 << 20, Duration::from_secs(60)).await;
    let mut s = connect(r.addr).await;
    s.write_all(
        b"POST /mutate HTTP/1.1\r\nHost: x\r\nContent-Length: 5000\r\nConnection: close\r\n\r\n{\"apiVersion\":",
    )
    .await
    .unwrap();
    s.flush().await.unwrap();
    let t0 = Instant::now();
    let (code, body) = read_response(&mut s).await;
    assert_eq!(code, 408, "{body}");
    assert!(t0.elapsed() < Duration::from_secs(3), "{:?}", t0.elapsed());
}

#[tokio::test]
async fn past_the_cap_connections_are_closed_at_once_and_service_returns() {
    let r = start(limits(8), 1 << 20, Duration::from_secs(60)).await;
    let mut held = Vec::new();
    for _ in 0..8 {
        held.push(TcpStream::connect(r.addr).await.unwrap());
    }
    tokio::time::sleep(Duration::from_millis(100)).await;
    // The ninth is closed at once (no plain-text 503 on a TLS port).
    let mut ninth = TcpStream::connect(r.addr).await.unwrap();
    let t0 = Instant::now();
    let mut buf = Vec::new();
    let r9 = tokio::time::timeout(Duration::from_millis(500), ninth.read_to_end(&mut buf)).await;
    assert!(r9.is_ok() && buf.is_empty(), "{r9:?} {buf:?}");
    assert!(t0.elapsed() < Duration::from_millis(500));
    // The held ones time out (header timeout), then the server serves again.
    tokio::time::sleep(Duration::from_millis(1200)).await;
    drop(held);
    let (code, _) = call(r.addr, "POST", "/mutate", &review_of(seed_pod())).await;
    assert_eq!(code, 200);
    assert!(
        metric(r.addr, "topoalign_webhook_connections_refused_total")
            .await
            .unwrap()
            >= 1.0
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hundred_clients_at_once_are_all_answered() {
    let r = start(limits(512), 1 << 20, Duration::from_secs(60)).await;
    let body = review_of(seed_pod());
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..100 {
        let (addr, body) = (r.addr, body.clone());
        tasks.spawn(async move { call(addr, "POST", "/mutate", &body).await.0 });
    }
    let mut ok = 0;
    while let Some(code) = tasks.join_next().await {
        ok += usize::from(code.unwrap() == 200);
    }
    assert_eq!(ok, 100);
    assert_eq!(
        metric(
            r.addr,
            "topoalign_webhook_admissions_total{outcome=\"rewritten\"}"
        )
        .await,
        Some(100.0)
    );
}

#[tokio::test]
async fn shutdown_with_requests_open_ends_within_the_grace() {
    let mut r = start(limits(64), 1 << 20, Duration::from_secs(60)).await;
    // A review whose body is half sent (its handler is waiting), and an idle TLS client.
    let mut half = connect(r.addr).await;
    half.write_all(b"POST /mutate HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{")
        .await
        .unwrap();
    half.flush().await.unwrap();
    let _idle = connect(r.addr).await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    let t0 = Instant::now();
    r.stop.take().unwrap().send(()).unwrap();
    let stopped = tokio::time::timeout(Duration::from_secs(3), &mut r.server)
        .await
        .expect("the server ends within its grace")
        .unwrap()
        .unwrap();
    // Grace 700 ms: the half-sent review runs into its body timeout (800 ms) or the cut.
    assert!(
        t0.elapsed() < Duration::from_millis(1500),
        "{:?}",
        t0.elapsed()
    );
    assert!(stopped.cut_off <= 2, "{stopped:?}");
    // Nothing listens any more.
    assert!(TcpStream::connect(r.addr).await.is_err());
}
