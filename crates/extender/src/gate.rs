//! What bounds the scheduler calls (`/filter`, `/prioritize`): their bodies in size and
//! time, the calls and the body bytes in flight (so that memory stays well inside the
//! chart's limit however many clients send at once), and the work one call may do.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use topoalign_probes::Limits;

/// Limits of the scheduler calls, and the server kit's limits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CallLimits {
    /// The largest request body accepted (`--max-body-bytes`).
    pub max_body_bytes: usize,
    /// Request body bytes held by all calls in flight together
    /// (`--max-inflight-body-bytes`); a call reserves its `Content-Length` (or
    /// [`CallLimits::max_body_bytes`] when it sends none) before its body is read.
    pub max_inflight_body_bytes: usize,
    /// Calls judged at once (`--max-in-flight`).
    pub max_in_flight: usize,
    /// How long a call waits for room before it is answered `503` (`--queue-wait-ms`).
    pub queue_wait: Duration,
    /// From a call's arrival, how long it may judge nodes (`--call-budget-ms`); nodes
    /// not judged by then pass with a neutral score.
    pub budget: Duration,
    /// The server kit's timeouts, connection cap and shutdown grace.
    pub server: Limits,
}

/// 16 MiB bodies, 32 MiB in flight, 16 calls, 1 s wait, 2.5 s budget (the scheduler's
/// `httpTimeout` is 5 s).
impl Default for CallLimits {
    fn default() -> Self {
        CallLimits {
            max_body_bytes: 16 << 20,
            max_inflight_body_bytes: 32 << 20,
            max_in_flight: 16,
            queue_wait: Duration::from_secs(1),
            budget: Duration::from_millis(2_500),
            server: Limits::default(),
        }
    }
}

impl CallLimits {
    /// The 413 answer: the limit, and how to raise it.
    pub fn too_large_message(&self) -> String {
        format!(
            "request body larger than the extender's limit of {} bytes (--max-body-bytes={}): raise --max-body-bytes (Helm value extender.maxBodyBytes) together with the extender's memory limit, or set nodeCacheCapable: true in the scheduler's extender configuration so that it sends node names only",
            self.max_body_bytes, self.max_body_bytes
        )
    }

    /// The 503 answer when no room frees in time.
    pub fn busy_message(&self) -> String {
        format!(
            "extender busy: {} calls or {} bytes of request bodies in flight for more than {} ms (--max-in-flight, --max-inflight-body-bytes, --queue-wait-ms)",
            self.max_in_flight,
            self.max_inflight_body_bytes,
            self.queue_wait.as_millis()
        )
    }
}

/// Room for calls and body bytes (in KiB) in flight.
#[derive(Debug)]
pub(crate) struct Gate {
    calls: Arc<Semaphore>,
    kib: Arc<Semaphore>,
    total_kib: usize,
}

/// A call's room: released when dropped.
#[derive(Debug)]
pub(crate) struct Pass {
    _call: OwnedSemaphorePermit,
    _bytes: OwnedSemaphorePermit,
}

impl Gate {
    /// A gate for `limits`.
    pub(crate) fn new(limits: &CallLimits) -> Self {
        let total_kib = limits
            .max_inflight_body_bytes
            .div_ceil(1024)
            .clamp(1, u32::MAX as usize);
        Gate {
            calls: Arc::new(Semaphore::new(limits.max_in_flight.max(1))),
            kib: Arc::new(Semaphore::new(total_kib)),
            total_kib,
        }
    }

    /// Waits up to [`CallLimits::queue_wait`] for room for one call of `declared` body
    /// bytes; `None` when none freed in time.
    pub(crate) async fn enter(&self, declared: Option<usize>, limits: &CallLimits) -> Option<Pass> {
        let want = declared
            .unwrap_or(limits.max_body_bytes)
            .div_ceil(1024)
            .clamp(1, self.total_kib);
        let want = u32::try_from(want).unwrap_or(u32::MAX);
        let take = async {
            let call = self.calls.clone().acquire_owned().await.ok()?;
            let bytes = self.kib.clone().acquire_many_owned(want).await.ok()?;
            Some(Pass {
                _call: call,
                _bytes: bytes,
            })
        };
        tokio::time::timeout(limits.queue_wait, take)
            .await
            .ok()
            .flatten()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[tokio::test]
    async fn the_gate_bounds_calls_and_bytes() {
        let limits = CallLimits {
            max_in_flight: 2,
            max_inflight_body_bytes: 10 << 10,
            max_body_bytes: 8 << 10,
            queue_wait: Duration::from_millis(50),
            ..CallLimits::default()
        };
        let gate = Gate::new(&limits);
        let a = gate.enter(Some(6 << 10), &limits).await.unwrap();
        // 6 KiB held of 10: another 6 KiB waits, then gives up.
        assert!(gate.enter(Some(6 << 10), &limits).await.is_none());
        let b = gate.enter(Some(1 << 10), &limits).await.unwrap();
        // Two calls held: a third waits however small.
        assert!(gate.enter(Some(10), &limits).await.is_none());
        drop(a);
        // No Content-Length: the whole per-call limit is reserved.
        let c = gate.enter(None, &limits).await.unwrap();
        drop((b, c));
        let m = limits.too_large_message();
        assert!(
            m.contains("8192 bytes") && m.contains("--max-body-bytes"),
            "{m}"
        );
        assert!(limits.busy_message().contains("--max-in-flight"));
    }
}
