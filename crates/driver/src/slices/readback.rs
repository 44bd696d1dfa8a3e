//! Whether pair devices are safe to publish: the API server must keep the counters.
//!
//! Pair devices exclude each other and the plain GPUs and NICs only through
//! `sharedCounters` (on the counter slices) and `consumesCounters` (on each device). With
//! the `DRAPartitionableDevices` feature gate off (alpha and off in Kubernetes 1.33–1.35,
//! on by default from 1.36, and it can be turned either way) the API server drops both
//! fields on write without an error, and the scheduler could give one GPU to a claim for
//! a plain GPU and to a claim for a pair. The publisher therefore reads its slices back
//! as the API server stored them; pure decisions on what it read live here.
//!
//! The server's version is only a hint (logged): the gate can be on in 1.34/1.35 or off
//! in 1.36+, so the readback decides.

use std::collections::BTreeMap;
use std::fmt;

use k8s_openapi::api::resource::v1::ResourceSlice;
use k8s_openapi::apimachinery::pkg::version::Info;

/// The first Kubernetes minor version (1.x) with `DRAPartitionableDevices` on by default.
pub(crate) const FIRST_PARTITIONABLE_BY_DEFAULT: (u32, u32) = (1, 36);

/// What the publisher puts in the pool.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PairMode {
    /// Pair devices beside plain GPUs and NICs (the counters survive).
    Pairs,
    /// Plain GPUs and NICs only (the counters were dropped, or not yet seen to survive).
    PlainOnly,
}

impl PairMode {
    /// The mode's name in `/readyz` and the logs.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            PairMode::Pairs => "pairs",
            PairMode::PlainOnly => "plain-only",
        }
    }

    /// Whether pair devices are published in this mode.
    pub(crate) fn pairs(self) -> bool {
        self == PairMode::Pairs
    }
}

impl fmt::Display for PairMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The warning logged (once per switch) when the publisher falls back to plain devices.
pub(crate) const DROPPED_WARNING: &str = "ResourceSlice counters were dropped by the API server \
     (DRAPartitionableDevices off?): publishing plain GPU and NIC devices only; pair devices \
     need Kubernetes >= 1.36 or the gate on kube-apiserver and kube-scheduler";

/// Counters the API server did not keep: slices whose `sharedCounters` (or some of their
/// counter sets) are gone, devices whose `consumesCounters` are.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Loss {
    /// Slices that lost counter sets.
    pub slices: Vec<String>,
    /// Devices that lost their counter consumption.
    pub devices: Vec<String>,
}

impl Loss {
    /// Whether nothing was lost.
    pub(crate) fn is_empty(&self) -> bool {
        self.slices.is_empty() && self.devices.is_empty()
    }
}

impl fmt::Display for Loss {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut parts = Vec::new();
        if let Some(first) = self.slices.first() {
            parts.push(format!(
                "{} slice(s) lost sharedCounters (first {first})",
                self.slices.len()
            ));
        }
        if let Some(first) = self.devices.first() {
            parts.push(format!(
                "{} device(s) lost consumesCounters (first {first})",
                self.devices.len()
            ));
        }
        if parts.is_empty() {
            f.write_str("no counters lost")
        } else {
            f.write_str(&parts.join(", "))
        }
    }
}

/// The counter set names a slice publishes.
fn set_names(s: &ResourceSlice) -> Vec<&str> {
    s.spec
        .shared_counters
        .iter()
        .flatten()
        .map(|c| c.name.as_str())
        .collect()
}

/// Whether `desired` publishes counters (counter sets, or devices consuming them).
pub(crate) fn has_counters(desired: &ResourceSlice) -> bool {
    !set_names(desired).is_empty()
        || desired
            .spec
            .devices
            .iter()
            .flatten()
            .any(|d| d.consumes_counters.as_ref().is_some_and(|c| !c.is_empty()))
}

/// What of `desired`'s counters the `stored` copy lacks: every counter set by name, and
/// for every device that consumes counters, a consumption of each counter set it names
/// (values are not compared: the server may rewrite quantities).
pub(crate) fn slice_loss(desired: &ResourceSlice, stored: &ResourceSlice) -> Loss {
    let name = desired.metadata.name.clone().unwrap_or_default();
    let mut loss = Loss::default();
    let kept = set_names(stored);
    if set_names(desired).iter().any(|n| !kept.contains(n)) {
        loss.slices.push(name);
    }
    let stored_devices: BTreeMap<&str, _> = stored
        .spec
        .devices
        .iter()
        .flatten()
        .map(|d| (d.name.as_str(), d))
        .collect();
    for d in desired.spec.devices.iter().flatten() {
        let want: Vec<&str> = d
            .consumes_counters
            .iter()
            .flatten()
            .map(|c| c.counter_set.as_str())
            .collect();
        if want.is_empty() {
            continue;
        }
        let have: Vec<&str> = stored_devices
            .get(d.name.as_str())
            .and_then(|s| s.consumes_counters.as_ref())
            .into_iter()
            .flatten()
            .map(|c| c.counter_set.as_str())
            .collect();
        if want.iter().any(|w| !have.contains(w)) {
            loss.devices.push(d.name.clone());
        }
    }
    loss
}

/// What of the desired pool's counters the stored slices (by name) lack. A desired slice
/// with no stored copy is not evidence either way and is skipped.
pub(crate) fn pool_loss<'a>(
    desired: impl IntoIterator<Item = &'a ResourceSlice>,
    stored: &BTreeMap<String, ResourceSlice>,
) -> Loss {
    let mut loss = Loss::default();
    for d in desired {
        let Some(s) = d.metadata.name.as_ref().and_then(|n| stored.get(n)) else {
            continue;
        };
        let l = slice_loss(d, s);
        loss.slices.extend(l.slices);
        loss.devices.extend(l.devices);
    }
    loss
}

/// The mode after a round's readback (`loss`: what the stored slices lack), or `None` to
/// keep it. Pairs with any counter lost fall back to plain devices; plain devices go back
/// to pairs only when every counter survived, there were counters to see (`counted`)
/// and the round may switch back (`may_upgrade`: at most once per publish, so
/// contradictory readbacks cannot loop).
pub(crate) fn next_mode(
    mode: PairMode,
    loss: &Loss,
    counted: bool,
    may_upgrade: bool,
) -> Option<PairMode> {
    match mode {
        PairMode::Pairs if !loss.is_empty() => Some(PairMode::PlainOnly),
        PairMode::PlainOnly if loss.is_empty() && counted && may_upgrade => Some(PairMode::Pairs),
        _ => None,
    }
}

/// `(major, minor)` of the API server's version (`minor` may carry a suffix, as in
/// `"35+"`; `gitVersion` `v1.35.2-eks…` is the fallback).
pub(crate) fn version(info: &Info) -> Option<(u32, u32)> {
    let num = |s: &str| -> Option<u32> {
        let digits: String = s.chars().take_while(char::is_ascii_digit).collect();
        digits.parse().ok()
    };
    if let (Some(major), Some(minor)) = (num(&info.major), num(&info.minor)) {
        return Some((major, minor));
    }
    let v = info.git_version.trim_start_matches('v');
    let mut parts = v.splitn(3, '.');
    Some((num(parts.next()?)?, num(parts.next()?)?))
}

/// Whether a server of `version` has `DRAPartitionableDevices` on by default.
pub(crate) fn partitionable_by_default(version: (u32, u32)) -> bool {
    version >= FIRST_PARTITIONABLE_BY_DEFAULT
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;
    use topoalign_dra::publish::PublishOptions;

    fn pool(pairs: bool) -> Vec<ResourceSlice> {
        let topo = topoalign_profiles::get("dgx-h100").unwrap();
        let opts = PublishOptions {
            pair_devices: pairs,
            ..PublishOptions::default()
        };
        topoalign_dra::publish::resource_slices(&topo, "n1", &opts).unwrap()
    }

    /// What an API server with the gate off stores: the same slices without counters.
    fn dropped(slices: &[ResourceSlice]) -> Vec<ResourceSlice> {
        slices
            .iter()
            .cloned()
            .map(|mut s| {
                s.spec.shared_counters = None;
                for d in s.spec.devices.iter_mut().flatten() {
                    d.consumes_counters = None;
                }
                s
            })
            .collect()
    }

    fn by_name(slices: Vec<ResourceSlice>) -> BTreeMap<String, ResourceSlice> {
        slices
            .into_iter()
            .map(|s| (s.metadata.name.clone().unwrap(), s))
            .collect()
    }

    #[test]
    fn counters_that_survive_are_no_loss() {
        let desired = pool(true);
        let loss = pool_loss(&desired, &by_name(desired.clone()));
        assert!(loss.is_empty(), "{loss}");
        assert!(desired.iter().any(has_counters));
    }

    #[test]
    fn dropped_counters_are_found_on_slices_and_devices() {
        let desired = pool(true);
        let loss = pool_loss(&desired, &by_name(dropped(&desired)));
        let devices: usize = desired
            .iter()
            .map(|s| s.spec.devices.as_ref().map_or(0, Vec::len))
            .sum();
        assert_eq!(loss.slices, vec!["n1-topoalign-dev-counters-0".to_string()]);
        assert_eq!(
            loss.devices.len(),
            devices,
            "every device consumes counters"
        );
        assert!(loss.devices.iter().any(|d| d.starts_with("pair-")));
        let text = loss.to_string();
        assert!(
            text.contains("1 slice(s) lost sharedCounters (first n1-topoalign-dev-counters-0)")
                && text.contains(&format!("{devices} device(s) lost consumesCounters")),
            "{text}"
        );
    }

    #[test]
    fn one_pair_device_without_its_counters_is_a_loss() {
        let desired = pool(true);
        let mut stored = desired.clone();
        let dev = stored
            .iter_mut()
            .flat_map(|s| s.spec.devices.iter_mut().flatten())
            .find(|d| d.name.starts_with("pair-"))
            .unwrap();
        // One of its two counter sets gone is a loss too.
        dev.consumes_counters.as_mut().unwrap().pop();
        let name = dev.name.clone();
        let loss = pool_loss(&desired, &by_name(stored));
        assert_eq!(loss.devices, vec![name]);
        assert!(loss.slices.is_empty());
    }

    #[test]
    fn a_counter_set_missing_from_the_stored_slice_is_a_loss() {
        let desired = pool(false);
        let mut stored = desired.clone();
        let counters = stored
            .iter_mut()
            .find(|s| s.spec.shared_counters.is_some())
            .unwrap();
        counters.spec.shared_counters.as_mut().unwrap().pop();
        let loss = pool_loss(&desired, &by_name(stored));
        assert_eq!(loss.slices.len(), 1);
        // Slices not stored at all are not evidence.
        assert!(pool_loss(&desired, &BTreeMap::new()).is_empty());
    }

    #[test]
    fn the_mode_falls_back_on_any_loss_and_returns_only_on_full_survival() {
        let desired = pool(true);
        let kept = pool_loss(&desired, &by_name(desired.clone()));
        let lost = pool_loss(&desired, &by_name(dropped(&desired)));
        use PairMode::{Pairs, PlainOnly};
        assert_eq!(next_mode(Pairs, &lost, true, true), Some(PlainOnly));
        assert_eq!(next_mode(Pairs, &lost, true, false), Some(PlainOnly));
        assert_eq!(next_mode(Pairs, &kept, true, true), None);
        // The gate turned on: the counters survive the probe, pairs come back.
        assert_eq!(next_mode(PlainOnly, &kept, true, true), Some(Pairs));
        // Still dropped, no counters to judge by, or the one switch back already spent.
        assert_eq!(next_mode(PlainOnly, &lost, true, true), None);
        assert_eq!(next_mode(PlainOnly, &kept, false, true), None);
        assert_eq!(next_mode(PlainOnly, &kept, true, false), None);
        // A plain-only pool read back intact is evidence enough (its plain devices
        // consume the counters too).
        let plain = pool(false);
        let plain_kept = pool_loss(&plain, &by_name(plain.clone()));
        assert!(plain.iter().any(has_counters));
        assert_eq!(next_mode(PlainOnly, &plain_kept, true, true), Some(Pairs));
        let plain_lost = pool_loss(&plain, &by_name(dropped(&plain)));
        let inv = topoalign_dra::publish::Inventory::from_topology(
            &topoalign_profiles::get("dgx-h100").unwrap(),
        );
        assert_eq!(plain_lost.devices.len(), inv.gpus.len() + inv.nics.len());
        assert!(plain_lost.devices.iter().all(|d| !d.starts_with("pair-")));
    }

    #[test]
    fn versions_are_read_with_suffixes_and_compared_with_1_36() {
        let info = |major: &str, minor: &str, git: &str| Info {
            major: major.into(),
            minor: minor.into(),
            git_version: git.into(),
            ..Info::default()
        };
        assert_eq!(version(&info("1", "35+", "")), Some((1, 35)));
        assert_eq!(version(&info("", "", "v1.34.3-eks-1")), Some((1, 34)));
        assert_eq!(version(&info("1", "37", "v1.37.2")), Some((1, 37)));
        assert_eq!(version(&info("", "", "")), None);
        assert!(!partitionable_by_default((1, 35)));
        assert!(partitionable_by_default((1, 36)));
        assert!(partitionable_by_default((2, 0)));
    }
}
