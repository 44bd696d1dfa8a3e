//! One publishing round of the slice controller: the slices the pool asks for, read
//! against what the API server holds, written where they differ (counter slices first),
//! read back (did the API server keep the counters pair devices rely on?), and the
//! publishing mode switched when the readback says so.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use k8s_openapi::api::resource::v1::ResourceSlice;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams};
use topoalign_dra::{DRIVER_NAME, publish::Inventory};

use super::diff::{self, SyncPlan, Written};
use super::readback::{self, Loss, PairMode};
use super::{RECENT_WRITES, SliceController, field_selector};
use crate::error::DriverError;
use crate::metrics::OpLabel;

/// How the pool's mode changed within one round.
enum Round {
    /// The round completed in the current mode.
    Done(SyncPlan),
    /// The readback switched the mode; the pool is rebuilt at once.
    Switched,
}

impl SliceController {
    /// Logs the API server's version as a hint and starts with plain devices on servers
    /// older than the first with `DRAPartitionableDevices` on by default (the readback
    /// still decides: the gate may be on there, or off on a newer one).
    pub(crate) async fn check_version(&mut self) {
        let info = match self.client.apiserver_version().await {
            Ok(info) => info,
            Err(e) => {
                tracing::debug!(error = %e, "reading the API server's version (a hint only)");
                return;
            }
        };
        let (want_major, want_minor) = readback::FIRST_PARTITIONABLE_BY_DEFAULT;
        match readback::version(&info) {
            Some(v) if !readback::partitionable_by_default(v) => {
                tracing::info!(
                    version = %info.git_version,
                    "the API server is older than {want_major}.{want_minor}, where DRAPartitionableDevices is off unless enabled: publishing plain devices until the ResourceSlice counters are seen to survive"
                );
                self.mode = PairMode::PlainOnly;
            }
            Some(_) => tracing::info!(
                version = %info.git_version,
                "the API server has DRAPartitionableDevices on by default; checking that the ResourceSlice counters survive"
            ),
            None => tracing::debug!(version = ?info, "unreadable API server version"),
        }
    }

    /// The slices this node should publish now (generation 0; owned by the Node object
    /// when it exists, so that deleting the node deletes them).
    async fn desired(&mut self) -> Result<Vec<ResourceSlice>, DriverError> {
        let inventory = self.inventory_now();
        let mut slices = topoalign_dra::publish::slices_for(
            &inventory,
            &self.node_name,
            self.pool.generation(),
        )?;
        let node = self
            .nodes
            .get_opt(&self.node_name)
            .await
            .map_err(|e| DriverError::api(format!("reading Node {}", self.node_name), e))?;
        let owner = node.and_then(|n| n.metadata.uid).map(|uid| OwnerReference {
            api_version: "v1".into(),
            kind: "Node".into(),
            name: self.node_name.clone(),
            uid,
            controller: Some(true),
            block_owner_deletion: None,
        });
        for s in &mut slices {
            s.spec.pool.generation = 0;
            s.metadata.owner_references = owner.clone().map(|o| vec![o]);
        }
        Ok(slices)
    }

    /// The inventory of the current mode: the pool's, or, while pair devices are off
    /// ([`PairMode::PlainOnly`]), the pool's without pairs.
    fn inventory_now(&self) -> Arc<Inventory> {
        if self.mode.pairs() {
            self.pool.inventory.clone()
        } else {
            self.pool.plain()
        }
    }

    /// One publishing round: read what the API server holds, write what differs, read
    /// the counters back. A mode switch rebuilds the pool at once (at most one switch back
    /// to pairs per call, so contradictory readbacks cannot loop).
    pub(crate) async fn sync(&mut self) -> Result<SyncPlan, DriverError> {
        let mut upgrades = 1;
        loop {
            match self.round(upgrades > 0).await? {
                Round::Done(plan) => return Ok(plan),
                Round::Switched if self.mode.pairs() => upgrades -= 1,
                Round::Switched => {}
            }
        }
    }

    async fn round(&mut self, may_upgrade: bool) -> Result<Round, DriverError> {
        let desired = self.desired().await?;
        self.owner_missing = lacks_owner(&desired);
        let params = ListParams::default().fields(&field_selector(&self.node_name));
        let existing = self
            .slices
            .list(&params)
            .await
            .map_err(|e| DriverError::api("listing this node's ResourceSlices", e))?
            .items;
        let plan = diff::plan(&desired, &existing, &self.memo, self.floor);
        self.desired_names = desired
            .iter()
            .filter_map(|s| s.metadata.name.clone())
            .collect();
        // The slices as the API server holds them, updated with every apply's answer.
        let mut stored: BTreeMap<String, ResourceSlice> = existing
            .into_iter()
            .filter_map(|s| Some((s.metadata.name.clone()?, s)))
            .collect();

        for name in &plan.delete_first {
            self.delete(name).await?;
            stored.remove(name);
        }
        // Counter slices first: their readback decides before any pair is written.
        let (counter_applies, device_applies): (Vec<_>, Vec<_>) = plan
            .apply
            .iter()
            .zip(desired_for(&plan, &desired))
            .partition(|(slice, _)| slice.spec.shared_counters.is_some());
        for (slice, want) in counter_applies {
            let written = self.apply(slice, want).await?;
            stored.insert(written.metadata.name.clone().unwrap_or_default(), written);
        }
        if self.mode.pairs() {
            let counters = desired.iter().filter(|d| d.spec.shared_counters.is_some());
            let loss = readback::pool_loss(counters, &stored);
            if let Some(to) = readback::next_mode(self.mode, &loss, true, false) {
                self.switch(to, &loss);
                return Ok(Round::Switched);
            }
        }
        for (slice, want) in device_applies {
            let written = self.apply(slice, want).await?;
            stored.insert(written.metadata.name.clone().unwrap_or_default(), written);
        }
        if !self.mode.pairs() {
            // Probe: re-apply what is stored without its counters. A no-op while the API
            // server drops them; once it keeps them (the gate turned on) they are back.
            let applied: BTreeSet<&str> = plan
                .apply
                .iter()
                .filter_map(|s| s.metadata.name.as_deref())
                .collect();
            for d in &desired {
                let name = d.metadata.name.as_deref().unwrap_or_default();
                let lost = stored
                    .get(name)
                    .is_some_and(|s| !readback::slice_loss(d, s).is_empty());
                if applied.contains(name) || !lost {
                    continue;
                }
                let mut probe = d.clone();
                probe.spec.pool.generation = plan.generation;
                let written = self.apply(&probe, d).await?;
                stored.insert(name.to_string(), written);
            }
        }
        let loss = readback::pool_loss(&desired, &stored);
        let counted = desired.iter().any(readback::has_counters);
        if let Some(to) = readback::next_mode(self.mode, &loss, counted, may_upgrade) {
            self.switch(to, &loss);
            return Ok(Round::Switched);
        }
        for name in &plan.delete {
            self.delete(name).await?;
        }
        self.confirm(&loss);

        self.floor = self.floor.max(plan.generation);
        if plan.bumped {
            self.metrics.publishes.inc();
            tracing::info!(
                node = %self.node_name,
                generation = plan.generation,
                slices = desired.len(),
                applied = plan.apply.len(),
                deleted = plan.delete.len() + plan.delete_first.len(),
                mode = %self.mode,
                reasons = %plan.reasons.join("; "),
                "published the pool"
            );
        } else if !plan.is_noop() {
            tracing::info!(
                node = %self.node_name,
                generation = plan.generation,
                applied = plan.apply.len(),
                deleted = plan.delete.len(),
                "tidied the pool (same generation)"
            );
        } else {
            tracing::debug!(node = %self.node_name, generation = plan.generation, "pool in sync");
        }
        self.metrics.resourceslices.set(desired.len() as i64);
        self.metrics.devices.set(
            desired
                .iter()
                .map(|s| s.spec.devices.as_ref().map_or(0, Vec::len) as i64)
                .sum(),
        );
        self.metrics.pool_generation.set(plan.generation);
        Ok(Round::Done(plan))
    }

    /// Applies one slice; the API server's answer is the slice as stored.
    async fn apply(
        &mut self,
        slice: &ResourceSlice,
        want: &ResourceSlice,
    ) -> Result<ResourceSlice, DriverError> {
        let name = slice.metadata.name.clone().unwrap_or_default();
        let written = self
            .slices
            .patch(
                &name,
                &PatchParams::apply(DRIVER_NAME).force(),
                &Patch::Apply(slice),
            )
            .await
            .map_err(|e| DriverError::api(format!("applying ResourceSlice {name}"), e))?;
        self.metrics
            .slice_writes
            .get_or_create(&OpLabel { op: "apply" })
            .inc();
        if let Some(rv) = written.metadata.resource_version.clone() {
            if self.recent_writes.len() == RECENT_WRITES {
                self.recent_writes.pop_front();
            }
            self.recent_writes.push_back(rv.clone());
            self.memo.insert(
                name,
                Written {
                    resource_version: rv,
                    fingerprint: diff::fingerprint(want),
                },
            );
        }
        Ok(written)
    }

    /// Switches the mode mid-round (the next round rebuilds the pool).
    fn switch(&mut self, to: PairMode, loss: &Loss) {
        tracing::debug!(node = %self.node_name, from = %self.mode, to = %to, readback = %loss, "switching the publishing mode");
        self.mode = to;
        self.metrics.pair_devices_enabled.set(0);
    }

    /// A round completed in the current mode: readiness, the gauge, and one log line when
    /// the mode differs from the last one confirmed.
    fn confirm(&mut self, loss: &Loss) {
        let note = match self.mode {
            PairMode::Pairs => {
                "publishing mode pairs: ResourceSlice counters survive on the API server"
                    .to_string()
            }
            PairMode::PlainOnly if !loss.is_empty() => {
                format!("publishing mode plain-only: {}", readback::DROPPED_WARNING)
            }
            PairMode::PlainOnly => "publishing mode plain-only: pair devices wait until the ResourceSlice counters are seen to survive".to_string(),
        };
        self.health.set_mode(note);
        self.metrics
            .pair_devices_enabled
            .set(i64::from(self.mode.pairs()));
        if self.confirmed == Some(self.mode) {
            return;
        }
        self.confirmed = Some(self.mode);
        match self.mode {
            PairMode::Pairs => tracing::info!(
                node = %self.node_name,
                "ResourceSlice counters survive on the API server: publishing pair devices beside plain GPUs and NICs"
            ),
            PairMode::PlainOnly if !loss.is_empty() => tracing::warn!(
                node = %self.node_name,
                readback = %loss,
                "{}",
                readback::DROPPED_WARNING
            ),
            PairMode::PlainOnly => tracing::warn!(
                node = %self.node_name,
                "publishing plain GPU and NIC devices only until the ResourceSlice counters are seen to survive"
            ),
        }
    }

    pub(super) async fn delete(&mut self, name: &str) -> Result<(), DriverError> {
        match self.slices.delete(name, &DeleteParams::default()).await {
            Ok(_) => {}
            Err(kube::Error::Api(s)) if s.code == 404 => {}
            Err(e) => {
                return Err(DriverError::api(
                    format!("deleting ResourceSlice {name}"),
                    e,
                ));
            }
        }
        self.memo.remove(name);
        self.metrics
            .slice_writes
            .get_or_create(&OpLabel { op: "delete" })
            .inc();
        Ok(())
    }
}

/// Whether any slice lacks an owner (the Node object did not exist when it was made).
fn lacks_owner(slices: &[ResourceSlice]) -> bool {
    slices.iter().any(|s| {
        s.metadata
            .owner_references
            .as_ref()
            .is_none_or(Vec::is_empty)
    })
}

/// The desired slice behind each planned apply (same order, same names).
fn desired_for<'a>(plan: &SyncPlan, desired: &'a [ResourceSlice]) -> Vec<&'a ResourceSlice> {
    plan.apply
        .iter()
        .filter_map(|a| desired.iter().find(|d| d.metadata.name == a.metadata.name))
        .collect()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    #[test]
    fn slices_without_a_node_owner_are_noticed() {
        let mut s = ResourceSlice::default();
        assert!(lacks_owner(std::slice::from_ref(&s)));
        s.metadata.owner_references = Some(vec![OwnerReference {
            api_version: "v1".into(),
            kind: "Node".into(),
            name: "n1".into(),
            uid: "u".into(),
            ..OwnerReference::default()
        }]);
        assert!(!lacks_owner(std::slice::from_ref(&s)));
        assert!(!lacks_owner(&[]));
    }
}
