//! The guest PCIe layout: per guest cell that holds devices one `pcie-expander-bus`
//! (pxb-pcie, `<node>` = the cell) on pcie.0; below it one `pcie-root-port` per device, or
//! with switch mirroring one root port → `pcie-switch-upstream-port` → one
//! `pcie-switch-downstream-port` per device for devices that share a host switch.
//!
//! Bus numbers: each expander's range starts at its `busNr` and ends below the next
//! expander's; ranges are handed out counting down from 254 (below any expander the
//! domain already has), each exactly as large as the buses below it need (the expander's
//! own bus, one per root port, for a switch one for the upstream port's link and one per
//! downstream port), and all must stay above the buses pcie.0's own hierarchy may take.

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;
use topoalign_topology::Bdf;

use crate::domain::{Domain, PciAddress};
use crate::error::VmError;

/// The highest bus number handed out (KubeVirt counts down from here too).
pub(crate) const TOP_BUS: u32 = 254;
/// Slots on one PCI bus.
pub(crate) const SLOTS: usize = 32;
/// First pcie.0 slot used for expanders (slot 0 is the host bridge, 1 is kept for VGA).
const FIRST_ROOT_SLOT: u8 = 2;
/// Last pcie.0 slot usable (0x1f holds the q35 LPC/SATA/SMBus functions).
const LAST_ROOT_SLOT: u8 = 0x1e;

/// A controller the rewrite adds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NewController {
    /// `index`.
    pub index: u32,
    /// libvirt model.
    pub model: &'static str,
    /// QEMU device model (`<model name>`).
    pub model_name: &'static str,
    /// `<target busNr>` (expanders).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bus_nr: Option<u32>,
    /// `<target><node>` (expanders).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub node: Option<u32>,
    /// `<target chassis>` (ports).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub chassis: Option<u32>,
    /// `<target port>` (ports).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub port: Option<u32>,
    /// Where it plugs in.
    pub address: PciAddress,
    /// A comment written before it.
    #[serde(skip)]
    pub comment: Option<String>,
}

/// One device's new place.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Placed {
    /// Index into [`Domain::passthrough`].
    pub passthrough: usize,
    /// Guest cell.
    pub cell: u32,
    /// Its new guest address.
    pub address: PciAddress,
    /// Controller indexes from the expander down to the port it plugs into.
    pub chain: Vec<u32>,
}

/// One expander's bus range.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Expander {
    /// Guest cell.
    pub cell: u32,
    /// The host bridge it mirrors, when host bridges are mirrored.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub host_bridge: Option<String>,
    /// Controller index.
    pub index: u32,
    /// First bus (`busNr`).
    pub bus_nr: u32,
    /// Last bus of its range.
    pub last_bus: u32,
}

/// The whole new layout.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Layout {
    /// Controllers to add, parents before children.
    pub controllers: Vec<NewController>,
    /// Devices with their new addresses.
    pub placed: Vec<Placed>,
    /// Expanders added.
    pub expanders: Vec<Expander>,
    /// The highest bus pcie.0's hierarchy may use.
    pub floor: u32,
}

/// A device to place: index into [`Domain::passthrough`], its cell, its host address and
/// the host switch it shares with others (only when mirroring).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Assignment {
    /// Index into [`Domain::passthrough`].
    pub passthrough: usize,
    /// Guest cell.
    pub cell: u32,
    /// Host address (orders the devices).
    pub host: Bdf,
    /// Host switch upstream port, when the device should share a guest switch.
    pub switch: Option<Bdf>,
    /// Host bridge, when each host bridge gets its own expander.
    pub host_bridge: Option<String>,
}

/// Bus numbers pcie.0's own hierarchy may use: its bus-making controllers plus one per
/// device libvirt will still place (on q35 each gets a root port), not counting the
/// devices the rewrite moves.
pub(crate) fn pcie0_floor(domain: &Domain, moved: &BTreeSet<usize>) -> (u32, String) {
    let mut under_root = 0u32;
    for c in &domain.controllers {
        if !c.makes_bus() || c.is_expander() {
            continue;
        }
        if root_of(domain, c.index) == Some(0) {
            under_root += 1;
        }
    }
    let moved_paths: BTreeSet<&str> = moved
        .iter()
        .filter_map(|i| domain.passthrough.get(*i).map(|p| p.path.as_str()))
        .collect();
    let pending = domain
        .unaddressed_pci_devices
        .iter()
        .filter(|p| !moved_paths.contains(p.as_str()))
        .count() as u32;
    (
        under_root + pending,
        format!(
            "{under_root} bridge controller(s) on pcie.0 and {pending} device(s) libvirt still has to place"
        ),
    )
}

/// The index of the root (pcie.0, or an expander) a controller hangs under.
pub(crate) fn root_of(domain: &Domain, index: u32) -> Option<u32> {
    let mut cur = index;
    for _ in 0..=domain.controllers.len() {
        let c = domain.controller(cur)?;
        if c.index == 0 || c.is_expander() {
            return Some(c.index);
        }
        cur = u32::from(c.address?.bus);
    }
    None
}

/// Computes the layout for the given assignments.
pub(crate) fn lay_out(domain: &Domain, assignments: &[Assignment]) -> Result<Layout, VmError> {
    if assignments.is_empty() {
        return Ok(Layout::default());
    }
    let moved: BTreeSet<usize> = assignments.iter().map(|a| a.passthrough).collect();
    let (floor, floor_detail) = pcie0_floor(domain, &moved);

    // Units per cell: a lone device, or the devices sharing one host switch.
    // Keyed by (cell, host bridge): one expander per cell, or per host bridge of a cell
    // when host bridges are mirrored.
    let mut cells: BTreeMap<(u32, Option<String>), Vec<Vec<&Assignment>>> = BTreeMap::new();
    let mut sorted: Vec<&Assignment> = assignments.iter().collect();
    sorted.sort_by_key(|a| (a.cell, a.host, a.passthrough));
    for a in sorted {
        let units = cells.entry((a.cell, a.host_bridge.clone())).or_default();
        let joined = a.switch.is_some()
            && units
                .iter_mut()
                .find(|u| u[0].switch == a.switch)
                .map(|u| u.push(a))
                .is_some();
        if !joined {
            units.push(vec![a]);
        }
    }

    let mut next_index = domain
        .controllers
        .iter()
        .map(|c| c.index)
        .max()
        .map_or(1, |m| m + 1);
    let mut used_chassis: BTreeSet<u32> = domain
        .controllers
        .iter()
        .filter(|c| c.has_chassis())
        .map(|c| c.chassis.unwrap_or(c.index))
        .collect();
    let mut root_slots = (FIRST_ROOT_SLOT..=LAST_ROOT_SLOT).filter(|s| {
        !domain
            .used_addresses
            .iter()
            .any(|a| a.domain == 0 && a.bus == 0 && a.slot == *s)
    });
    let mut top = domain
        .controllers
        .iter()
        .filter(|c| c.is_expander())
        .filter_map(|c| c.bus_nr)
        .min()
        .map_or(TOP_BUS, |b| b.saturating_sub(1).min(TOP_BUS));

    let mut out = Layout {
        floor,
        ..Layout::default()
    };
    let mut take_index = |what: &str| -> Result<u32, VmError> {
        let i = next_index;
        next_index += 1;
        if i > 255 {
            return Err(VmError::PortNumber {
                element: format!("new {what} controller"),
                attribute: "index",
                value: i,
                detail: "is above 255: a PCI controller index is a bus number".into(),
            });
        }
        Ok(i)
    };
    let mut take_chassis = |index: u32| -> Result<u32, VmError> {
        let pick = if used_chassis.contains(&index) {
            (1..=255).find(|c| !used_chassis.contains(c))
        } else {
            Some(index)
        };
        match pick {
            Some(c) => {
                used_chassis.insert(c);
                Ok(c)
            }
            None => Err(VmError::PortNumber {
                element: format!("new port controller index {index}"),
                attribute: "chassis",
                value: 256,
                detail: "cannot be chosen: chassis numbers 1–255 are all taken".into(),
            }),
        }
    };

    for ((cell, bridge), units) in &cells {
        if units.len() > SLOTS {
            return Err(VmError::TooManyDevices {
                element: format!("pcie-expander-bus for guest cell {cell}"),
                what: "root ports",
                count: units.len(),
                limit: SLOTS,
            });
        }
        let needed: u32 = 1 + units
            .iter()
            .map(|u| if u.len() > 1 { 2 + u.len() as u32 } else { 1 })
            .sum::<u32>();
        let bus_nr = i64::from(top) + 1 - i64::from(needed);
        if bus_nr <= i64::from(floor) {
            let all: u32 = cells
                .values()
                .map(|us| {
                    1 + us
                        .iter()
                        .map(|u| if u.len() > 1 { 2 + u.len() as u32 } else { 1 })
                        .sum::<u32>()
                })
                .sum();
            return Err(VmError::OutOfBuses {
                needed: all,
                floor,
                detail: floor_detail,
            });
        }
        let bus_nr = bus_nr as u32;
        let slot = root_slots.next().ok_or_else(|| VmError::TooManyDevices {
            element: "/domain/devices/controller[@model='pcie-root']".into(),
            what: "expander buses",
            count: cells.len(),
            limit: usize::from(LAST_ROOT_SLOT - FIRST_ROOT_SLOT + 1),
        })?;
        let pxb = take_index("pcie-expander-bus")?;
        let hosts: Vec<String> = units.iter().flatten().map(|a| a.host.to_string()).collect();
        out.controllers.push(NewController {
            index: pxb,
            model: "pcie-expander-bus",
            model_name: "pxb-pcie",
            bus_nr: Some(bus_nr),
            node: Some(*cell),
            chassis: None,
            port: None,
            address: PciAddress {
                domain: 0,
                bus: 0,
                slot,
                function: 0,
            },
            comment: Some(format!(
                "topoalign: guest NUMA cell {cell}{}, buses {bus_nr}-{top}: {}",
                bridge
                    .as_ref()
                    .map(|b| format!(" (host bridge {b})"))
                    .unwrap_or_default(),
                hosts.join(" ")
            )),
        });
        out.expanders.push(Expander {
            cell: *cell,
            host_bridge: bridge.clone(),
            index: pxb,
            bus_nr,
            last_bus: top,
        });
        top = bus_nr - 1;

        for (rp_slot, unit) in units.iter().enumerate() {
            let rp = take_index("pcie-root-port")?;
            let chassis = take_chassis(rp)?;
            out.controllers.push(port_controller(
                rp,
                "pcie-root-port",
                "pcie-root-port",
                chassis,
                (rp_slot as u32) << 3,
                addr(pxb, rp_slot)?,
            ));
            if unit.len() == 1 {
                out.placed.push(Placed {
                    passthrough: unit[0].passthrough,
                    cell: *cell,
                    address: addr(rp, 0)?,
                    chain: vec![pxb, rp],
                });
                continue;
            }
            if unit.len() > SLOTS {
                return Err(VmError::TooManyDevices {
                    element: format!(
                        "pcie-switch-upstream-port for host switch {}",
                        unit[0].switch.map(|b| b.to_string()).unwrap_or_default()
                    ),
                    what: "downstream ports",
                    count: unit.len(),
                    limit: SLOTS,
                });
            }
            let up = take_index("pcie-switch-upstream-port")?;
            out.controllers.push(NewController {
                index: up,
                model: "pcie-switch-upstream-port",
                model_name: "x3130-upstream",
                bus_nr: None,
                node: None,
                chassis: None,
                port: None,
                address: addr(rp, 0)?,
                comment: unit[0]
                    .switch
                    .map(|s| format!("topoalign: mirrors host switch {s}")),
            });
            for (k, a) in unit.iter().enumerate() {
                let down = take_index("pcie-switch-downstream-port")?;
                let chassis = take_chassis(down)?;
                out.controllers.push(port_controller(
                    down,
                    "pcie-switch-downstream-port",
                    "xio3130-downstream",
                    chassis,
                    k as u32,
                    addr(up, k)?,
                ));
                out.placed.push(Placed {
                    passthrough: a.passthrough,
                    cell: *cell,
                    address: addr(down, 0)?,
                    chain: vec![pxb, rp, up, down],
                });
            }
        }
    }
    out.placed.sort_by_key(|p| p.passthrough);
    Ok(out)
}

fn port_controller(
    index: u32,
    model: &'static str,
    model_name: &'static str,
    chassis: u32,
    port: u32,
    address: PciAddress,
) -> NewController {
    NewController {
        index,
        model,
        model_name,
        bus_nr: None,
        node: None,
        chassis: Some(chassis),
        port: Some(port),
        address,
        comment: None,
    }
}

/// The address of slot `slot` on the bus of controller `bus`.
fn addr(bus: u32, slot: usize) -> Result<PciAddress, VmError> {
    let b = u8::try_from(bus).map_err(|_| VmError::PortNumber {
        element: format!("controller index {bus}"),
        attribute: "index",
        value: bus,
        detail: "is above 255 and cannot be named in a PCI address bus".into(),
    })?;
    Ok(PciAddress {
        domain: 0,
        bus: b,
        slot: slot as u8,
        function: 0,
    })
}
