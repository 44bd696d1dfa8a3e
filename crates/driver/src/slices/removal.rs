//! The slice controller's removal at shutdown: every slice of this driver and node is
//! deleted, retried until the removal timeout (the API server may be away).

use std::time::Duration;

use kube::api::ListParams;
use tokio::time::Instant;

use super::{SliceController, field_selector, retry_backoff};
use crate::error::DriverError;

impl SliceController {
    /// Deletes every slice of this driver and node, retrying until
    /// `removal_timeout` has passed (each try is cut off at that
    /// deadline too): it gives up at the deadline, not before.
    pub(crate) async fn remove_all(&mut self) -> Result<(), DriverError> {
        let timeout = self.removal_timeout;
        let deadline = Instant::now() + timeout;
        let mut backoff = retry_backoff();
        tracing::info!(node = %self.node_name, timeout_ms = timeout.as_millis() as u64, "removing this node's ResourceSlices");
        let mut tries = 0u32;
        loop {
            tries += 1;
            let left = deadline.saturating_duration_since(Instant::now());
            let outcome = match tokio::time::timeout(left, self.try_remove_all()).await {
                Ok(r) => r,
                Err(_) => Err(DriverError::Task {
                    task: "slice removal",
                    why: format!("no answer from the API server within {timeout:?}"),
                }),
            };
            match outcome {
                Ok(n) => {
                    tracing::info!(node = %self.node_name, deleted = n, "removed this node's ResourceSlices");
                    self.metrics.resourceslices.set(0);
                    self.metrics.devices.set(0);
                    return Ok(());
                }
                Err(e) => {
                    let left = deadline.saturating_duration_since(Instant::now());
                    if left.is_zero() {
                        tracing::error!(node = %self.node_name, tries, error = %e, "gave up removing this node's ResourceSlices");
                        return Err(DriverError::Removal {
                            after: timeout,
                            last: Box::new(e),
                        });
                    }
                    let wait = backoff.next().unwrap_or(Duration::from_secs(5)).min(left);
                    tracing::warn!(error = %e, retry_in_ms = wait.as_millis() as u64, left_ms = left.as_millis() as u64, "removing this node's ResourceSlices; retrying");
                    tokio::time::sleep(wait).await;
                }
            }
        }
    }

    async fn try_remove_all(&mut self) -> Result<usize, DriverError> {
        let params = ListParams::default().fields(&field_selector(&self.node_name));
        let names: Vec<String> = self
            .slices
            .list(&params)
            .await
            .map_err(|e| DriverError::api("listing this node's ResourceSlices", e))?
            .items
            .into_iter()
            .filter_map(|s| s.metadata.name)
            .collect();
        for name in &names {
            self.delete(name).await?;
        }
        Ok(names.len())
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::super::tests::controller;
    use std::time::Duration;

    #[tokio::test]
    async fn removal_keeps_trying_until_its_deadline_and_no_longer() {
        let mut p = controller(Duration::from_secs(3));
        let t0 = std::time::Instant::now();
        let e = p.remove_all().await.unwrap_err();
        let took = t0.elapsed();
        assert!(
            took >= Duration::from_millis(2_900),
            "gave up early: {took:?}"
        );
        assert!(took < Duration::from_millis(4_000), "overran: {took:?}");
        assert!(e.to_string().contains("within 3s"), "{e}");
    }
}
