//! What the kubelet plugin does with an allocation: checks it against the node's inventory
//! and what other claims hold ([`prepare_allocation`]), then composes the CDI spec the
//! runtime applies ([`compose_cdi`]): topoalign's own device nodes and environment, RoCE
//! network devices, and the vendor's CDI devices for each GPU or MIG instance
//! ([`vendor_gpu_ids`]).
//!
//! [`prepare_allocation`]: crate::prepare::prepare_allocation
//! [`compose_cdi`]: crate::prepare::compose_cdi
//! [`vendor_gpu_ids`]: crate::prepare::vendor_gpu_ids

mod allocation;
mod cdi;
mod netdev;
mod vendor;

pub use allocation::{Holdings, PreparedDevice, PreparedGpu, PreparedMig, prepare_allocation};
pub use cdi::{
    CdiDevice, CdiPlan, CdiSpec, ComposedCdi, ContainerEdits, DeviceNode, ENV_GPU_NIC_MAP,
    ENV_NCCL_IB_HCA, ENV_NVIDIA_VISIBLE_DEVICES, NetDevice, cdi_device_id, cdi_file_name,
    compose_cdi,
};
pub use netdev::{LINK_LAYER_ETHERNET, add_roce_net_devices};
pub use vendor::{
    AMD_KIND, NVIDIA_GENERATE, NVIDIA_KIND, VendorCdiError, VendorDevice, VendorSpec, node_number,
    parse_vendor_spec, vendor_gpu_ids, vendor_mig_ids,
};
