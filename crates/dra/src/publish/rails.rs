//! Rails on the DRA side: publishing each NIC's rail ([`attr::RAIL`]) and pinning a
//! claim to a set of rails, so that every pod of a multi-node job uses the same rails.
//!
//! Which NIC is on which rail is not decided here: the node's rail source (an operator
//! map or a stated rule, read and checked by the `topoalign-gang` crate) says, and
//! [`Inventory::set_rails`] only records the answer. Without a rail source nothing is
//! set and the slices are byte for byte what they were.

use std::collections::BTreeSet;

use k8s_openapi::api::resource::v1::{
    CELDeviceSelector, DeviceConstraint, DeviceRequest, DeviceSelector, ResourceClaimSpec,
};
use topoalign_topology::Bdf;

use crate::publish::classes::{CLASS_NIC, CLASS_PAIR};
use crate::{DraError, attr, publish::Inventory};

impl Inventory {
    /// Records each physical NIC's rail: `rail_of` gets the PF's PCI address and answers
    /// its rail, or `None` for a NIC on no rail (a storage or management NIC). The rail
    /// is then published on the NIC device and on every pair that uses the NIC.
    pub fn set_rails(&mut self, rail_of: impl Fn(Bdf) -> Option<u32>) {
        for nic in &mut self.nics {
            nic.rail = rail_of(nic.bdf);
        }
    }
}

/// The CEL selector "the device's rail is one of `rails`":
/// `"rail" in device.attributes["topoalign.dev"] && (… == 0 || … == 1)`. The `in` test
/// comes first so that a device without a rail is refused instead of failing the
/// expression (a CEL runtime error fails the whole allocation).
pub(crate) fn rail_selector(rails: &BTreeSet<u32>) -> String {
    let value = attr::cel(attr::RAIL);
    let alternatives: Vec<String> = rails.iter().map(|r| format!("{value} == {r}")).collect();
    format!(
        "\"{}\" in device.attributes[\"{}\"] && ({})",
        attr::RAIL,
        crate::DRIVER_NAME,
        alternatives.join(" || ")
    )
}

/// Pins a claim built by [`crate::claim::claim_spec`] to `rails`: every request (and
/// `firstAvailable` alternative) for pair or NIC devices gets `rail_selector`. With
/// `distinct`, the pair requests also get a `distinctAttribute` on the rail, so that
/// every pair of the pod is on a different rail: with as many rails as pairs, every pod
/// then uses exactly the rails of the set.
pub fn pin_rails(
    claim: &mut ResourceClaimSpec,
    rails: &BTreeSet<u32>,
    distinct: bool,
) -> Result<(), DraError> {
    if rails.is_empty() {
        return Err(DraError::BadClaim(
            "an empty rail set admits no device".into(),
        ));
    }
    let selector = rail_selector(rails);
    let with_rail = |sel: &mut Option<Vec<DeviceSelector>>| {
        sel.get_or_insert_with(Vec::new).push(DeviceSelector {
            cel: Some(CELDeviceSelector {
                expression: selector.clone(),
            }),
        });
    };
    let Some(devices) = claim.devices.as_mut() else {
        return Err(DraError::BadClaim(
            "the claim has no device requests".into(),
        ));
    };
    let mut pair_requests = Vec::new();
    for r in devices.requests.iter_mut().flatten() {
        if let Some(e) = r.exactly.as_mut()
            && (e.device_class_name == CLASS_PAIR || e.device_class_name == CLASS_NIC)
        {
            with_rail(&mut e.selectors);
            if e.device_class_name == CLASS_PAIR {
                pair_requests.push(r.name.clone());
            }
        }
        for s in r.first_available.iter_mut().flatten() {
            if s.device_class_name == CLASS_PAIR || s.device_class_name == CLASS_NIC {
                with_rail(&mut s.selectors);
            }
        }
    }
    if distinct {
        if pair_requests.is_empty() {
            return Err(DraError::BadClaim(
                "one pair per rail needs a claim of pair devices".into(),
            ));
        }
        devices
            .constraints
            .get_or_insert_with(Vec::new)
            .push(DeviceConstraint {
                distinct_attribute: Some(attr::qualified(attr::RAIL)),
                requests: Some(pair_requests),
                match_attribute: None,
            });
    }
    Ok(())
}

/// Pins a claim of N pairs to N rails without `distinctAttribute`, for API servers that
/// drop it (Kubernetes 1.34–1.35 with `DRAConsumableCapacity` off): the claim's one
/// `pairs` request of `count: N` (the [`crate::claim::ClaimShape::Pairs`] shape with one NIC
/// per GPU) becomes one request per rail, `rail-<r>` with `count: 1`, each keeping the
/// request's selectors and adding "the device is on rail r". Every pair is then on its
/// own rail, so every pair has its own physical NIC and the `distinctAttribute`
/// constraints on the request are dropped as redundant. Requests are in rail order;
/// each takes its rail's best pair first, as the single request did.
pub fn pin_rails_per_rail(
    claim: &mut ResourceClaimSpec,
    rails: &BTreeSet<u32>,
) -> Result<(), DraError> {
    let Some(devices) = claim.devices.as_mut() else {
        return Err(DraError::BadClaim(
            "the claim has no device requests".into(),
        ));
    };
    let requests = devices.requests.take().unwrap_or_default();
    let [request] = requests.as_slice() else {
        return Err(DraError::BadClaim(format!(
            "one request per rail is written from a claim with one pair request; this one has {}",
            requests.len()
        )));
    };
    let Some(exact) = request
        .exactly
        .as_ref()
        .filter(|e| e.device_class_name == CLASS_PAIR)
    else {
        return Err(DraError::BadClaim(format!(
            "request {:?} is not a request for {CLASS_PAIR} devices",
            request.name
        )));
    };
    let count = exact.count.unwrap_or(1);
    if usize::try_from(count).ok() != Some(rails.len()) {
        return Err(DraError::BadClaim(format!(
            "{count} pairs on {} rails: one request per rail needs exactly one pair per rail",
            rails.len()
        )));
    }
    let name = request.name.clone();
    devices.requests = Some(
        rails
            .iter()
            .map(|r| {
                let mut e = exact.clone();
                e.count = Some(1);
                e.selectors
                    .get_or_insert_with(Vec::new)
                    .push(DeviceSelector {
                        cel: Some(CELDeviceSelector {
                            expression: rail_selector(&BTreeSet::from([*r])),
                        }),
                    });
                DeviceRequest {
                    name: format!("rail-{r}"),
                    exactly: Some(e),
                    first_available: None,
                }
            })
            .collect(),
    );
    if let Some(cons) = devices.constraints.as_mut() {
        cons.retain(|c| {
            c.distinct_attribute.is_none()
                || !c.requests.as_ref().is_none_or(|rs| rs.contains(&name))
        });
        if cons.is_empty() {
            devices.constraints = None;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::alloc::Selector;
    use crate::claim::{ClaimSpec, claim_spec};
    use k8s_openapi::api::resource::v1::{Device, DeviceAttribute};

    fn device(rail: Option<i64>) -> Device {
        let mut attrs = std::collections::BTreeMap::new();
        if let Some(r) = rail {
            attrs.insert(
                "rail".to_string(),
                DeviceAttribute {
                    int: Some(r),
                    ..Default::default()
                },
            );
        }
        Device {
            name: "p".into(),
            attributes: Some(attrs),
            ..Default::default()
        }
    }

    #[test]
    fn the_selector_admits_only_the_set_and_never_errors() {
        let sel = rail_selector(&BTreeSet::from([1, 3]));
        let parsed = Selector::parse(&sel).unwrap();
        let m = |r| parsed.matches(crate::DRIVER_NAME, &device(r));
        assert_eq!(m(Some(1)), Ok(true));
        assert_eq!(m(Some(3)), Ok(true));
        assert_eq!(m(Some(2)), Ok(false));
        assert_eq!(m(None), Ok(false), "no rail: refused, not an error");
    }

    #[test]
    fn pins_pair_requests_and_adds_one_distinct_constraint() {
        let mut c = claim_spec(&ClaimSpec::pairs(4)).unwrap();
        pin_rails(&mut c, &BTreeSet::from([0, 1, 2, 3]), true).unwrap();
        let d = c.devices.unwrap();
        let r = &d.requests.unwrap()[0];
        let sels = r.exactly.as_ref().unwrap().selectors.as_ref().unwrap();
        assert_eq!(sels.len(), 1);
        let cons = d.constraints.unwrap();
        assert_eq!(cons.len(), 1);
        assert_eq!(
            cons[0].distinct_attribute.as_deref(),
            Some("topoalign.dev/rail")
        );
        assert_eq!(cons[0].requests, Some(vec!["pairs".to_string()]));
        let mut c = claim_spec(&ClaimSpec::pairs(1)).unwrap();
        assert!(pin_rails(&mut c, &BTreeSet::new(), false).is_err());
    }

    /// Rails 0..7 on dgx-h100's NICs in PCI address order (each NIC its own rail).
    fn railed_node() -> (
        crate::publish::Inventory,
        crate::alloc::NodeDevices,
        Vec<k8s_openapi::api::resource::v1::DeviceClass>,
    ) {
        let topo = topoalign_profiles::get("dgx-h100").unwrap();
        let mut inv =
            crate::publish::Inventory::new(&topo, &crate::publish::PublishOptions::default());
        let mut bdfs: Vec<Bdf> = inv.nics.iter().map(|n| n.bdf).collect();
        bdfs.sort();
        inv.set_rails(|b| {
            bdfs.iter()
                .position(|x| *x == b)
                .and_then(|i| u32::try_from(i).ok())
        });
        let slices = crate::publish::slices_for(&inv, "n1", 1).unwrap();
        let devices = crate::alloc::NodeDevices::gather(&slices, "n1").unwrap();
        (inv, devices, crate::publish::device_classes())
    }

    /// The rails of the pairs first fit gives `claim`.
    fn rails_of(
        (inv, node, classes): &(
            crate::publish::Inventory,
            crate::alloc::NodeDevices,
            Vec<k8s_openapi::api::resource::v1::DeviceClass>,
        ),
        claim: &ResourceClaimSpec,
    ) -> Option<BTreeSet<u32>> {
        let out = crate::alloc::first_fit(claim, classes, node, 1_000_000).unwrap();
        let rails = out
            .allocation?
            .iter()
            .map(|a| match inv.device(&a.device) {
                Some(crate::DeviceRef::Pair { nic, .. }) => nic.rail.unwrap(),
                other => panic!("{} is not a pair: {other:?}", a.device),
            })
            .collect();
        Some(rails)
    }

    #[test]
    fn one_request_per_rail_allocates_what_the_distinct_form_does() {
        let node = railed_node();
        for set in [
            BTreeSet::from([4, 5, 6, 7]),
            BTreeSet::from([0, 2]),
            BTreeSet::from([3]),
        ] {
            let spec = ClaimSpec {
                max_rank: Some(1),
                distinct_nics: true,
                ..ClaimSpec::pairs(u32::try_from(set.len()).unwrap())
            };
            let mut distinct = claim_spec(&spec).unwrap();
            pin_rails(&mut distinct, &set, true).unwrap();
            let mut per_rail = claim_spec(&spec).unwrap();
            pin_rails_per_rail(&mut per_rail, &set).unwrap();
            let d = per_rail.devices.as_ref().unwrap();
            assert!(
                d.constraints.is_none(),
                "no distinctAttribute left: {:?}",
                d.constraints
            );
            let names: Vec<_> = d
                .requests
                .iter()
                .flatten()
                .map(|r| r.name.clone())
                .collect();
            let want: Vec<_> = set.iter().map(|r| format!("rail-{r}")).collect();
            assert_eq!(names, want);
            assert_eq!(rails_of(&node, &per_rail), Some(set.clone()));
            assert_eq!(rails_of(&node, &distinct), Some(set.clone()));
        }
    }

    #[test]
    fn one_request_per_rail_refuses_other_shapes() {
        let mut c = claim_spec(&ClaimSpec::pairs(4)).unwrap();
        let e = pin_rails_per_rail(&mut c, &BTreeSet::from([0, 1])).unwrap_err();
        assert!(e.to_string().contains("4 pairs on 2 rails"), "{e}");
        let mut c = claim_spec(&ClaimSpec {
            nics_per_gpu: 2,
            ..ClaimSpec::pairs(2)
        })
        .unwrap();
        let e = pin_rails_per_rail(&mut c, &BTreeSet::from([0, 1])).unwrap_err();
        assert!(e.to_string().contains("one pair request"), "{e}");
    }
}
