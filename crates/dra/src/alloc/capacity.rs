//! Consumable device capacity as the stock allocator counts it (`DRAConsumableCapacity`,
//! beta and on from 1.36; `k8s.io/dynamic-resource-allocation` v0.37.2,
//! `structured/internal/incubating/consumable_capacity.go`): what one request takes of a
//! device's capacities, and whether that still fits.
//!
//! - A request's `capacity.requests` may name only capacities the device has; naming
//!   another makes the device unable to serve it.
//! - A capacity the request names is taken at the requested amount, rounded up to the
//!   device's request policy (`validRange` from its `min` in `step`s, or the first of its
//!   `validValues` at or above it); a capacity it does not name is taken at the policy's
//!   `default`, else whole.
//! - The amount must keep the policy (at most `max`, on a step, one of the values) and,
//!   added to what other claims and this claim's earlier requests took, stay within the
//!   capacity's value.
//!
//! A device with `allowMultipleAllocations` is shared this way between requests and
//! claims (dra-driver-cpu's grouped CPU devices: `dra.cpu/cpu` CPUs of one NUMA node); a
//! device without it is taken whole by one request, its capacities checked once.
//! Amounts are kept in milli-units, as the allocator's `FractionalCapacityRange`
//! arithmetic does; whole-unit capacities (CPU counts) round the same either way.

use std::collections::BTreeMap;

use k8s_openapi::api::resource::v1::{CapacityRequestPolicy, DeviceCapacity};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity as ApiQuantity;
use topoalign_kube_types::Quantity;

use crate::DraError;

/// One capacity of a device, in milli-units, with its request policy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Capacity {
    name: String,
    value: i128,
    policy: Option<Policy>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Policy {
    default: Option<i128>,
    range: Option<Range>,
    values: Vec<i128>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Range {
    min: i128,
    max: Option<i128>,
    step: Option<i128>,
}

/// A device's capacities, by name.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Capacities(Vec<Capacity>);

fn milli(q: &ApiQuantity, what: impl Fn() -> String) -> Result<i128, DraError> {
    q.0.parse::<Quantity>()
        .map(|q| q.milli_value())
        .map_err(|e| DraError::BadSlice {
            slice: what(),
            what: e.to_string(),
        })
}

impl Capacities {
    /// A device's capacities as published; `place` names the device in errors.
    pub(crate) fn of(
        capacity: Option<&BTreeMap<String, DeviceCapacity>>,
        place: &str,
    ) -> Result<Capacities, DraError> {
        let mut out = Vec::new();
        for (name, c) in capacity.into_iter().flatten() {
            let at = |f: &str| format!("{place}: capacity {name}{f}");
            let policy = c
                .request_policy
                .as_ref()
                .map(|p: &CapacityRequestPolicy| -> Result<Policy, DraError> {
                    let range = match &p.valid_range {
                        Some(r) => Some(Range {
                            min: milli(&r.min, || at(".requestPolicy.validRange.min"))?,
                            max: (r.max.as_ref())
                                .map(|m| milli(m, || at(".requestPolicy.validRange.max")))
                                .transpose()?,
                            step: (r.step.as_ref())
                                .map(|s| milli(s, || at(".requestPolicy.validRange.step")))
                                .transpose()?
                                .filter(|s| *s > 0),
                        }),
                        None => None,
                    };
                    let mut values = (p.valid_values.iter().flatten())
                        .map(|v| milli(v, || at(".requestPolicy.validValues")))
                        .collect::<Result<Vec<_>, _>>()?;
                    values.sort_unstable();
                    Ok(Policy {
                        default: (p.default.as_ref())
                            .map(|d| milli(d, || at(".requestPolicy.default")))
                            .transpose()?,
                        range,
                        values,
                    })
                })
                .transpose()?;
            out.push(Capacity {
                name: name.clone(),
                value: milli(&c.value, || at(".value"))?,
                policy,
            });
        }
        Ok(Capacities(out))
    }

    /// Number of capacities.
    pub(crate) fn len(&self) -> usize {
        self.0.len()
    }

    /// The place of a capacity by name.
    pub(crate) fn index(&self, name: &str) -> Option<usize> {
        self.0.iter().position(|c| c.name == name)
    }

    /// The capacity's name at `i`.
    pub(crate) fn name(&self, i: usize) -> &str {
        &self.0[i].name
    }

    /// What a request asking `requests` (milli-units by capacity name) takes of each
    /// capacity, in capacity order; `None` when the device cannot serve it at all (a
    /// capacity it lacks, an amount its policy refuses, or more than the capacity holds
    /// when nothing else is using it).
    pub(crate) fn consumption(&self, requests: &BTreeMap<String, i128>) -> Option<Vec<i128>> {
        if requests.keys().any(|n| self.index(n).is_none()) {
            return None;
        }
        let mut out = Vec::with_capacity(self.0.len());
        for c in &self.0 {
            let take = match requests.get(&c.name) {
                Some(asked) => round_up(*asked, c.policy.as_ref()),
                None => (c.policy.as_ref())
                    .and_then(|p| p.default)
                    .unwrap_or(c.value),
            };
            if take < 0 || violates(take, c.policy.as_ref()) || take > c.value {
                return None;
            }
            out.push(take);
        }
        Some(out)
    }

    /// Whether `take` more fits beside `used`, per capacity.
    pub(crate) fn fits(&self, used: &[i128], take: &[i128]) -> bool {
        (self.0.iter().zip(used).zip(take)).all(|((c, u), t)| u + t <= c.value)
    }
}

/// The amount a request for `asked` takes: rounded up to the range's next step from its
/// minimum (at least the minimum), or to the first valid value at or above it.
fn round_up(asked: i128, policy: Option<&Policy>) -> i128 {
    let Some(p) = policy else { return asked };
    if let Some(r) = &p.range {
        if asked < r.min {
            return r.min;
        }
        return match r.step {
            Some(step) => r.min + (asked - r.min + step - 1) / step * step,
            None => asked,
        };
    }
    if !p.values.is_empty() {
        return p
            .values
            .iter()
            .copied()
            .find(|v| asked <= *v)
            .unwrap_or(asked);
    }
    asked
}

/// Whether an amount breaks the policy: above the range's maximum or off its steps, or
/// not one of the valid values. The default is always allowed.
fn violates(take: i128, policy: Option<&Policy>) -> bool {
    let Some(p) = policy else { return false };
    if p.default == Some(take) {
        return false;
    }
    if let Some(r) = &p.range {
        return r.max.is_some_and(|m| take > m) || r.step.is_some_and(|s| (take - r.min) % s != 0);
    }
    !p.values.is_empty() && !p.values.contains(&take)
}

/// A request's `capacity.requests` in milli-units; `what` names the request in errors.
pub(crate) fn requested(
    requests: Option<&BTreeMap<String, ApiQuantity>>,
    what: &str,
) -> Result<BTreeMap<String, i128>, DraError> {
    (requests.into_iter().flatten())
        .map(|(name, q)| {
            let m =
                q.0.parse::<Quantity>()
                    .map_err(|e| DraError::BadClaim(format!("{what}: capacity {name}: {e}")))?;
            Ok((name.clone(), m.milli_value()))
        })
        .collect()
}

/// A milli-unit amount as a quantity string: whole units when it is one (`10`), else
/// milli-units (`1500m`).
pub fn milli_text(m: i128) -> String {
    if m % 1000 == 0 {
        (m / 1000).to_string()
    } else {
        format!("{m}m")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn caps(v: serde_json::Value) -> Capacities {
        let map: BTreeMap<String, DeviceCapacity> = serde_json::from_value(v).unwrap();
        Capacities::of(Some(&map), "dev").unwrap()
    }

    fn ask(pairs: &[(&str, i128)]) -> BTreeMap<String, i128> {
        pairs
            .iter()
            .map(|(n, v)| (n.to_string(), v * 1000))
            .collect()
    }

    #[test]
    fn a_request_takes_what_it_names_and_the_rest_whole() {
        let c = caps(json!({"dra.cpu/cpu": {"value": "64"}}));
        assert_eq!(
            c.consumption(&ask(&[("dra.cpu/cpu", 10)])),
            Some(vec![10_000])
        );
        assert_eq!(c.consumption(&ask(&[])), Some(vec![64_000]), "whole");
        assert_eq!(
            c.consumption(&ask(&[("dra.cpu/cpu", 65)])),
            None,
            "too much"
        );
        assert_eq!(
            c.consumption(&ask(&[("memory", 1)])),
            None,
            "a capacity it lacks"
        );
        assert!(c.fits(&[54_000], &[10_000]));
        assert!(!c.fits(&[54_001], &[10_000]));
        let none = Capacities::default();
        assert_eq!(none.consumption(&ask(&[])), Some(vec![]));
        assert_eq!(none.consumption(&ask(&[("dra.cpu/cpu", 1)])), None);
    }

    #[test]
    fn policies_round_up_and_refuse() {
        let c = caps(json!({"bw": {"value": "100", "requestPolicy": {
            "default": "5", "validRange": {"min": "10", "max": "50", "step": "10"}}}}));
        assert_eq!(
            c.consumption(&ask(&[("bw", 1)])),
            Some(vec![10_000]),
            "to min"
        );
        assert_eq!(
            c.consumption(&ask(&[("bw", 21)])),
            Some(vec![30_000]),
            "to a step"
        );
        assert_eq!(c.consumption(&ask(&[("bw", 51)])), None, "past max");
        assert_eq!(c.consumption(&ask(&[])), Some(vec![5_000]), "the default");
        let v =
            caps(json!({"m": {"value": "8", "requestPolicy": {"validValues": ["4", "2", "8"]}}}));
        assert_eq!(v.consumption(&ask(&[("m", 3)])), Some(vec![4_000]));
        assert_eq!(v.consumption(&ask(&[("m", 9)])), None);
    }

    #[test]
    fn bad_quantities_name_the_place() {
        let map: BTreeMap<String, DeviceCapacity> =
            serde_json::from_value(json!({"dra.cpu/cpu": {"value": "lots"}})).unwrap();
        let e = Capacities::of(Some(&map), "slice s, device d").unwrap_err();
        assert!(
            e.to_string()
                .contains("slice s, device d: capacity dra.cpu/cpu.value"),
            "{e}"
        );
        assert_eq!(milli_text(10_000), "10");
        assert_eq!(milli_text(1_500), "1500m");
    }
}
