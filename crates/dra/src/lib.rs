//! The pure DRA model of topoalign: a node [`Topology`](topoalign_topology::Topology)
//! as `resource.k8s.io/v1` objects. No I/O here; the publisher (`topoalign driver`), the
//! kubelet plugin and the scheduler extender build on it.
//!
//! Six areas, each a namespace (`topoalign_dra::publish::resource_slices`), one way:
//! `publish` and `alloc` use no other area, `foreign` uses `alloc`, `prepare` uses
//! `publish` and `alloc`, `claim` uses those and `foreign`, `explain` uses them all.
//!
//! - [`publish`]: the node's [`Inventory`](publish::Inventory) (plain GPUs, plain NICs,
//!   GPU+NIC pairs, MIG instances and MIG×NIC pairs) as ResourceSlices with shared
//!   counters, split within the API's [`limits`], and the DeviceClasses that select it.
//! - [`claim`]: the claims and templates a pod asks with ("N GPUs, each with its own
//!   NIC", CPUs, MIG, mixed drivers, ladders).
//! - [`alloc`]: the one model of the stock allocator ([`first_fit`](alloc::first_fit)),
//!   the CEL subset its selectors use and [the default search budget](alloc::DEFAULT_BUDGET).
//! - [`prepare`]: what the kubelet plugin checks at prepare and the CDI spec it writes.
//! - [`explain`]: the allocator's pick beside the planner's optimum, for a claim, a pod,
//!   a cluster.
//! - [`foreign`]: other DRA drivers' devices read from their slices.
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
//! ([`PairsPerGpu::Auto`](publish::PairsPerGpu::Auto)) each GPU then gets its best pair
//! plus one alternative, the alternatives forming a ring over the NICs of its NUMA node. On mi300x-8 with 4 VFs
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
//! use topoalign_dra::{attr, publish::{PublishOptions, pair_device, resource_slices}};
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

/// The stock allocator's model: first fit, CEL selectors, capacities, the search budget.
pub mod alloc;
/// Public as a namespace: the attribute names topoalign publishes (`attr::GPU`,
/// `attr::RAIL`, ...), a namespace of constants read as such by the driver, gang and the
/// extender.
pub mod attr;
/// Claims and templates: pairs, CPUs, MIG, mixed drivers, ladders, their clap flags.
pub mod claim;
mod error;
/// Explanations: the allocator's pick beside the planner's optimum.
pub mod explain;
/// Other DRA drivers' devices, the topology their slices imply, saved slice files.
pub mod foreign;
/// Public as a namespace: the `resource.k8s.io/v1` API's limits (`limits::MAX_DEVICES_PER_SLICE`).
pub mod limits;
/// The kubelet plugin's side: allocation checks at prepare and CDI specs.
pub mod prepare;
/// The node's inventory as ResourceSlices and DeviceClasses, MIG publication, rails.
pub mod publish;

pub use error::{AllocationError, DraError};
pub use publish::{DeviceKind, DeviceRef};

/// The driver's name, a DNS subdomain the project uses as its own domain.
pub const DRIVER_NAME: &str = "topoalign.dev";
