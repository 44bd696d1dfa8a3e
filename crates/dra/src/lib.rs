//! The pure DRA model of topoalign: a node [`Topology`](topoalign_topology::Topology)
//! as `resource.k8s.io/v1` objects. No I/O here; the publisher (`topoalign driver`), the
//! kubelet plugin and the scheduler extender build on it.
//!
//! - [`Inventory`]: every device the node publishes (plain GPUs, plain NICs, GPU+NIC
//!   pairs), named stably from PCI addresses, with the counters each consumes and, for
//!   NICs, their functions (PF + VFs) and device nodes. [`Inventory::device`] maps an
//!   allocated device name back to hardware.
//! - [`resource_slices`]: the node's pool: counter sets (one counter per GPU, one per
//!   physical NIC whose value is its number of functions) in slices of their own, then
//!   pairs (best first), GPUs and NICs, split within the API limits (`limits`).
//! - [`device_classes`]: `gpu.topoalign.dev`, `nic.topoalign.dev`,
//!   `gpu-nic-pair.topoalign.dev`; [`mig_device_classes`]: `mig.topoalign.dev`,
//!   `mig-nic-pair.topoalign.dev`.
//! - `mig`: static MIG: a node's MIG instances ([`NodeMig`]) published as MIG devices
//!   and MIG×NIC pairs with per-GPU memory-slice counters; [`mig_claim_spec`] claims them.
//!   `mig_dynamic`: dynamic MIG, every placement published ([`NodeMig::dynamic`]), the
//!   instance created by the kubelet plugin at prepare. `mig_geometry`: a geometry
//!   written down (a built-in profile's) published as its instances
//!   ([`NodeMig::from_geometry`]).
//! - [`claim_template`] / [`resource_claim`]: "N GPUs, each with its own NIC".
//! - [`prepare_allocation`] and [`compose_cdi`]: what the kubelet plugin checks and writes;
//!   [`vendor_gpu_ids`]: each allocated GPU's device in the vendor's CDI spec.
//!
//! # Driver name
//! [`DRIVER_NAME`] is `topoalign.dev`, the project's domain: the driver's attributes live
//! under it (`topoalign.dev/rank`), its DeviceClasses end in it, CDI kind
//! `topoalign.dev/device`.
//!
//! # Pair devices and counters
//! One pair per (GPU, physical NIC) at NUMA level (`NODE`) or better. A pair consumes
//! the GPU's counter (value 1) and one unit of the NIC's counter (value = PF + VFs), so
//! the allocator never hands out a GPU twice nor more functions of a NIC than exist, and
//! the VF is chosen at prepare. Publishing one pair per GPU×VF instead would multiply
//! the pairs by the VF count and make an unsatisfiable claim search far longer (seconds
//! instead of a fraction of one, measured on kube-scheduler v1.37.2).
//!
//! Where NICs have VFs, a NIC counter above one no longer stops several GPUs from
//! taking the same NIC, so nothing prunes the allocator's search: by default
//! ([`PairsPerGpu::Auto`]) each GPU then gets its best pair plus one alternative, the
//! alternatives forming a ring over the NICs of its NUMA node. On mi300x-8 with 4 VFs
//! per PF that is 16 pairs instead of 32, and the upstream allocator refuses 9 pairs in
//! about 90 ms instead of 7.3 s.
//!
//! # Example: from a machine to its slices
//!
//! Discover a built-in machine profile, plan the best joint GPU+NIC allocation on it,
//! and find that allocation among the ResourceSlices the node publishes: each chosen
//! GPU↔NIC pair is a published pair device of the same class.
//!
//! ```
//! use topoalign_discover::{Source, load};
//! use topoalign_dra::{PublishOptions, attr, pair_device, resource_slices};
//! use topoalign_plan::{NicCount, Planner, Request, Usage};
//! use topoalign_topology::PcieClass;
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let discovery = load(&Source::Profile("mi300x-8".into()))?;
//! let topo = &discovery.topology;
//!
//! // Two GPUs, each with its own NIC, on an idle node.
//! let plan = Planner::new(topo).plan(&Request::new(2, NicCount::PerGpu(1)), &Usage::default())?;
//! assert_eq!(plan.pairs.len(), 2);
//! // Every MI300X has a NIC under its own PCIe switch: the best pairs are PIX.
//! assert!(plan.pairs.iter().all(|p| p.class == PcieClass::Pix));
//!
//! let slices = resource_slices(topo, "node-a", &PublishOptions::default())?;
//! let devices: Vec<_> = (slices.iter())
//!     .flat_map(|s| s.spec.devices.iter().flatten())
//!     .collect();
//! let pairs: Vec<_> = devices.iter().filter(|d| d.name.starts_with("pair-")).collect();
//! // 8 GPUs, 4 VFs per NIC: each GPU gets its best pair and one alternative.
//! assert_eq!(pairs.len(), 16);
//! for chosen in &plan.pairs {
//!     let name = pair_device(chosen.gpu, chosen.nic);
//!     let device = (pairs.iter().find(|d| d.name == name)).ok_or("pair not published")?;
//!     let class = (device.attributes.as_ref())
//!         .and_then(|a| a.get(attr::CLASS))
//!         .and_then(|v| v.string.as_deref());
//!     assert_eq!(class, Some(chosen.class.as_str()));
//! }
//! # Ok(())
//! # }
//! ```

mod allocator;
/// Public as a namespace: the attribute names topoalign publishes (`attr::GPU`,
/// `attr::RAIL`, ...), a namespace of constants read as such by the driver, gang and the
/// extender.
pub mod attr;
mod capacity;
mod cdi;
mod cdi_netdev;
mod cdi_vendor;
mod cel;
#[cfg(feature = "clap")]
mod claim_args;
mod claim_text;
mod claims;
mod classes;
mod cpus;
mod entries;
mod error;
mod explain;
mod explain_all;
mod explain_cpus;
mod explain_node;
mod explain_pod;
mod inventory;
mod ladder;
mod ladder_report;
mod limits;
mod mig;
mod mig_claims;
mod mig_dynamic;
mod mig_geometry;
mod mixed;
mod names;
mod prepare;
mod rails;
mod slice_file;
mod slice_topology;
mod slices;
mod vendor;

pub use allocator::{DeviceId, Found, NodeDevices, Outcome, PreparedClaim, SharedHeld, first_fit};
pub use capacity::milli_text;
pub use cdi::{
    CdiDevice, CdiPlan, CdiSpec, ComposedCdi, ContainerEdits, DeviceNode, NetDevice, cdi_device_id,
    compose_cdi,
};
pub use cdi::{ENV_GPU_NIC_MAP, ENV_NCCL_IB_HCA, ENV_NVIDIA_VISIBLE_DEVICES, cdi_file_name};
pub use cdi_netdev::{LINK_LAYER_ETHERNET, add_roce_net_devices};
pub use cdi_vendor::{AMD_KIND, NVIDIA_GENERATE, NVIDIA_KIND, VendorDevice, node_number};
pub use cdi_vendor::{
    VendorCdiError, VendorSpec, parse_vendor_spec, vendor_gpu_ids, vendor_mig_ids,
};
pub use cel::Selector;
#[cfg(feature = "clap")]
pub use claim_args::ClaimArgs;
pub use claim_text::{claim_object, claim_table};
pub use claims::{ClaimShape, ClaimSpec, claim_spec, claim_template, resource_claim};
pub use classes::{
    CLASS_GPU, CLASS_MIG, CLASS_MIG_PAIR, CLASS_NIC, CLASS_PAIR, ExtendedResources,
    class_for_resource, device_classes, device_classes_with, mig_device_classes,
    mig_device_classes_with, mig_profile_class, mig_profile_class_name,
};
pub use cpus::{
    CPU_CAPACITY, CPU_CLASS, CPU_DRIVER, CpuClaim, CpuMode, CpuRelease, CpuShape, cpu_device_class,
    cpu_slices, pairs_fit_one_numa_node,
};
pub use entries::{GpuEntry, NicFunction, PairEntry, PhysicalNic};
pub use error::{AllocationError, DraError};
pub use explain::{Explanation, explain};
pub use explain::{mark_usage, resolve_with};
pub use explain_all::{
    AlignmentSummary, ClusterAlignment, ClusterInput, PodAlignment, alignment_of_claims,
    explain_all,
};
pub use explain_cpus::CpuShare;
pub use explain_node::{SimulatedNode, explain_mixed, own_request};
pub use explain_pod::{
    ClaimReport, Kind, PairReport, Pairs, PodExplanation, PodInput, claim_refs, explain_pod,
};
pub use inventory::{CounterUse, DeviceKind, DeviceRef, Inventory, PairsPerGpu, PublishOptions};
pub use ladder::{LadderSpec, Rung, ladder_claim};
pub use ladder_report::{
    LadderInput, LadderPair, NodeLadder, held_devices, ladder_nodes, ladder_report,
};
pub use limits::{
    MAX_ATTRIBUTES_AND_CAPACITIES, MAX_CONSUMES_COUNTERS_PER_DEVICE, MAX_COUNTER_SETS_PER_SLICE,
    MAX_COUNTERS_PER_SET, MAX_DEVICES_PER_CLAIM, MAX_DEVICES_PER_SLICE,
    MAX_DEVICES_PER_SLICE_WITH_COUNTERS, MAX_STRING_ATTRIBUTE,
};
pub use mig::{MigEntry, MigGpuLayout, MigInstance, MigJoinError, MigPairEntry, NodeMig};
pub use mig_claims::{MigClaimSpec, mig_claim_spec};
pub use mig_geometry::MigGeometryError;
pub use mixed::{MixedClaim, MixedSpec, MixedStrategy, mixed_claim, stand_in_classes};
pub use names::{dns_label_problem, pair_device};
pub use prepare::{
    AllocatedDevice, Holdings, PreparedDevice, PreparedGpu, PreparedMig, prepare_allocation,
};
pub use rails::{pin_rails, pin_rails_per_rail};
pub use slice_file::{SliceFile, SliceFileError, parse_slice_file};
pub use slice_topology::{SliceTopology, slice_topology, topology_of};
pub use slices::{counter_sets, resource_slices, slices_for};
pub use vendor::{
    AMD_GPU_DRIVER, DRANET_DRIVER, DeviceRole, ForeignDevice, GpuForm, NVIDIA_GPU_DRIVER,
    SRIOV_DRIVER, node_devices, rdma_selector,
};

/// The driver's name, a DNS subdomain the project uses as its own domain.
pub const DRIVER_NAME: &str = "topoalign.dev";
