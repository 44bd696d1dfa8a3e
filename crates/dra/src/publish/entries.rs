//! The published device entries of one node: its GPUs, its physical NICs with their
//! functions, and its GPU×NIC pairs. Plain data, built by [`crate::publish::Inventory`] and read by
//! the MIG join (`crate::publish::mig`), the slices and the CDI writers.

use serde::{Deserialize, Serialize};
use topoalign_topology::{Bdf, GpuNicPath, GpuVendor};

/// One GPU of the node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GpuEntry {
    /// Device name (and counter name): `gpu-0000-3b-00-0`.
    pub name: String,
    /// PCI address.
    pub bdf: Bdf,
    /// Index into [`Topology::gpus`](topoalign_topology::Topology::gpus).
    pub index: usize,
    /// Vendor.
    pub vendor: GpuVendor,
    /// Model when known.
    pub model: Option<String>,
    /// Memory in MiB when known.
    pub memory_mib: Option<u64>,
    /// NVIDIA UUID when known.
    pub uuid: Option<String>,
    /// NUMA node as the kernel reports it (`None` for -1).
    pub numa_node: Option<u32>,
    /// Socket of that NUMA node, when known.
    pub socket: Option<u32>,
    /// `pciDDDD:BB` of its host bridge.
    pub pcie_root: Option<String>,
    /// Upstream port of the nearest PCIe switch above it.
    pub pcie_switch: Option<Bdf>,
    /// Alignment group ([`crate::attr::ALIGNMENT_GROUP`]).
    pub alignment_group: Option<u32>,
    /// NVLink/xGMI island number.
    pub fabric_domain: Option<u32>,
    /// Character devices a container needs for it (control nodes included).
    pub device_nodes: Vec<String>,
    /// The counter set holding its counter (a MIG-enabled GPU's own set,
    /// `names::mig_counter_set`).
    pub counter_set: String,
    /// In MIG mode with instances (`crate::publish::mig`): the whole GPU consumes every memory
    /// and SM slice of its counter set.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub mig_enabled: bool,
}

/// One function (PF or VF) of a physical NIC.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NicFunction {
    /// PCI address.
    pub bdf: Bdf,
    /// Index into [`Topology::nics`](topoalign_topology::Topology::nics).
    pub index: usize,
    /// `Some(n)` for the VF `virtfn<n>`, `None` for the PF (or a NIC without SR-IOV).
    pub vf: Option<u32>,
    /// Network interface.
    pub netdev: Option<String>,
    /// RDMA device (`mlx5_3`).
    pub rdma: Option<String>,
    /// RDMA port number of its first port (for `NCCL_IB_HCA=mlx5_3:1`).
    pub port: Option<u32>,
    /// Character devices a container needs to use it (`uverbsN`, `umadN`, `rdma_cm`).
    pub device_nodes: Vec<String>,
}

/// A physical NIC: a PF with its enabled VFs, or a NIC without SR-IOV (then one function).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PhysicalNic {
    /// Device name (and counter name): `nic-0000-0c-00-0`.
    pub name: String,
    /// PCI address of the PF.
    pub bdf: Bdf,
    /// Index of the PF into [`Topology::nics`](topoalign_topology::Topology::nics).
    pub index: usize,
    /// PCI vendor name (`mellanox`, `broadcom`, `intel`, or the hex id).
    pub vendor: String,
    /// Its functions, PF first, then VFs in `virtfn` order. The counter value.
    pub functions: Vec<NicFunction>,
    /// NUMA node as the kernel reports it.
    pub numa_node: Option<u32>,
    /// Socket of that NUMA node.
    pub socket: Option<u32>,
    /// Host bridge.
    pub pcie_root: Option<String>,
    /// Nearest PCIe switch upstream port.
    pub pcie_switch: Option<Bdf>,
    /// Alignment group.
    pub alignment_group: Option<u32>,
    /// The PF's RDMA device.
    pub rdma_device: Option<String>,
    /// The PF's netdev.
    pub netdev: Option<String>,
    /// RDMA without netdev.
    pub ib_only: bool,
    /// `InfiniBand` / `Ethernet`.
    pub link_layer: Option<String>,
    /// Line rate in bits per second, when known.
    pub bandwidth_bps: Option<u64>,
    /// The counter set holding its counter.
    pub counter_set: String,
    /// Its rail ([`crate::attr::RAIL`]), set by [`Inventory::set_rails`](crate::publish::Inventory::set_rails); `None` without a
    /// rail source.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rail: Option<u32>,
}

/// A GPU with a physical NIC at `max_pair_class` or better.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PairEntry {
    /// Device name: `pair-<gpu>-<nic>`.
    pub name: String,
    /// Index into [`Inventory::gpus`](crate::publish::Inventory::gpus).
    pub gpu: usize,
    /// Index into [`Inventory::nics`](crate::publish::Inventory::nics).
    pub nic: usize,
    /// Class, NCCL path and GDR of the pair.
    pub path: GpuNicPath,
}
