//! PCI configuration space: finding the PCI Express capability (id 0x10) and its port
//! type (PCIe Capabilities register bits 7:4: 4 root port, 5 upstream, 6 downstream).
//!
//! Unprivileged readers get only the first 64 bytes of `config`, so the capability list
//! (which starts at 0x40 or later) is out of reach; the caller then infers the type from
//! the device's position in the tree.

use topoalign_topology::PciKind;

/// Offset of the Status register (bit 4: a capability list is present).
const STATUS: usize = 0x06;
/// Offset of the Capabilities Pointer.
const CAP_POINTER: usize = 0x34;
/// Capability id of PCI Express.
const CAP_ID_PCIE: u8 = 0x10;
/// Port type values of the PCIe Capabilities register.
const PORT_ROOT: u8 = 0x4;
const PORT_UPSTREAM: u8 = 0x5;
const PORT_DOWNSTREAM: u8 = 0x6;
/// PCI Express to PCI/PCI-X bridge, and the reverse.
const PORT_PCIE_TO_PCI: u8 = 0x7;
const PORT_PCI_TO_PCIE: u8 = 0x8;

/// The port type of a bridge from its config space, or `None` when the bytes do not
/// reach the PCIe capability (unprivileged read, truncated file, no capability list).
pub fn port_kind_from_config(config: &[u8]) -> Option<PciKind> {
    let status = u16::from_le_bytes([*config.get(STATUS)?, *config.get(STATUS + 1)?]);
    if status & 0x10 == 0 {
        return None;
    }
    let mut ptr = usize::from(*config.get(CAP_POINTER)? & 0xfc);
    // At most 48 capabilities fit in 256 bytes; a longer walk is a corrupt (looping) list.
    for _ in 0..48 {
        if ptr < 0x40 {
            return None;
        }
        let id = *config.get(ptr)?;
        if id == CAP_ID_PCIE {
            let caps = *config.get(ptr + 2)?;
            return Some(match (caps >> 4) & 0xf {
                PORT_ROOT => PciKind::RootPort,
                PORT_UPSTREAM => PciKind::SwitchUpstream,
                PORT_DOWNSTREAM => PciKind::SwitchDownstream,
                PORT_PCIE_TO_PCI | PORT_PCI_TO_PCIE => PciKind::Bridge,
                _ => PciKind::Bridge,
            });
        }
        ptr = usize::from(*config.get(ptr + 1)? & 0xfc);
    }
    None
}

/// Builds a 256-byte config space for a function: identity, class, header type, bus
/// numbers for bridges, and one PCIe capability at 0x40 carrying the port type of
/// `kind` (0 for an endpoint). This is what a privileged reader of `config` sees.
pub fn build_config(
    vendor: u16,
    device: u16,
    class: u32,
    kind: PciKind,
    bus: u8,
    bus_range: Option<(u8, u8)>,
) -> Vec<u8> {
    let mut c = vec![0u8; 256];
    c[0..2].copy_from_slice(&vendor.to_le_bytes());
    c[2..4].copy_from_slice(&device.to_le_bytes());
    c[STATUS] = 0x10;
    let class_bytes = class.to_le_bytes();
    c[0x09..0x0c].copy_from_slice(&class_bytes[0..3]);
    let port_type = match kind {
        PciKind::RootPort => PORT_ROOT,
        PciKind::SwitchUpstream => PORT_UPSTREAM,
        PciKind::SwitchDownstream => PORT_DOWNSTREAM,
        PciKind::Bridge => PORT_PCIE_TO_PCI,
        PciKind::Endpoint => 0,
    };
    if kind.is_bridge() {
        c[0x0e] = 0x01;
        let (sec, sub) = bus_range.unwrap_or((0, 0));
        c[0x18] = bus;
        c[0x19] = sec;
        c[0x1a] = sub;
    }
    c[CAP_POINTER] = 0x40;
    c[0x40] = CAP_ID_PCIE;
    c[0x41] = 0;
    // PCIe Capabilities register: version 2, port type in bits 7:4.
    c[0x42] = (port_type << 4) | 0x2;
    c
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_every_port_type() {
        for kind in [
            PciKind::RootPort,
            PciKind::SwitchUpstream,
            PciKind::SwitchDownstream,
            PciKind::Bridge,
        ] {
            let c = build_config(0x10b5, 0xc030, 0x060400, kind, 1, Some((2, 3)));
            assert_eq!(port_kind_from_config(&c), Some(kind));
        }
    }

    #[test]
    fn unprivileged_or_broken_config_gives_none() {
        let c = build_config(0x10b5, 0xc030, 0x060400, PciKind::RootPort, 0, None);
        assert_eq!(port_kind_from_config(&c[..64]), None, "64-byte header only");
        assert_eq!(port_kind_from_config(&[]), None);
        let mut looped = c.clone();
        looped[0x40] = 0x05;
        looped[0x41] = 0x40;
        assert_eq!(port_kind_from_config(&looped), None, "self-pointing list");
        let mut no_list = c;
        no_list[STATUS] = 0;
        assert_eq!(port_kind_from_config(&no_list), None);
    }
}
