//! Passed-through GPUs and NICs keep their host NUMA node and PCIe switch inside a VM.
//!
//! KubeVirt and plain libvirt attach passed-through devices to the guest's root complex
//! (`pcie.0`), which has no NUMA affinity: inside a multi-NUMA guest every GPU looks
//! equally far from every vCPU and NIC. [`rewrite`] takes a libvirt domain XML and the
//! host's topology and puts each `<hostdev>` (and `<interface type='hostdev'>`) behind a
//! `pcie-expander-bus` whose `<node>` is the guest cell pinned to the device's host NUMA
//! node, one `pcie-root-port` per device, and with [`Options::mirror_switches`] a guest
//! PCIe switch for devices that share a host switch (so a GPU and its NIC are PIX in the
//! guest too). Nothing else in the domain changes.
//!
//! The core does no I/O: callers pass the XML text and a [`HostView`]. The `clap`
//! feature adds `topoalign vm`'s flags and the command's file reads and writes
//! (`VmArgs::read_inputs`, `VmArgs::rewrite_on`).

#[cfg(feature = "clap")]
mod args;
mod check;
#[cfg(feature = "clap")]
mod command;
mod domain;
mod error;
mod explain;
mod guest;
mod host;
mod layout;
mod mapping;
mod rewrite;
mod standin;
mod vmi;
mod xml;

use serde::Serialize;
use topoalign_topology::Bdf;

#[cfg(feature = "clap")]
pub use args::VmArgs;
#[cfg(feature = "clap")]
pub use command::{VmCommandError, VmInputs, VmOutput};
pub use domain::{Domain, PciAddress};
pub use error::VmError;
pub use host::{HostDevice, HostNode, HostView, Role};
pub use layout::{Expander, NewController};
pub use mapping::CellMapping;
pub use standin::stand_ins;
pub use vmi::parse as parse_vmi;

/// Rewrite options.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[cfg_attr(feature = "clap", derive(clap::Args))]
pub struct Options {
    /// Give devices that share a host PCIe switch one guest switch (PIX in the guest).
    #[cfg_attr(feature = "clap", arg(long))]
    pub mirror_switches: bool,
    /// One pcie-expander-bus per host bridge (not per guest cell): devices under different
    /// host bridges of one node are NODE in the guest as on the host, not PHB.
    #[cfg_attr(feature = "clap", arg(long))]
    pub mirror_host_bridges: bool,
}

/// One passed-through device in the report.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DeviceReport {
    /// The element in the domain.
    pub element: String,
    /// Its `<alias name>`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub alias: Option<String>,
    /// Host PCI address.
    pub host_address: Bdf,
    /// GPU, NIC or other (absent when the host topology does not know it).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub role: Option<Role>,
    /// Human label from the host topology.
    pub label: String,
    /// Host NUMA node.
    pub host_numa: Option<u32>,
    /// Host switch upstream port.
    pub host_switch: Option<Bdf>,
    /// Guest cell it now belongs to.
    pub guest_cell: Option<u32>,
    /// Its guest address (`bus` = the controller index).
    pub guest_address: Option<PciAddress>,
    /// Controllers from pcie.0 down to it, e.g. `pcie-expander-bus 9 (busNr 251, node 1)`.
    pub chain: Vec<String>,
    /// Why it was left where it was.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub left: Option<String>,
}

/// What the rewrite did and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Report {
    /// Host or profile name.
    pub host: String,
    /// Whether host switches were mirrored.
    pub mirror_switches: bool,
    /// Whether host bridges were mirrored.
    pub mirror_host_bridges: bool,
    /// Guest cell → host node.
    pub cells: Vec<CellMapping>,
    /// Each passed-through device.
    pub devices: Vec<DeviceReport>,
    /// Expanders added, with their bus ranges.
    pub expanders: Vec<Expander>,
    /// Every controller added.
    pub controllers: Vec<NewController>,
    /// The highest bus pcie.0's hierarchy may use.
    pub pcie0_floor: u32,
}

/// The rewritten domain and its report.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rewrite {
    /// The new domain XML.
    pub xml: String,
    /// What was done.
    pub report: Report,
    /// The guest as topoalign will see it from inside (predicted).
    pub guest: guest::GuestTopology,
}

/// Rewrites a domain XML so passed-through devices sit on their host NUMA node's guest
/// cell (and, optionally, behind a mirrored switch).
pub fn rewrite(domain_xml: &str, host: &HostView, opts: Options) -> Result<Rewrite, VmError> {
    let domain = Domain::parse(domain_xml)?;
    // Refuse what is already wrong before adding to it, naming the input's elements.
    check::check(&domain)?;
    if !domain.passthrough.is_empty() && !domain.has_numa {
        return Err(VmError::NumaMissing {
            devices: domain.passthrough.len(),
        });
    }
    let cells = mapping::map_cells(&domain, host);
    let mut assignments = Vec::new();
    let mut devices = Vec::new();
    for (i, p) in domain.passthrough.iter().enumerate() {
        let hd = host.devices.get(&p.source);
        let target = mapping::target_for(hd, &cells, &domain, &host.name);
        let (guest_cell, left) = match target {
            mapping::Target::Cell(c) => {
                assignments.push(layout::Assignment {
                    passthrough: i,
                    cell: c,
                    host: p.source,
                    switch: if opts.mirror_switches {
                        hd.and_then(|d| d.switch)
                    } else {
                        None
                    },
                    host_bridge: if opts.mirror_host_bridges {
                        hd.and_then(|d| d.host_bridge.clone())
                    } else {
                        None
                    },
                });
                (Some(c), None)
            }
            mapping::Target::Left(why) => (None, Some(why)),
        };
        devices.push(DeviceReport {
            element: p.path.clone(),
            alias: p.alias.clone(),
            host_address: p.source,
            role: hd.map(|d| d.role),
            label: hd.map(|d| d.label.clone()).unwrap_or_default(),
            host_numa: hd.and_then(|d| d.numa),
            host_switch: hd.and_then(|d| d.switch),
            guest_cell,
            guest_address: p.guest_address,
            chain: Vec::new(),
            left,
        });
    }
    // A switch shared by one device only is no switch in the guest.
    for a in assignments.clone().iter() {
        if a.switch.is_some()
            && assignments
                .iter()
                .filter(|b| b.cell == a.cell && b.switch == a.switch)
                .count()
                < 2
        {
            for b in assignments
                .iter_mut()
                .filter(|b| b.passthrough == a.passthrough)
            {
                b.switch = None;
            }
        }
    }
    let lay = layout::lay_out(&domain, &assignments)?;
    for p in &lay.placed {
        let d = &mut devices[p.passthrough];
        d.guest_address = Some(p.address);
        d.chain = p
            .chain
            .iter()
            .filter_map(|idx| lay.controllers.iter().find(|c| c.index == *idx))
            .map(describe_controller)
            .collect();
    }
    let xml = if lay.controllers.is_empty() {
        domain_xml.to_string()
    } else {
        rewrite::splice(domain_xml, &domain, &lay)
    };
    let after = Domain::parse(&xml)?;
    check::check(&after)?;
    let report = Report {
        host: host.name.clone(),
        mirror_switches: opts.mirror_switches,
        mirror_host_bridges: opts.mirror_host_bridges,
        cells,
        devices,
        expanders: lay.expanders.clone(),
        controllers: lay.controllers.clone(),
        pcie0_floor: lay.floor,
    };
    let guest = guest::GuestTopology::predict(&report, host);
    Ok(Rewrite { xml, report, guest })
}

/// `pcie-root-port 10 (chassis 10, port 0x0)` and the like.
fn describe_controller(c: &NewController) -> String {
    match (c.bus_nr, c.node, c.chassis, c.port) {
        (Some(b), Some(n), _, _) => format!("{} {} (busNr {b}, node {n})", c.model, c.index),
        (None, None, Some(ch), Some(p)) => {
            format!("{} {} (chassis {ch}, port 0x{p:x})", c.model, c.index)
        }
        _ => format!("{} {}", c.model, c.index),
    }
}
