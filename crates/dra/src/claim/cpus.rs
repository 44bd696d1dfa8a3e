//! CPUs on the DRA path, from kubernetes-sigs/dra-driver-cpu (driver `dra.cpu`).
//!
//! The kubelet takes no Topology Manager hints from DRA devices, so a pod whose GPUs come
//! from claims gets its exclusive CPUs from the static CPU manager wherever it likes. The
//! upstream answer is CPUs as DRA devices, aligned with the pairs by `matchAttribute` on
//! the NUMA node. What dra-driver-cpu publishes, read from its source:
//! - v0.2.0 (2026-06-22, `pkg/driver/dra_hooks.go`): `dra.cpu/numaNodeID` and the
//!   compatibility key `dra.net/numaNode`, no standard NUMA attribute;
//! - main at de98098 (2026-08-20, `pkg/device/builder.go`, `attributes.go`): also the
//!   standard `resource.kubernetes.io/numaNode` (the other two kept, deprecated).
//!
//! Both in two device modes: `grouped` (the default; grouped by NUMA node, one device
//! `cpudevnuma<NNN>` per node with `allowMultipleAllocations` and the consumable capacity
//! `dra.cpu/cpu`, the node's CPUs; attributes `socketID`, `smtEnabled`, `numCPUs`) and
//! `individual` (one device `cpudev<NNN>` per CPU; `cpuID`, `coreID`, `coreType`,
//! `cacheL3ID`, `socketID`, `smtEnabled`). Its chart installs the DeviceClass `dra.cpu`
//! (`device.driver == "dra.cpu"`). Its prepare takes the CPUs of every result of a claim
//! (grouped: `consumedCapacity` CPUs from the result's NUMA node), and it requires the
//! kubelet's CPU manager off (`cpuManagerPolicy: none`, docs/user/configuration.md).
//!
//! Here: [`CpuClaim`] (what `claims --cpus` adds to a claim) and [`cpu_slices`] (the
//! slices the driver would publish for a topology: a stand-in for `claims --explain`,
//! `plan` and the tests).

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

use k8s_openapi::api::resource::v1::{
    CapacityRequirements, Device, DeviceAttribute, DeviceCapacity, DeviceClass, DeviceRequest,
    ExactDeviceRequest, ResourcePool, ResourceSlice, ResourceSliceSpec,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use topoalign_topology::Topology;

use crate::limits::MAX_DEVICES_PER_SLICE;
use crate::{DraError, attr, publish::names};

/// dra-driver-cpu's driver name.
pub const CPU_DRIVER: &str = "dra.cpu";
/// The DeviceClass its chart installs.
pub const CPU_CLASS: &str = "dra.cpu";
/// The consumable capacity of a grouped device: its CPUs.
pub const CPU_CAPACITY: &str = "dra.cpu/cpu";
/// dra-driver-cpu's own NUMA attribute.
pub(crate) const CPU_NUMA_NODE_ID: &str = "dra.cpu/numaNodeID";
/// The CPU's socket.
pub(crate) const CPU_SOCKET_ID: &str = "dra.cpu/socketID";
/// A grouped device's CPUs.
pub(crate) const CPU_NUM_CPUS: &str = "dra.cpu/numCPUs";

/// How dra-driver-cpu publishes CPUs (`--cpu-device-mode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum CpuMode {
    /// One device per NUMA node with a consumable `dra.cpu/cpu` capacity (its default).
    #[default]
    Grouped,
    /// One device per CPU (deprecated upstream, still published).
    Individual,
}

impl FromStr for CpuMode {
    type Err = DraError;
    fn from_str(s: &str) -> Result<CpuMode, DraError> {
        match s {
            "grouped" => Ok(CpuMode::Grouped),
            "individual" => Ok(CpuMode::Individual),
            other => Err(DraError::BadClaim(format!(
                "CPU device mode {other:?}: expected grouped (dra-driver-cpu's default, one device per NUMA node) or individual (one device per CPU)"
            ))),
        }
    }
}

impl fmt::Display for CpuMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            CpuMode::Grouped => "grouped",
            CpuMode::Individual => "individual",
        })
    }
}

/// Which release of dra-driver-cpu publishes the slices: which NUMA keys they carry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum CpuRelease {
    /// v0.2.0: `dra.cpu/numaNodeID` and `dra.net/numaNode` only.
    V0_2,
    /// main (de98098): the standard `resource.kubernetes.io/numaNode` too.
    #[default]
    Main,
}

/// How a claim's CPUs are tied to its GPUs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum CpuShape {
    /// Every GPU's CPUs on its own NUMA node: one CPU request per pair, each matched
    /// with its pair; the pairs may span NUMA nodes.
    #[default]
    PerGpu,
    /// All pairs and all CPUs on one NUMA node: one CPU request matched with every pair.
    OneNode,
}

impl FromStr for CpuShape {
    type Err = DraError;
    fn from_str(s: &str) -> Result<CpuShape, DraError> {
        match s {
            "per-gpu" => Ok(CpuShape::PerGpu),
            "one-node" => Ok(CpuShape::OneNode),
            other => Err(DraError::BadClaim(format!(
                "CPU shape {other:?}: expected per-gpu (each GPU's CPUs on its NUMA node) or one-node (every pair and CPU on one NUMA node)"
            ))),
        }
    }
}

/// The CPUs a claim asks of dra-driver-cpu beside its GPUs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CpuClaim {
    /// CPUs for the pod in all (`--cpus`).
    pub count: u32,
    /// The CPU driver's DeviceClass (`--cpu-class`, default [`CPU_CLASS`]).
    pub class: String,
    /// The driver's device mode on the nodes.
    pub mode: CpuMode,
    /// The NUMA attribute both drivers publish, matched across GPU and CPU requests:
    /// the standard one, or `dra.net/numaNode` for dra-driver-cpu v0.2.0.
    pub numa_attribute: String,
    /// How the CPUs are tied to the GPUs.
    pub shape: CpuShape,
}

impl CpuClaim {
    /// `count` CPUs of the default class in grouped mode, matched on the standard NUMA
    /// attribute, one request per GPU.
    pub fn new(count: u32) -> CpuClaim {
        CpuClaim {
            count,
            class: CPU_CLASS.to_string(),
            mode: CpuMode::Grouped,
            numa_attribute: attr::NUMA_NODE_STD.to_string(),
            shape: CpuShape::PerGpu,
        }
    }

    /// The CPUs each of `gpus` GPUs gets: `count` split as evenly as it goes, the first
    /// GPUs one more. Refused when a GPU would get none, or a share asks more devices of
    /// individual mode than a claim holds.
    pub fn shares(&self, gpus: u32) -> Result<Vec<u32>, DraError> {
        if gpus == 0 {
            return Ok(Vec::new());
        }
        if self.count < gpus && self.shape == CpuShape::PerGpu {
            return Err(DraError::BadClaim(format!(
                "--cpus {}: fewer CPUs than the {gpus} GPUs, whose every one gets CPUs of its own NUMA node; ask at least {gpus}",
                self.count
            )));
        }
        Ok(match self.shape {
            CpuShape::OneNode => vec![self.count],
            CpuShape::PerGpu => (0..gpus)
                .map(|i| self.count / gpus + u32::from(i < self.count % gpus))
                .collect(),
        })
    }

    /// A request for `cpus` CPUs named `name`: grouped, one device with `cpus` of its
    /// `dra.cpu/cpu` capacity; individual, `cpus` devices.
    pub(crate) fn request(&self, name: &str, cpus: u32) -> DeviceRequest {
        let (count, capacity) = match self.mode {
            CpuMode::Grouped => (
                1,
                Some(CapacityRequirements {
                    requests: Some(BTreeMap::from([(
                        CPU_CAPACITY.to_string(),
                        Quantity(cpus.to_string()),
                    )])),
                }),
            ),
            CpuMode::Individual => (cpus, None),
        };
        DeviceRequest {
            name: name.to_string(),
            exactly: Some(ExactDeviceRequest {
                device_class_name: self.class.clone(),
                count: Some(i64::from(count)),
                allocation_mode: Some("ExactCount".into()),
                capacity,
                ..Default::default()
            }),
            first_available: None,
        }
    }

    /// Checks the class name and the NUMA attribute.
    pub(crate) fn check(&self) -> Result<(), DraError> {
        if self.count == 0 {
            return Err(DraError::BadClaim(
                "--cpus must be at least 1 (leave it out for a claim without CPUs)".into(),
            ));
        }
        if let Some(why) = names::dns_subdomain_problem(&self.class) {
            return Err(DraError::BadClaim(format!(
                "--cpu-class {:?}: {why}",
                self.class
            )));
        }
        if !self.numa_attribute.contains('/') {
            return Err(DraError::BadClaim(format!(
                "--cpu-numa-attribute {:?}: expected a qualified attribute name ({} or {})",
                self.numa_attribute,
                attr::NUMA_NODE_STD,
                attr::NUMA_NODE_COMPAT
            )));
        }
        Ok(())
    }
}

/// Whether `pairs` GPUs, each with a NIC of its own NUMA node, fit on one NUMA node of
/// `topo` (what `--cpu-shape auto` asks of a topology).
pub fn pairs_fit_one_numa_node(topo: &Topology, pairs: u32) -> bool {
    let numa_of = |pci: usize| topo.pci[pci].numa_node;
    topo.numa.iter().any(|n| {
        let has_nic = topo.nics.iter().any(|x| numa_of(x.pci) == Some(n.id));
        let gpus = topo
            .gpus
            .iter()
            .filter(|g| numa_of(g.pci) == Some(n.id))
            .count();
        has_nic && gpus >= pairs as usize
    })
}

/// The DeviceClass dra-driver-cpu's chart installs, named `name`: every device of the
/// driver.
pub fn cpu_device_class(name: &str) -> DeviceClass {
    crate::publish::driver_class(name, CPU_DRIVER)
}

fn int(v: impl Into<i64>) -> DeviceAttribute {
    DeviceAttribute {
        int: Some(v.into()),
        ..Default::default()
    }
}

/// The NUMA keys of a release, on a device of node `numa`.
fn numa_attrs(a: &mut BTreeMap<String, DeviceAttribute>, numa: u32, release: CpuRelease) {
    if release == CpuRelease::Main {
        a.insert(attr::NUMA_NODE_STD.into(), int(numa));
    }
    a.insert(CPU_NUMA_NODE_ID.into(), int(numa));
    a.insert(attr::NUMA_NODE_COMPAT.into(), int(numa));
}

/// What an individual CPU device carries besides its NUMA keys.
fn individual_attrs(cpu: u32, socket: u32, numa: u32) -> BTreeMap<String, DeviceAttribute> {
    BTreeMap::from([
        (CPU_SOCKET_ID.to_string(), int(socket)),
        ("dra.cpu/cpuID".to_string(), int(cpu)),
        ("dra.cpu/coreID".to_string(), int(cpu)),
        ("dra.cpu/cacheL3ID".to_string(), int(numa)),
        (
            "dra.cpu/coreType".to_string(),
            DeviceAttribute {
                string: Some("standard".into()),
                ..Default::default()
            },
        ),
        ("dra.cpu/smtEnabled".to_string(), no_smt()),
    ])
}

fn no_smt() -> DeviceAttribute {
    DeviceAttribute {
        bool: Some(false),
        ..Default::default()
    }
}

/// One grouped device: a NUMA node's CPUs as consumable capacity.
fn grouped_device(numa: u32, socket: u32, cpus: usize, release: CpuRelease) -> Device {
    let cpus = cpus as i64;
    let mut a = BTreeMap::from([
        (CPU_SOCKET_ID.to_string(), int(socket)),
        ("dra.cpu/smtEnabled".to_string(), no_smt()),
        (CPU_NUM_CPUS.to_string(), int(cpus)),
    ]);
    numa_attrs(&mut a, numa, release);
    Device {
        name: format!("cpudevnuma{numa:03}"),
        attributes: Some(a),
        capacity: Some(BTreeMap::from([(
            CPU_CAPACITY.to_string(),
            DeviceCapacity {
                value: Quantity(cpus.to_string()),
                request_policy: None,
            },
        )])),
        allow_multiple_allocations: Some(true),
        ..Default::default()
    }
}

/// The ResourceSlices dra-driver-cpu (`release`, `mode`, grouped by NUMA node) would
/// publish for `topo`'s CPUs on node `node`, none reserved: NUMA nodes without CPUs
/// (a GPU's memory node) have no device. Sibling threads are unknown to a topology, so
/// individual devices follow CPU ids (the driver orders them by core, siblings
/// together), `smtEnabled` is false and `coreID` is the CPU id.
pub fn cpu_slices(
    topo: &Topology,
    node: &str,
    mode: CpuMode,
    release: CpuRelease,
) -> Result<Vec<ResourceSlice>, DraError> {
    if let Some(why) = names::dns_subdomain_problem(node) {
        return Err(DraError::BadNodeName {
            name: node.into(),
            why,
        });
    }
    let nodes = topo.numa.iter().filter(|n| !n.cpus.is_empty());
    let devices: Vec<Device> = match mode {
        CpuMode::Grouped => nodes
            .map(|n| grouped_device(n.id, n.socket.unwrap_or(n.id), n.cpus.len(), release))
            .collect(),
        CpuMode::Individual => {
            let mut cpus: Vec<(u32, BTreeMap<String, DeviceAttribute>)> = Vec::new();
            for n in nodes {
                for &cpu in n.cpus.ids() {
                    let mut a = individual_attrs(cpu, n.socket.unwrap_or(n.id), n.id);
                    numa_attrs(&mut a, n.id, release);
                    cpus.push((cpu, a));
                }
            }
            cpus.sort_by_key(|(cpu, _)| *cpu);
            (cpus.into_iter().enumerate())
                .map(|(i, (_, a))| Device {
                    name: format!("cpudev{i:03}"),
                    attributes: Some(a),
                    ..Default::default()
                })
                .collect()
        }
    };
    let chunks: Vec<&[Device]> = devices.chunks(MAX_DEVICES_PER_SLICE).collect();
    let count = chunks.len() as i64;
    Ok(chunks
        .into_iter()
        .enumerate()
        .map(|(i, chunk)| ResourceSlice {
            metadata: ObjectMeta {
                name: Some(format!("{node}-dra-cpu-{i}")),
                ..Default::default()
            },
            spec: ResourceSliceSpec {
                driver: CPU_DRIVER.into(),
                node_name: Some(node.into()),
                pool: ResourcePool {
                    name: node.into(),
                    generation: 1,
                    resource_slice_count: count,
                },
                devices: Some(chunk.to_vec()),
                ..Default::default()
            },
        })
        .collect())
}
