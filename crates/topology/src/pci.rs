//! The PCI tree: host bridges (root complexes), bridges (root ports, switch ports) and
//! endpoints, as Linux lays them out under `/sys/devices/pciDDDD:BB/…`.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::ids::Bdf;

/// A host bridge / root complex: the first component of a device's sysfs path,
/// `pciDDDD:BB`, which is exactly the DRA attribute `resource.kubernetes.io/pcieRoot`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HostBridge {
    /// PCI domain of the root bus.
    pub domain: u16,
    /// Root bus number.
    pub bus: u8,
}

impl HostBridge {
    /// The kernel's name for it, `pciDDDD:BB`.
    pub fn name(&self) -> String {
        format!("pci{:04x}:{:02x}", self.domain, self.bus)
    }
}

/// Where a PCI device hangs in the tree.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum PciParent {
    /// Directly on a host bridge's root bus (index into [`crate::Topology::host_bridges`]).
    Host(usize),
    /// Below a bridge (index into [`crate::Topology::pci`]).
    Bridge(usize),
}

/// The role of a PCI function in the tree.
///
/// For bridges this is the PCIe port type (config space, PCIe capability bits 7:4: 4 root
/// port, 5 upstream, 6 downstream). Without privilege to read config space it is inferred
/// from position: a bridge directly on the root bus is a root port, a bridge below a root
/// port or a downstream port is a switch upstream port, a bridge below an upstream port is
/// a downstream port.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum PciKind {
    /// A PCIe root port (type 4).
    RootPort,
    /// The upstream port of a PCIe switch (type 5).
    SwitchUpstream,
    /// A downstream port of a PCIe switch (type 6).
    SwitchDownstream,
    /// Any other PCI-to-PCI bridge (PCIe-to-PCI bridges, legacy bridges).
    Bridge,
    /// An endpoint (GPU, NIC, NVSwitch, NVMe, ...).
    Endpoint,
}

impl PciKind {
    /// True for every kind of bridge.
    pub fn is_bridge(self) -> bool {
        !matches!(self, PciKind::Endpoint)
    }
}

/// A PCIe link's negotiated state (`current_link_speed`, `current_link_width`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct PcieLink {
    /// Speed in tenths of GT/s (`32.0 GT/s PCIe` is 320), so that the value is exact.
    pub speed_dgts: u32,
    /// Lane count (x16 is 16).
    pub width: u32,
}

impl PcieLink {
    /// Speed in GT/s as the kernel prints it (`32.0 GT/s PCIe`).
    pub fn speed_text(&self) -> String {
        format!(
            "{}.{} GT/s PCIe",
            self.speed_dgts / 10,
            self.speed_dgts % 10
        )
    }

    /// The PCIe generation implied by the per-lane rate (Gen1 2.5 … Gen6 64 GT/s).
    pub fn generation(&self) -> Option<u32> {
        match self.speed_dgts {
            25 => Some(1),
            50 => Some(2),
            80 => Some(3),
            160 => Some(4),
            320 => Some(5),
            640 => Some(6),
            _ => None,
        }
    }
}

impl fmt::Display for PcieLink {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}.{} GT/s x{}",
            self.speed_dgts / 10,
            self.speed_dgts % 10,
            self.width
        )
    }
}

/// PCI class codes the model cares about (the `class` file, `0x%06x`).
pub mod class {
    /// PCI-to-PCI bridge (root ports and switch ports).
    pub const PCI_BRIDGE: u32 = 0x060400;
    /// "Other bridge": how NVSwitch shows up.
    pub const OTHER_BRIDGE: u32 = 0x068000;
    /// Network controller, Ethernet.
    pub const ETHERNET: u32 = 0x020000;
    /// Network controller, InfiniBand.
    pub const INFINIBAND: u32 = 0x020700;
    /// Display controller, VGA compatible.
    pub const VGA: u32 = 0x030000;
    /// Display controller, 3D (most data-centre GPUs).
    pub const DISPLAY_3D: u32 = 0x030200;
    /// Processing accelerator: `lspci` shows AMD Instinct MI300X as
    /// "Processing accelerators \[1200\]" rather than a display controller.
    pub const PROCESSING_ACCEL: u32 = 0x120000;

    /// True for display controllers (`0x03xxxx`), the GPU family.
    pub fn is_display(class: u32) -> bool {
        class >> 16 == 0x03
    }

    /// True for processing accelerators (`0x12xxxx`).
    pub fn is_accelerator(class: u32) -> bool {
        class >> 16 == 0x12
    }

    /// True for network controllers (`0x02xxxx`), the NIC family.
    pub fn is_network(class: u32) -> bool {
        class >> 16 == 0x02
    }

    /// True for PCI-to-PCI bridges (`0x0604xx`).
    pub fn is_pci_bridge(class: u32) -> bool {
        class >> 8 == 0x0604
    }

    /// True for InfiniBand controllers (`0x0207xx`): every port is InfiniBand (a VPI card
    /// in Ethernet mode reports `0x0200xx` instead).
    pub fn is_infiniband(class: u32) -> bool {
        class >> 8 == 0x0207
    }
}

/// True when a network function's PCI identity alone says it does RDMA: an InfiniBand
/// controller (class `0x0207xx`) or an AWS Elastic Fabric Adapter (vendor `0x1d0f`, device
/// `0xefa0`–`0xefaf`; the same vendor's ENA, `0xec20`…, is plain Ethernet).
pub fn rdma_by_identity(class: u32, vendor: u16, device: u16) -> bool {
    class::is_network(class)
        && (class::is_infiniband(class) || (vendor == vendor::AMAZON && device & 0xfff0 == 0xefa0))
}

/// Well-known PCI vendor ids.
pub mod vendor {
    /// NVIDIA.
    pub const NVIDIA: u16 = 0x10de;
    /// AMD / ATI graphics.
    pub const AMD: u16 = 0x1002;
    /// Intel.
    pub const INTEL: u16 = 0x8086;
    /// Mellanox / NVIDIA networking.
    pub const MELLANOX: u16 = 0x15b3;
    /// Broadcom (NetXtreme NICs, PEX switches).
    pub const BROADCOM: u16 = 0x14e4;
    /// Broadcom / PLX PCIe switches.
    pub const PLX: u16 = 0x10b5;
    /// Amazon (EFA `0xefaX`, ENA `0xec2X`).
    pub const AMAZON: u16 = 0x1d0f;
}

/// One PCI function: a bridge or an endpoint.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PciDevice {
    /// Its address.
    pub bdf: Bdf,
    /// What it hangs below.
    pub parent: PciParent,
    /// Bridge role or endpoint.
    pub kind: PciKind,
    /// `vendor`.
    pub vendor: u16,
    /// `device`.
    pub device: u16,
    /// `class` (24 bits).
    pub class: u32,
    /// `numa_node`; `None` where the kernel reports -1 (unknown).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub numa_node: Option<u32>,
    /// Negotiated link, when the kernel exposes it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub link: Option<PcieLink>,
    /// For bridges: (`secondary_bus_number`, `subordinate_bus_number`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bus_range: Option<(u8, u8)>,
}

impl PciDevice {
    /// A bridge with typical identity values: root ports belong to the CPU (Intel),
    /// switch ports to a Broadcom/PLX PEX switch. Used by profiles and by parsers that
    /// synthesise a tree.
    pub fn bridge(
        bdf: Bdf,
        parent: PciParent,
        kind: PciKind,
        numa_node: Option<u32>,
        bus_range: Option<(u8, u8)>,
        link: Option<PcieLink>,
    ) -> PciDevice {
        let (vendor, device) = match kind {
            PciKind::RootPort => (vendor::INTEL, 0x352a),
            _ => (vendor::PLX, 0xc030),
        };
        PciDevice {
            bdf,
            parent,
            kind,
            vendor,
            device,
            class: class::PCI_BRIDGE,
            numa_node,
            link,
            bus_range,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rdma_is_told_by_class_and_efa_ids() {
        assert!(rdma_by_identity(class::INFINIBAND, 0, 0));
        assert!(rdma_by_identity(0x020701, vendor::MELLANOX, 0x1021));
        // EFA is RDMA; ENA (same vendor, same class) is not; a Mellanox in Ethernet mode
        // is not known to do RDMA from its identity alone.
        assert!(rdma_by_identity(class::ETHERNET, vendor::AMAZON, 0xefa0));
        assert!(rdma_by_identity(class::ETHERNET, vendor::AMAZON, 0xefa2));
        assert!(!rdma_by_identity(class::ETHERNET, vendor::AMAZON, 0xec20));
        assert!(!rdma_by_identity(class::ETHERNET, vendor::MELLANOX, 0x1021));
        // Not a network function at all.
        assert!(!rdma_by_identity(class::DISPLAY_3D, vendor::AMAZON, 0xefa0));
        assert!(class::is_infiniband(0x020700));
        assert!(!class::is_infiniband(class::ETHERNET));
    }
}
