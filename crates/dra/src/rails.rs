//! Rails on the DRA side: publishing each NIC's rail ([`attr::RAIL`]) and pinning a
//! claim to a set of rails, so that every pod of a multi-node job uses the same rails.
//!
//! Which NIC is on which rail is not decided here: the node's rail source (an operator
//! map or a stated rule, read and checked by the `topoalign-gang` crate) says, and
//! [`Inventory::set_rails`] only records the answer. Without a rail source nothing is
//! set and the slices are byte for byte what they were.

use std::collections::BTreeSet;

use k8s_openapi::api::resource::v1::{
    CELDeviceSelector, DeviceConstraint, DeviceSelector, ResourceClaimSpec,
};
use topoalign_topology::Bdf;

use crate::classes::{CLASS_NIC, CLASS_PAIR};
use crate::{DraError, Inventory, attr};

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

/// Pins a claim built by [`crate::claim_spec`] to `rails`: every request (and
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cel::Selector;
    use crate::{ClaimSpec, claim_spec};
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
}
