//! The server kit every topoalign HTTP server runs on (the extender, the driver's and
//! the agent's probe ports): HTTP/1.1 over hyper with
//!
//! - a **header-read timeout**: a request head not complete this long after its first
//!   byte (or, on a fresh connection, after the accept) closes the connection;
//! - an **idle timeout**: a keep-alive connection quiet this long between requests is
//!   closed (longer than Go's 90 s `IdleConnTimeout`, so the client closes first);
//! - a **body-read timeout** and size limit for handlers that read a body
//!   ([`read_body`]);
//! - a **connection cap**: past [`Limits::max_connections`] open connections a new one
//!   gets `503` and is closed at once, so file descriptors never run out;
//! - a **bounded graceful shutdown**: when told to stop, no new connection is accepted,
//!   idle ones close, requests in flight may finish for [`Limits::shutdown_grace`], then
//!   every connection still open (a half-sent request, a slow reader) is dropped;
//! - an optional **handshake** before HTTP ([`Handshake`]: TLS for the admission webhook),
//!   bounded by the header-read timeout like a request head.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::Request;
use http_body_util::{BodyExt, Limited};
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Semaphore, watch};
use tokio::task::JoinSet;

/// The kit's limits (see the module documentation).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// A request head must be complete this long after its first byte.
    pub header_read_timeout: Duration,
    /// A request body must be read whole within this ([`read_body`]).
    pub body_read_timeout: Duration,
    /// A keep-alive connection with no request this long is closed.
    pub idle_timeout: Duration,
    /// Connections open at once; more are answered `503` and closed.
    pub max_connections: usize,
    /// How long requests in flight may finish after the stop signal.
    pub shutdown_grace: Duration,
}

impl Default for Limits {
    /// 10 s to send a head, 10 s to send a body, 120 s idle, 512 connections, 5 s grace.
    fn default() -> Self {
        Limits {
            header_read_timeout: Duration::from_secs(10),
            body_read_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(120),
            max_connections: 512,
            shutdown_grace: Duration::from_secs(5),
        }
    }
}

impl Limits {
    /// The limits of a probe port (`/healthz`, `/readyz`, `/metrics` only: tiny, fast
    /// answers): the defaults with 64 connections and a 2 s shutdown grace.
    pub fn probes() -> Self {
        Limits {
            max_connections: 64,
            shutdown_grace: Duration::from_secs(2),
            ..Limits::default()
        }
    }
}

/// How a server ended.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Stopped {
    /// Connections still open at the end of the grace period, dropped.
    pub cut_off: usize,
}

/// Counters of the kit, shared with the process (for its metrics).
#[derive(Debug, Default)]
pub struct ConnStats {
    /// Connections open now.
    pub open: AtomicUsize,
    /// Connections refused because [`Limits::max_connections`] were open.
    pub refused: AtomicU64,
    /// Connections closed by the header-read or idle timeout (or a handshake not done
    /// within the header-read timeout).
    pub timed_out: AtomicU64,
    /// Connections whose [`Handshake`] failed (a client that is not a TLS client, say).
    pub handshakes_failed: AtomicU64,
}

/// What turns an accepted TCP connection into the stream HTTP is served on: nothing
/// ([`Plain`]), or a TLS handshake. It must complete within the header-read timeout.
pub trait Handshake: Clone + Send + Sync + 'static {
    /// The stream after the handshake.
    type Stream: AsyncRead + AsyncWrite + Unpin + Send + 'static;
    /// Performs the handshake.
    fn handshake(
        &self,
        tcp: TcpStream,
    ) -> impl Future<Output = std::io::Result<Self::Stream>> + Send;
    /// Whether a connection over the cap may be answered with a plain-text `503` (not on
    /// a TLS port, where the client could not read it: it is closed instead).
    fn plain_refusal(&self) -> bool;
}

/// No handshake: HTTP on the TCP stream.
#[derive(Debug, Clone, Copy, Default)]
pub struct Plain;

impl Handshake for Plain {
    type Stream = TcpStream;
    async fn handshake(&self, tcp: TcpStream) -> std::io::Result<TcpStream> {
        Ok(tcp)
    }
    fn plain_refusal(&self) -> bool {
        true
    }
}

/// Serves `router` on `listener` with `limits` until `shutdown` completes, then shuts
/// down within [`Limits::shutdown_grace`] (plus a few milliseconds).
pub async fn serve_with(
    listener: TcpListener,
    router: Router,
    limits: Limits,
    stats: Arc<ConnStats>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<Stopped> {
    serve_with_handshake(listener, router, limits, stats, Plain, shutdown).await
}

/// [`serve_with`], each accepted connection passing `handshake` first (within
/// [`Limits::header_read_timeout`]; a failed or late handshake closes the connection).
pub async fn serve_with_handshake<H: Handshake>(
    listener: TcpListener,
    router: Router,
    limits: Limits,
    stats: Arc<ConnStats>,
    handshake: H,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<Stopped> {
    let slots = Arc::new(Semaphore::new(limits.max_connections.max(1)));
    let (stop_tx, stop_rx) = watch::channel(false);
    let mut conns: JoinSet<()> = JoinSet::new();
    let mut shutdown = std::pin::pin!(shutdown);
    let mut last_warn: Option<Instant> = None;
    loop {
        tokio::select! {
            () = &mut shutdown => break,
            Some(_) = conns.join_next(), if !conns.is_empty() => {}
            accepted = listener.accept() => match accepted {
                Ok((stream, _peer)) => {
                    let _ = stream.set_nodelay(true);
                    match slots.clone().try_acquire_owned() {
                        Ok(permit) => {
                            let (router, stats, stop) = (router.clone(), stats.clone(), stop_rx.clone());
                            let hs = handshake.clone();
                            conns.spawn(async move {
                                stats.open.fetch_add(1, Ordering::Relaxed);
                                match tokio::time::timeout(limits.header_read_timeout, hs.handshake(stream)).await {
                                    Ok(Ok(stream)) => connection(stream, router, limits, &stats, stop).await,
                                    Ok(Err(e)) => {
                                        stats.handshakes_failed.fetch_add(1, Ordering::Relaxed);
                                        tracing::debug!(error = %e, "connection handshake failed");
                                    }
                                    Err(_) => {
                                        stats.timed_out.fetch_add(1, Ordering::Relaxed);
                                        tracing::debug!("connection closed: handshake not done within the header-read timeout");
                                    }
                                }
                                stats.open.fetch_sub(1, Ordering::Relaxed);
                                drop(permit);
                            });
                        }
                        Err(_) => {
                            stats.refused.fetch_add(1, Ordering::Relaxed);
                            if last_warn.is_none_or(|t| t.elapsed() > Duration::from_secs(10)) {
                                last_warn = Some(Instant::now());
                                tracing::warn!(max_connections = limits.max_connections, "connection cap reached; new connections get 503");
                            }
                            if handshake.plain_refusal() {
                                conns.spawn(refuse(stream, limits.max_connections));
                            } else {
                                drop(stream);
                            }
                        }
                    }
                }
                Err(e) => {
                    // Out of file descriptors and the like: wait a little, go on.
                    tracing::warn!(error = %e, "accepting a connection failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            },
        }
    }
    drop(listener);
    let _ = stop_tx.send(true);
    let drain = async { while conns.join_next().await.is_some() {} };
    let cut_off = match tokio::time::timeout(limits.shutdown_grace, drain).await {
        Ok(()) => 0,
        Err(_) => {
            let n = conns.len();
            conns.abort_all();
            while conns.join_next().await.is_some() {}
            tracing::warn!(
                connections = n,
                grace_ms = limits.shutdown_grace.as_millis() as u64,
                "connections still open after the shutdown grace period; closed"
            );
            n
        }
    };
    Ok(Stopped { cut_off })
}

/// Answers `503` on a connection over the cap and closes it (bounded: 1 s).
async fn refuse(mut stream: TcpStream, cap: usize) {
    let body = format!("too many connections (the server's cap is {cap})\n");
    let head = format!(
        "HTTP/1.1 503 Service Unavailable\r\nconnection: close\r\ncontent-type: text/plain\r\ncontent-length: {}\r\nretry-after: 1\r\n\r\n{body}",
        body.len()
    );
    let _ = tokio::time::timeout(Duration::from_secs(1), async {
        let _ = stream.write_all(head.as_bytes()).await;
        let _ = stream.shutdown().await;
    })
    .await;
}

/// What a connection's watchdog reads: milliseconds since the connection's start.
#[derive(Debug)]
struct Activity {
    start: Instant,
    /// Requests being answered.
    in_flight: AtomicUsize,
    /// When the last request ended (or the connection opened).
    idle_since: AtomicU64,
    /// When the first byte of a request head not yet complete arrived (`u64::MAX`: none).
    head_since: AtomicU64,
    /// Whether a request was ever served (a fresh connection gets the header timeout
    /// from its accept).
    served: AtomicBool,
}

impl Activity {
    fn now(&self) -> u64 {
        u64::try_from(self.start.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    /// Bytes arrived: when no request is being answered they begin a request head.
    fn read(&self) {
        if self.in_flight.load(Ordering::SeqCst) == 0 {
            let now = self.now();
            let _ =
                self.head_since
                    .compare_exchange(u64::MAX, now, Ordering::SeqCst, Ordering::SeqCst);
        }
    }

    fn begin(&self) {
        self.in_flight.fetch_add(1, Ordering::SeqCst);
        self.head_since.store(u64::MAX, Ordering::SeqCst);
        self.served.store(true, Ordering::SeqCst);
    }

    fn end(&self) {
        self.idle_since.store(self.now(), Ordering::SeqCst);
        self.in_flight.fetch_sub(1, Ordering::SeqCst);
    }

    /// Whether the connection is past a deadline.
    fn expired(&self, limits: &Limits) -> bool {
        if self.in_flight.load(Ordering::SeqCst) > 0 {
            return false;
        }
        let now = self.now();
        let ms = |d: Duration| u64::try_from(d.as_millis()).unwrap_or(u64::MAX);
        let head = self.head_since.load(Ordering::SeqCst);
        if head != u64::MAX {
            return now.saturating_sub(head) > ms(limits.header_read_timeout);
        }
        let idle = now.saturating_sub(self.idle_since.load(Ordering::SeqCst));
        if self.served.load(Ordering::SeqCst) {
            idle > ms(limits.idle_timeout)
        } else {
            idle > ms(limits.header_read_timeout)
        }
    }
}

/// A stream that tells its [`Activity`] when bytes arrive.
struct Watched<S> {
    inner: S,
    activity: Arc<Activity>,
}

impl<S: AsyncRead + Unpin> AsyncRead for Watched<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let r = Pin::new(&mut self.inner).poll_read(cx, buf);
        if matches!(r, Poll::Ready(Ok(()))) && buf.filled().len() > before {
            self.activity.read();
        }
        r
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Watched<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    // Forwarded so that hyper sends a large body from its own buffer with the head in one
    // vectored write; without them it copies every body into its write buffer first (a
    // 20,000-node scheduler answer is 300 KiB).
    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

/// Ends a request's activity when dropped (the handler finished or was cancelled).
struct InFlight(Arc<Activity>);

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.end();
    }
}

/// One connection: HTTP/1.1 with keep-alive, watched for the timeouts, shut down
/// gracefully when `stop` turns true.
async fn connection<S: AsyncRead + AsyncWrite + Unpin + Send + 'static>(
    stream: S,
    router: Router,
    limits: Limits,
    stats: &ConnStats,
    mut stop: watch::Receiver<bool>,
) {
    let activity = Arc::new(Activity {
        start: Instant::now(),
        in_flight: AtomicUsize::new(0),
        idle_since: AtomicU64::new(0),
        head_since: AtomicU64::new(u64::MAX),
        served: AtomicBool::new(false),
    });
    let io = hyper_util::rt::TokioIo::new(Watched {
        inner: stream,
        activity: activity.clone(),
    });
    let a = activity.clone();
    let service = hyper::service::service_fn(move |req: Request<hyper::body::Incoming>| {
        a.begin();
        let guard = InFlight(a.clone());
        let router = router.clone();
        async move {
            let r = tower::ServiceExt::oneshot(router, req.map(Body::new)).await;
            drop(guard);
            r
        }
    });
    let conn = hyper::server::conn::http1::Builder::new()
        .keep_alive(true)
        .serve_connection(io, service);
    let mut conn = std::pin::pin!(conn);
    let tick = (limits.header_read_timeout.min(limits.idle_timeout) / 4)
        .clamp(Duration::from_millis(10), Duration::from_secs(1));
    let mut stopping = *stop.borrow();
    if stopping {
        conn.as_mut().graceful_shutdown();
    }
    loop {
        tokio::select! {
            r = conn.as_mut() => {
                if let Err(e) = r {
                    tracing::debug!(error = %e, "connection ended with an error");
                }
                return;
            }
            changed = stop.changed(), if !stopping => {
                stopping = true;
                if changed.is_ok() {
                    conn.as_mut().graceful_shutdown();
                }
            }
            () = tokio::time::sleep(tick) => {
                if activity.expired(&limits) {
                    stats.timed_out.fetch_add(1, Ordering::Relaxed);
                    tracing::debug!("connection closed: header-read or idle timeout");
                    return;
                }
            }
        }
    }
}

/// Why a request body could not be read.
#[derive(Debug, thiserror::Error)]
pub enum BodyError {
    /// Longer than the limit.
    #[error("request body larger than {limit} bytes")]
    TooLarge {
        /// The limit, in bytes.
        limit: usize,
    },
    /// Not sent whole in time.
    #[error("request body not received within {0:?}")]
    TimedOut(Duration),
    /// The connection failed while reading.
    #[error("reading the request body: {0}")]
    Read(#[source] Box<dyn std::error::Error + Send + Sync>),
}

/// Reads a whole request body of at most `limit` bytes within `timeout`.
pub async fn read_body(body: Body, limit: usize, timeout: Duration) -> Result<Bytes, BodyError> {
    let collect = Limited::new(body, limit).collect();
    match tokio::time::timeout(timeout, collect).await {
        Err(_) => Err(BodyError::TimedOut(timeout)),
        Ok(Ok(c)) => Ok(c.to_bytes()),
        Ok(Err(e)) if e.is::<http_body_util::LengthLimitError>() => {
            Err(BodyError::TooLarge { limit })
        }
        Ok(Err(e)) => Err(BodyError::Read(e)),
    }
}

#[cfg(test)]
#[path = "kit_tests.rs"]
mod tests;
