//! Attribute and capacity names published on devices.
//!
//! The standard ones carry the `resource.kubernetes.io/` domain and are written fully
//! qualified. The driver's own are written without a domain in a ResourceSlice (the API
//! puts them in the driver's domain, [`crate::DRIVER_NAME`]); in CEL they read as
//! `device.attributes["topoalign.dev"]["rank"]`, and in a `matchAttribute` constraint they
//! must be qualified: use [`crate::attr::qualified`].

/// The standard names, and the cross-driver NUMA key, whose one home is the shared
/// vocabulary (the lint and the fleet simulation's stand-in drivers speak them too).
/// Every device on one NUMA node carries both [`NUMA_NODE_STD`] and [`NUMA_NODE_COMPAT`],
/// so a claim can align it with CPUs of dra-driver-cpu (whose v0.2.0 publishes only the
/// compatibility key) or NICs of dranet and the SR-IOV DRA driver.
pub use topoalign_kube_types::{NUMA_NODE_COMPAT, NUMA_NODE_STD, PCI_BUS_ID, PCIE_ROOT};

/// Driver domain: `gpu`, `nic` or `pair` (string).
pub const TYPE: &str = "type";
/// Driver domain: vendor (`nvidia`, `amd`, `mellanox`, …) (string).
pub const VENDOR: &str = "vendor";
/// Driver domain: model when known (string).
pub const MODEL: &str = "model";
/// Driver domain: NUMA node (int), the same value as [`NUMA_NODE_STD`] where the device
/// sits on one NUMA node; kept for the claims written against it before the standard
/// attribute was stable (1.37). A pair carries its GPU's, also when its NIC sits on
/// another node (the standard one it then does not carry).
pub const NUMA_NODE: &str = "numaNode";
/// Driver domain: CPU socket (physical package) of the device's NUMA node (int).
pub const SOCKET: &str = "socket";
/// Driver domain: the PCI address of the upstream port of the nearest PCIe switch above
/// the device (string); absent for devices on a root port. A pair carries its GPU's.
pub const PCIE_SWITCH: &str = "pcieSwitch";
/// Driver domain: alignment group (int). GPUs and NICs with the same value can do
/// GPUDirect RDMA with each other (connected components of the GDR relation, numbered
/// in address order from 0); absent for a device with no GDR partner.
pub const ALIGNMENT_GROUP: &str = "alignmentGroup";
/// Driver domain: NVLink/xGMI island number (int), GPUs only, absent for GPUs without
/// fabric links.
pub const FABRIC_DOMAIN: &str = "fabricDomain";
/// Driver domain: whether the NIC has an RDMA device (bool).
pub const RDMA: &str = "rdma";
/// Driver domain: the PF's RDMA device (`mlx5_0`) (string).
pub const RDMA_DEVICE: &str = "rdmaDevice";
/// Driver domain: RDMA without a netdev (bool).
pub const IB_ONLY: &str = "ibOnly";
/// Driver domain: `InfiniBand` or `Ethernet` (string).
pub const LINK_LAYER: &str = "linkLayer";
/// Driver domain: the PF's network interface (string).
pub const NETDEV: &str = "netdev";
/// Driver domain: number of functions of a physical NIC, PF plus enabled VFs (int).
pub const PF_VF_COUNT: &str = "pfVfCount";
/// Driver domain, pairs: the pair's class, `PIX`, `PXB`, `PHB` or `NODE` (string).
pub const CLASS: &str = "class";
/// Driver domain, pairs: the class rank, 0 = PIX (best), 1 PXB, 2 PHB, 3 NODE (int).
/// The same scale on every node, so `rank <= 1` means "GPUDirect-RDMA-grade PCIe".
pub const RANK: &str = "rank";
/// Driver domain, pairs: whether NCCL uses GPUDirect RDMA on the pair by default (bool).
pub const GDR: &str = "gdr";
/// Driver domain: the GPU device's name; on a pair, its GPU (string).
pub const GPU: &str = "gpu";
/// Driver domain: the physical NIC device's name; on a pair, its NIC (string).
pub const NIC: &str = "nic";
/// Driver domain, pairs: the GPU's PCI address (string).
pub const GPU_PCI_BUS_ID: &str = "gpuPciBusID";
/// Driver domain, pairs: the NIC's (PF's) PCI address (string).
pub const NIC_PCI_BUS_ID: &str = "nicPciBusID";
/// Driver domain: the rail of a NIC (int, 0 = rail 0), on NIC devices and on pairs (their
/// NIC's). On a rail-optimized fabric every node's NIC on rail `r` reaches its peers
/// through leaf switch `r`, so pods of one job must use the same rails. Published only
/// when the node's rail source says (an operator map or a stated rule), never guessed.
pub const RAIL: &str = "rail";

/// Driver domain, MIG devices and MIG pairs: the MIG profile (`1g.10gb`) (string).
pub const PROFILE: &str = "profile";
/// Driver domain, MIG devices and MIG pairs: the parent GPU's UUID (string).
pub const PARENT_UUID: &str = "parentUUID";
/// Driver domain, MIG devices and MIG pairs: the instance's `MIG-…` UUID, when known
/// (string).
pub const UUID: &str = "uuid";
/// Driver domain, MIG devices and MIG pairs: the first memory slice of the instance
/// (int).
pub const MIG_START: &str = "migStart";
/// Driver domain, MIG devices and MIG pairs: memory slices of the instance (int).
pub const MEMORY_SLICES: &str = "memorySlices";
/// Driver domain, GPUs, pairs and MIG devices of a MIG-enabled GPU: `true` (bool).
/// Absent on GPUs without MIG mode. A whole GPU in MIG mode gives CUDA no device of
/// its own; its devices are published after every other GPU's, so first fit takes it
/// last.
pub const MIG_ENABLED: &str = "migEnabled";

/// Capacity: GPU memory (bytes, as a quantity such as `196608Mi`).
pub const CAP_MEMORY: &str = "memory";
/// Capacity: NIC bandwidth in bits per second (a quantity such as `400G`).
pub const CAP_BANDWIDTH: &str = "bandwidth";

/// The fully qualified name of a driver-domain attribute (`topoalign.dev/rank`), for
/// `matchAttribute` / `distinctAttribute`. Standard names are returned unchanged.
pub fn qualified(name: &str) -> String {
    if name.contains('/') {
        name.to_string()
    } else {
        format!("{}/{name}", crate::DRIVER_NAME)
    }
}

/// A CEL expression reading an attribute, in index form so that names such as `type`
/// need no care: `device.attributes["topoalign.dev"]["rank"]`. A name without a domain
/// is in the driver's domain.
pub fn cel(name: &str) -> String {
    match name.split_once('/') {
        Some((domain, short)) => format!("device.attributes[\"{domain}\"][\"{short}\"]"),
        None => format!("device.attributes[\"{}\"][\"{name}\"]", crate::DRIVER_NAME),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn qualified_and_cel_names() {
        assert_eq!(qualified(RANK), "topoalign.dev/rank");
        assert_eq!(qualified(PCIE_ROOT), PCIE_ROOT);
        assert_eq!(cel(RANK), "device.attributes[\"topoalign.dev\"][\"rank\"]");
        assert_eq!(
            cel(PCI_BUS_ID),
            "device.attributes[\"resource.kubernetes.io\"][\"pciBusID\"]"
        );
    }
}
