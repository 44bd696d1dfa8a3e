//! The kit over real loopback TCP: every loop is bounded in count and time.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::net::SocketAddr;

use axum::routing::{get, post};
use tokio::io::AsyncReadExt;

use super::*;

fn limits(header_ms: u64, idle_ms: u64, grace_ms: u64, max: usize) -> Limits {
    Limits {
        header_read_timeout: Duration::from_millis(header_ms),
        body_read_timeout: Duration::from_millis(300),
        idle_timeout: Duration::from_millis(idle_ms),
        max_connections: max,
        shutdown_grace: Duration::from_millis(grace_ms),
    }
}

fn app() -> Router {
    Router::new()
        .route("/healthz", get(|| async { "ok\n" }))
        .route(
            "/slow",
            get(|| async {
                tokio::time::sleep(Duration::from_millis(600)).await;
                "slow\n"
            }),
        )
        .route(
            "/echo",
            post(|body: Body| async move {
                match read_body(body, 16, Duration::from_millis(300)).await {
                    Ok(b) => (axum::http::StatusCode::OK, b.to_vec()),
                    Err(e) => (
                        axum::http::StatusCode::BAD_REQUEST,
                        e.to_string().into_bytes(),
                    ),
                }
            }),
        )
}

struct Running {
    addr: SocketAddr,
    stop: tokio::sync::oneshot::Sender<()>,
    server: tokio::task::JoinHandle<std::io::Result<Stopped>>,
    stats: Arc<ConnStats>,
}

async fn start(l: Limits) -> Running {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let stats = Arc::new(ConnStats::default());
    let server = tokio::spawn(serve_with(listener, app(), l, stats.clone(), async {
        let _ = stopped.await;
    }));
    Running {
        addr,
        stop,
        server,
        stats,
    }
}

/// Reads what the server sends until it closes (at most `within`); the bytes and when.
async fn until_closed(s: &mut TcpStream, within: Duration) -> Option<(String, Duration)> {
    let t0 = Instant::now();
    let mut out = Vec::new();
    let r = tokio::time::timeout(within, s.read_to_end(&mut out)).await;
    match r {
        Ok(_) => Some((String::from_utf8_lossy(&out).into_owned(), t0.elapsed())),
        Err(_) => None,
    }
}

/// One request on an open connection; the response head and body (read by length).
async fn request(s: &mut TcpStream, raw: &str) -> String {
    s.write_all(raw.as_bytes()).await.unwrap();
    let mut buf = vec![0u8; 4096];
    let mut got = Vec::new();
    for _ in 0..100 {
        let n = tokio::time::timeout(Duration::from_secs(3), s.read(&mut buf))
            .await
            .expect("response in time")
            .unwrap();
        got.extend_from_slice(&buf[..n]);
        let text = String::from_utf8_lossy(&got).into_owned();
        if let Some((head, body)) = text.split_once("\r\n\r\n") {
            let len = head
                .lines()
                .find_map(|l| {
                    l.to_ascii_lowercase()
                        .strip_prefix("content-length: ")
                        .map(|v| v.trim().parse::<usize>().unwrap())
                })
                .unwrap_or(0);
            if body.len() >= len {
                return text;
            }
        }
        if n == 0 {
            return text;
        }
    }
    String::from_utf8_lossy(&got).into_owned()
}

#[tokio::test]
async fn a_half_sent_head_is_closed_within_the_header_timeout() {
    let r = start(limits(300, 5_000, 500, 16)).await;
    let mut half = TcpStream::connect(r.addr).await.unwrap();
    half.write_all(b"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Le")
        .await
        .unwrap();
    let (_, after) = until_closed(&mut half, Duration::from_secs(3))
        .await
        .expect("closed by the server");
    assert!(after < Duration::from_millis(1_500), "{after:?}");
    // A connection that never sends a byte gets the same deadline.
    let mut silent = TcpStream::connect(r.addr).await.unwrap();
    let (_, after) = until_closed(&mut silent, Duration::from_secs(3))
        .await
        .expect("closed by the server");
    assert!(after < Duration::from_millis(1_500), "{after:?}");
    assert!(r.stats.timed_out.load(Ordering::Relaxed) >= 2);
    r.stop.send(()).unwrap();
    assert_eq!(r.server.await.unwrap().unwrap().cut_off, 0);
}

#[tokio::test]
async fn keep_alive_outlives_the_header_timeout_until_idle() {
    let r = start(limits(200, 1_000, 500, 16)).await;
    let mut s = TcpStream::connect(r.addr).await.unwrap();
    let get = "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n";
    assert!(request(&mut s, get).await.starts_with("HTTP/1.1 200"));
    // Quiet for longer than the header timeout, shorter than the idle one: still open.
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(request(&mut s, get).await.starts_with("HTTP/1.1 200"));
    // A request longer than both timeouts is not cut.
    let slow = request(&mut s, "GET /slow HTTP/1.1\r\nHost: x\r\n\r\n").await;
    assert!(
        slow.starts_with("HTTP/1.1 200") && slow.ends_with("slow\n"),
        "{slow}"
    );
    // Idle past the idle timeout: closed.
    let (_, after) = until_closed(&mut s, Duration::from_secs(4))
        .await
        .expect("closed when idle");
    assert!(after >= Duration::from_millis(900), "{after:?}");
    r.stop.send(()).unwrap();
    r.server.await.unwrap().unwrap();
}

#[tokio::test]
async fn bodies_are_limited_in_size_and_time() {
    let r = start(limits(1_000, 5_000, 500, 16)).await;
    let mut s = TcpStream::connect(r.addr).await.unwrap();
    let ok = request(
        &mut s,
        "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello",
    )
    .await;
    assert!(
        ok.starts_with("HTTP/1.1 200") && ok.ends_with("hello"),
        "{ok}"
    );
    let big = request(
        &mut s,
        "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 20\r\n\r\n01234567890123456789",
    )
    .await;
    assert!(big.contains("larger than 16 bytes"), "{big}");
    // Headers complete, body half-sent: answered when the body timeout passes.
    let mut slow = TcpStream::connect(r.addr).await.unwrap();
    let t0 = Instant::now();
    let late = request(
        &mut slow,
        "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\nabc",
    )
    .await;
    assert!(late.contains("not received within"), "{late}");
    assert!(t0.elapsed() < Duration::from_secs(2));
    r.stop.send(()).unwrap();
    r.server.await.unwrap().unwrap();
}

#[tokio::test]
async fn shutdown_is_bounded_while_a_client_holds_a_half_sent_request() {
    // A header timeout far past the grace period: only the bound ends the connection.
    let r = start(limits(60_000, 60_000, 400, 16)).await;
    let mut half = TcpStream::connect(r.addr).await.unwrap();
    half.write_all(b"GET /healthz HTTP/1.1\r\nHo")
        .await
        .unwrap();
    let mut idle = TcpStream::connect(r.addr).await.unwrap();
    assert!(
        request(&mut idle, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
            .await
            .starts_with("HTTP/1.1 200")
    );
    // A request in flight at the signal is answered within the grace period.
    let mut busy = TcpStream::connect(r.addr).await.unwrap();
    busy.write_all(b"GET /slow HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(50)).await;
    // (/slow takes 600 ms, past the 400 ms grace: it is cut off too.)
    let t0 = Instant::now();
    r.stop.send(()).unwrap();
    let stopped = tokio::time::timeout(Duration::from_secs(3), r.server)
        .await
        .expect("server stopped in time")
        .unwrap()
        .unwrap();
    let took = t0.elapsed();
    assert!(took < Duration::from_millis(1_000), "{took:?}");
    assert_eq!(stopped.cut_off, 2, "the half-sent and the slow request");
    // The idle keep-alive connection was closed at once, the others at the bound.
    assert!(
        until_closed(&mut idle, Duration::from_secs(1))
            .await
            .is_some()
    );
    assert!(
        until_closed(&mut half, Duration::from_secs(1))
            .await
            .is_some()
    );
    // No new connection is accepted.
    assert!(TcpStream::connect(r.addr).await.is_err());
}

#[tokio::test]
async fn a_request_in_flight_at_the_signal_is_answered() {
    let r = start(limits(60_000, 60_000, 2_000, 16)).await;
    let mut busy = TcpStream::connect(r.addr).await.unwrap();
    busy.write_all(b"GET /slow HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(50)).await;
    r.stop.send(()).unwrap();
    let (text, _) = until_closed(&mut busy, Duration::from_secs(3))
        .await
        .unwrap();
    assert!(
        text.starts_with("HTTP/1.1 200") && text.ends_with("slow\n"),
        "{text}"
    );
    assert_eq!(r.server.await.unwrap().unwrap().cut_off, 0);
}

#[tokio::test]
async fn connections_past_the_cap_get_503() {
    let r = start(limits(5_000, 5_000, 300, 2)).await;
    let mut held = Vec::new();
    for _ in 0..2 {
        let mut s = TcpStream::connect(r.addr).await.unwrap();
        assert!(
            request(&mut s, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
                .await
                .starts_with("HTTP/1.1 200")
        );
        held.push(s);
    }
    let mut third = TcpStream::connect(r.addr).await.unwrap();
    let (text, _) = until_closed(&mut third, Duration::from_secs(2))
        .await
        .expect("answered and closed");
    assert!(text.starts_with("HTTP/1.1 503"), "{text}");
    assert!(
        text.contains("too many connections (the server's cap is 2)"),
        "{text}"
    );
    assert_eq!(r.stats.refused.load(Ordering::Relaxed), 1);
    // A slot freed is a slot taken.
    drop(held.pop());
    let mut again = None;
    for _ in 0..50 {
        tokio::time::sleep(Duration::from_millis(20)).await;
        let mut s = TcpStream::connect(r.addr).await.unwrap();
        let t = request(&mut s, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n").await;
        if t.starts_with("HTTP/1.1 200") {
            again = Some(t);
            break;
        }
    }
    assert!(again.is_some());
    r.stop.send(()).unwrap();
    r.server.await.unwrap().unwrap();
}
