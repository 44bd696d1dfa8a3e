//! Devices of DRA drivers topoalign does not own, read as their drivers publish them
//! (NVIDIA's and AMD's GPU drivers, dranet, the SR-IOV driver, dra-driver-cpu): each
//! device's role, address and NUMA node ([`node_devices`]), the node topology their slices
//! imply ([`slice_topology`]), and slices saved to files ([`parse_slice_file`],
//! [`read_slice_files`]). Claim,
//! explain and the extender read other drivers' slices through here.
//!
//! [`node_devices`]: crate::foreign::node_devices
//! [`slice_topology`]: crate::foreign::slice_topology
//! [`parse_slice_file`]: crate::foreign::parse_slice_file
//! [`read_slice_files`]: crate::foreign::read_slice_files

pub(crate) mod devices;
mod slice_file;
pub(crate) mod topology;

pub use devices::{
    AMD_GPU_DRIVER, DRANET_DRIVER, DeviceRole, ForeignDevice, GpuForm, NVIDIA_GPU_DRIVER,
    SRIOV_DRIVER, node_devices, rdma_selector,
};
pub use slice_file::{SliceFile, SliceFileError, parse_slice_file, read_slice_files};
pub use topology::{SliceTopology, slice_topology, topology_of};
