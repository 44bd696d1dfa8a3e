//! The standard DRA device attribute names (`resource.kubernetes.io/…`), which every
//! driver may publish and every claim may match on: written by topoalign's driver, read
//! by its extender, the fleet simulation's stand-in drivers and the lint's claim rules.

/// Standard: the PCI address of a device that is one PCI function (`0000:3b:00.0`).
pub const PCI_BUS_ID: &str = "resource.kubernetes.io/pciBusID";
/// Standard: the host bridge a device hangs under (`pci0000:3a`).
pub const PCIE_ROOT: &str = "resource.kubernetes.io/pcieRoot";
/// Standard (KEP-6072, alpha in 1.37): the NUMA node. Never published when the kernel
/// reports `-1`.
pub const NUMA_NODE_STD: &str = "resource.kubernetes.io/numaNode";
