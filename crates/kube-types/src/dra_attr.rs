//! The standard DRA device attribute names (`resource.kubernetes.io/…`), which every
//! driver may publish and every claim may match on: written by topoalign's driver, read
//! by its extender, the fleet simulation's stand-in drivers and the lint's claim rules;
//! and the one cross-driver compatibility key drivers publish before the standard.

/// Standard: the PCI address of a device that is one PCI function (`0000:3b:00.0`).
pub const PCI_BUS_ID: &str = "resource.kubernetes.io/pciBusID";
/// Standard: the host bridge a device hangs under (`pci0000:3a`).
pub const PCIE_ROOT: &str = "resource.kubernetes.io/pcieRoot";
/// Standard (KEP-6072, stable in 1.37 in this scalar form, no feature gate): the NUMA
/// node. Never published when the kernel reports `-1`.
pub const NUMA_NODE_STD: &str = "resource.kubernetes.io/numaNode";
/// The cross-driver NUMA key published before the standard one existed, and still
/// beside it: dranet's own `dra.net/numaNode`, which dra-driver-cpu (v0.2.0: its only
/// NUMA key a claim can share with another driver; later versions as a deprecated
/// compatibility attribute) and the SR-IOV DRA driver publish too. A claim can align
/// devices of two drivers on it only when both publish it.
pub const NUMA_NODE_COMPAT: &str = "dra.net/numaNode";
