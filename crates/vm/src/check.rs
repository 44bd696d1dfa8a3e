//! What libvirt and QEMU refuse (or, worse, accept and then lose devices over), checked on
//! a whole domain: unique controller indexes plugged into lower ones, expander `busNr`
//! in 1–254 with non-overlapping ranges that hold the buses below them and sit above
//! pcie.0's hierarchy, chassis/port in 0–255 and unique chassis, `<node>` naming a
//! guest cell, device addresses naming an existing controller and never an expander
//! directly.

use std::collections::{BTreeMap, BTreeSet};

use crate::domain::Domain;
use crate::error::VmError;
use crate::layout::{pcie0_floor, root_of};

/// Checks a domain's PCI layout.
pub(crate) fn check(domain: &Domain) -> Result<(), VmError> {
    let mut seen = BTreeSet::new();
    for c in &domain.controllers {
        if !seen.insert(c.index) {
            return Err(VmError::PortNumber {
                element: c.path.clone(),
                attribute: "index",
                value: c.index,
                detail: "is used by another PCI controller".into(),
            });
        }
    }
    for c in &domain.controllers {
        if let Some(a) = c.address {
            let parent = u32::from(a.bus);
            if parent != 0 && domain.controller(parent).is_none() {
                return Err(VmError::Dangling {
                    element: c.path.clone(),
                    detail: format!(
                        "its address bus=0x{:02x} names no PCI controller index",
                        a.bus
                    ),
                });
            }
            if parent >= c.index && c.index != 0 {
                return Err(VmError::PortNumber {
                    element: c.path.clone(),
                    attribute: "index",
                    value: c.index,
                    detail: format!(
                        "must be above the index of the controller it plugs into ({parent})"
                    ),
                });
            }
        }
        if c.has_chassis() && c.model != "pci-bridge" {
            for (attr, v) in [("chassis", c.chassis), ("port", c.port)] {
                if let Some(v) = v
                    && v > 255
                {
                    return Err(VmError::PortNumber {
                        element: c.path.clone(),
                        attribute: attr,
                        value: v,
                        detail: "is out of range: libvirt accepts 0–255".into(),
                    });
                }
            }
        }
    }
    let mut chassis: BTreeMap<u32, &str> = BTreeMap::new();
    for c in domain
        .controllers
        .iter()
        .filter(|c| c.has_chassis() && c.model != "pci-bridge")
    {
        let ch = c.chassis.unwrap_or(c.index);
        if let Some(other) = chassis.insert(ch, &c.path) {
            return Err(VmError::PortNumber {
                element: c.path.clone(),
                attribute: "chassis",
                value: ch,
                detail: format!(
                    "is also the chassis of {other}: QEMU refuses two slots with one chassis number"
                ),
            });
        }
    }
    check_expanders(domain)?;
    for p in &domain.passthrough {
        if let Some(a) = p.guest_address {
            check_device_bus(domain, &p.path, a.bus)?;
        }
    }
    Ok(())
}

fn check_device_bus(domain: &Domain, path: &str, bus: u8) -> Result<(), VmError> {
    if bus == 0 {
        return Ok(());
    }
    match domain.controller(u32::from(bus)) {
        None => Err(VmError::Dangling {
            element: path.to_string(),
            detail: format!("its address bus=0x{bus:02x} names no PCI controller index"),
        }),
        Some(c) if c.is_expander() => Err(VmError::Dangling {
            element: path.to_string(),
            detail: format!(
                "sits directly on {} (model {}): an endpoint needs a pcie-root-port below the expander",
                c.path, c.model
            ),
        }),
        Some(_) => Ok(()),
    }
}

fn check_expanders(domain: &Domain) -> Result<(), VmError> {
    let mut exps: Vec<(u32, &crate::domain::Controller)> = Vec::new();
    for c in domain.controllers.iter().filter(|c| c.is_expander()) {
        let Some(b) = c.bus_nr else {
            continue; // libvirt picks one itself
        };
        if !(1..=254).contains(&b) {
            return Err(VmError::BusRange {
                element: c.path.clone(),
                bus_nr: b,
                last: b,
                detail: "is outside 1–254".into(),
            });
        }
        if let Some(n) = c.node
            && !domain.cells.iter().any(|cell| cell.id == n)
        {
            return Err(VmError::Dangling {
                element: c.path.clone(),
                detail: if domain.has_numa {
                    format!("<node>{n}</node> names no guest cell in /domain/cpu/numa")
                } else {
                    format!("<node>{n}</node> needs /domain/cpu/numa, which is missing")
                },
            });
        }
        exps.push((b, c));
    }
    exps.sort_by_key(|(b, _)| *b);
    let (floor, why) = pcie0_floor(domain, &BTreeSet::new());
    for (k, (b, c)) in exps.iter().enumerate() {
        let last = exps.get(k + 1).map_or(255, |(next, _)| next - 1);
        if k + 1 < exps.len() && exps[k + 1].0 == *b {
            return Err(VmError::BusRange {
                element: c.path.clone(),
                bus_nr: *b,
                last: *b,
                detail: format!("is also the busNr of {}", exps[k + 1].1.path),
            });
        }
        let below = domain
            .controllers
            .iter()
            .filter(|o| {
                o.index != c.index && o.makes_bus() && root_of(domain, o.index) == Some(c.index)
            })
            .count() as u32;
        if b + below > last {
            let next = exps
                .get(k + 1)
                .map_or("bus 255".to_string(), |(_, n)| n.path.clone());
            return Err(VmError::BusRange {
                element: c.path.clone(),
                bus_nr: *b,
                last: b + below,
                detail: format!(
                    "overlaps {next}: its {below} bridge(s) need buses up to {} but the range ends at {last}",
                    b + below
                ),
            });
        }
        if k == 0 && *b <= floor {
            return Err(VmError::BusRange {
                element: c.path.clone(),
                bus_nr: *b,
                last,
                detail: format!(
                    "overlaps pcie.0's hierarchy, which may use buses up to {floor} ({why})"
                ),
            });
        }
    }
    Ok(())
}
