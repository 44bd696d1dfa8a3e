//! A node's pool as `resource.k8s.io/v1` ResourceSlices: counter slices, then device
//! slices (pairs best first, plain GPUs, plain NICs), split within the API limits.

use std::collections::BTreeMap;

use k8s_openapi::api::resource::v1::{
    Counter, CounterSet, Device, DeviceAttribute, DeviceCapacity, DeviceCounterConsumption,
    ResourcePool, ResourceSlice, ResourceSliceSpec,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use topoalign_topology::Topology;

use crate::limits::{
    MAX_ATTRIBUTES_AND_CAPACITIES, MAX_CONSUMES_COUNTERS_PER_DEVICE, MAX_COUNTER_SETS_PER_SLICE,
    MAX_DEVICES_PER_SLICE_WITH_COUNTERS, MAX_STRING_ATTRIBUTE,
};
use crate::publish::entries::{GpuEntry, PhysicalNic};
use crate::publish::inventory::{DeviceRef, Inventory, PublishOptions};
use crate::publish::mig::MigEntry;
use crate::{DRIVER_NAME, DraError, attr, publish::names};

/// The label every slice carries so that a driver can list its own:
/// `app.kubernetes.io/managed-by: topoalign`.
pub(crate) const MANAGED_BY_LABEL: (&str, &str) = ("app.kubernetes.io/managed-by", "topoalign");

/// The slices of one node's pool. The pool is named after the node; every slice names
/// the node (`spec.nodeName`), carries `generation` from `opts` and the total slice
/// count. Counter sets come first in slices of their own (a slice holds either counter
/// sets or devices), then devices 64 per slice, in [`Inventory::devices`] order. Slice
/// names are `<node>-topoalign-dev-counters-<i>` and `<node>-topoalign-dev-devices-<i>`.
pub fn resource_slices(
    topo: &Topology,
    node_name: &str,
    opts: &PublishOptions,
) -> Result<Vec<ResourceSlice>, DraError> {
    for g in &opts.mig.gpus {
        if topo.gpu_index(g.bdf).is_none() {
            return Err(DraError::Mig(
                crate::publish::mig::MigJoinError::NotInTopology { bdf: g.bdf },
            ));
        }
    }
    let inv = Inventory::new(topo, opts);
    slices_for(&inv, node_name, opts.generation)
}

/// [`resource_slices`] from an inventory already built.
pub fn slices_for(
    inv: &Inventory,
    node_name: &str,
    generation: i64,
) -> Result<Vec<ResourceSlice>, DraError> {
    if let Some(why) = names::dns_subdomain_problem(node_name) {
        return Err(DraError::BadNodeName {
            name: node_name.into(),
            why,
        });
    }
    let prefix = format!("{node_name}-{}", DRIVER_NAME.replace('.', "-"));
    if prefix.len() + "-counters-000".len() > 253 {
        return Err(DraError::BadNodeName {
            name: node_name.into(),
            why: "too long to derive ResourceSlice names from (at most 239 characters)".into(),
        });
    }

    let sets = counter_sets(inv);
    let devices: Vec<Device> = inv.devices().iter().map(device).collect::<Result<_, _>>()?;

    let mut specs: Vec<(String, ResourceSliceSpec)> = Vec::new();
    for (i, chunk) in sets.chunks(MAX_COUNTER_SETS_PER_SLICE).enumerate() {
        specs.push((
            format!("{prefix}-counters-{i}"),
            ResourceSliceSpec {
                shared_counters: Some(chunk.to_vec()),
                ..Default::default()
            },
        ));
    }
    for (i, chunk) in devices
        .chunks(MAX_DEVICES_PER_SLICE_WITH_COUNTERS)
        .enumerate()
    {
        specs.push((
            format!("{prefix}-devices-{i}"),
            ResourceSliceSpec {
                devices: Some(chunk.to_vec()),
                ..Default::default()
            },
        ));
    }
    let count = specs.len() as i64;
    Ok(specs
        .into_iter()
        .map(|(name, mut spec)| {
            spec.driver = DRIVER_NAME.to_string();
            spec.node_name = Some(node_name.to_string());
            spec.pool = ResourcePool {
                name: node_name.to_string(),
                generation,
                resource_slice_count: count,
            };
            ResourceSlice {
                metadata: ObjectMeta {
                    name: Some(name),
                    labels: Some(BTreeMap::from([(
                        MANAGED_BY_LABEL.0.to_string(),
                        MANAGED_BY_LABEL.1.to_string(),
                    )])),
                    ..Default::default()
                },
                spec,
            }
        })
        .collect())
}

/// The counter sets: one counter per GPU (value 1), one per physical NIC (value = its
/// number of functions), 32 per set, GPU sets first; a MIG-enabled GPU has a set of its
/// own instead, in GPU order: `memory-slice-0..7` (1 each) and `sm-slices` (7).
pub fn counter_sets(inv: &Inventory) -> Vec<CounterSet> {
    let mut sets: BTreeMap<String, BTreeMap<String, Counter>> = BTreeMap::new();
    let mut order: Vec<String> = Vec::new();
    let mut put = |set: &str, name: &str, value: usize| {
        if !sets.contains_key(set) {
            order.push(set.to_string());
        }
        sets.entry(set.to_string()).or_default().insert(
            name.to_string(),
            Counter {
                value: Quantity(value.to_string()),
            },
        );
    };
    for g in &inv.gpus {
        if g.mig_enabled {
            for i in 0..crate::publish::mig::MEMORY_SLICES {
                put(
                    &g.counter_set,
                    &crate::publish::mig::memory_slice_counter(i),
                    1,
                );
            }
            put(
                &g.counter_set,
                crate::publish::mig::COUNTER_SM_SLICES,
                usize::from(crate::publish::mig::SM_SLICES),
            );
        } else {
            put(&g.counter_set, &g.name, 1);
        }
    }
    for n in &inv.nics {
        put(&n.counter_set, &n.name, n.functions.len());
    }
    order
        .into_iter()
        .filter_map(|name| {
            sets.remove(&name)
                .map(|counters| CounterSet { name, counters })
        })
        .collect()
}

/// Attribute builder that refuses values the API would refuse.
struct Attrs {
    device: String,
    map: BTreeMap<String, DeviceAttribute>,
}

impl Attrs {
    fn new(device: &str) -> Self {
        Attrs {
            device: device.to_string(),
            map: BTreeMap::new(),
        }
    }
    fn string(&mut self, k: &str, v: impl Into<String>) -> Result<(), DraError> {
        let v = v.into();
        if v.len() > MAX_STRING_ATTRIBUTE {
            return Err(DraError::TooLarge(format!(
                "device {}: attribute {k} value {v:?} is longer than {MAX_STRING_ATTRIBUTE} characters",
                self.device
            )));
        }
        self.map.insert(
            k.to_string(),
            DeviceAttribute {
                string: Some(v),
                ..Default::default()
            },
        );
        Ok(())
    }
    fn opt_string(&mut self, k: &str, v: Option<impl Into<String>>) -> Result<(), DraError> {
        match v {
            Some(v) => self.string(k, v),
            None => Ok(()),
        }
    }
    fn int(&mut self, k: &str, v: impl Into<i64>) {
        self.map.insert(
            k.to_string(),
            DeviceAttribute {
                int: Some(v.into()),
                ..Default::default()
            },
        );
    }
    fn opt_int(&mut self, k: &str, v: Option<u32>) {
        if let Some(v) = v {
            self.int(k, v);
        }
    }
    /// The NUMA node a device sits on, under the standard and the compatibility key;
    /// none for a device the kernel puts on no node, or a pair across two nodes.
    fn numa(&mut self, v: Option<u32>) {
        self.opt_int(attr::NUMA_NODE_STD, v);
        self.opt_int(attr::NUMA_NODE_COMPAT, v);
    }
    fn bool(&mut self, k: &str, v: bool) {
        self.map.insert(
            k.to_string(),
            DeviceAttribute {
                bool: Some(v),
                ..Default::default()
            },
        );
    }
}

fn gpu_attrs(a: &mut Attrs, g: &GpuEntry) -> Result<(), DraError> {
    if g.mig_enabled {
        a.bool(attr::MIG_ENABLED, true);
    }
    a.string(attr::VENDOR, g.vendor.to_string())?;
    a.opt_string(attr::MODEL, g.model.clone())?;
    a.opt_int(attr::NUMA_NODE, g.numa_node);
    a.opt_int(attr::SOCKET, g.socket);
    a.opt_string(attr::PCIE_SWITCH, g.pcie_switch.map(|b| b.to_string()))?;
    a.opt_int(attr::ALIGNMENT_GROUP, g.alignment_group);
    a.opt_int(attr::FABRIC_DOMAIN, g.fabric_domain);
    a.string(attr::GPU, g.name.clone())?;
    Ok(())
}

fn nic_attrs(a: &mut Attrs, n: &PhysicalNic) -> Result<(), DraError> {
    a.string(attr::NIC, n.name.clone())?;
    a.bool(attr::RDMA, n.rdma_device.is_some());
    a.opt_string(attr::RDMA_DEVICE, n.rdma_device.clone())?;
    a.bool(attr::IB_ONLY, n.ib_only);
    a.opt_string(attr::LINK_LAYER, n.link_layer.clone())?;
    a.opt_int(attr::RAIL, n.rail);
    Ok(())
}

/// A MIG instance's own attributes, on MIG devices and MIG pairs.
fn mig_attrs(a: &mut Attrs, m: &MigEntry, g: &GpuEntry) -> Result<(), DraError> {
    a.string(attr::PROFILE, m.instance.profile.clone())?;
    a.opt_string(attr::PARENT_UUID, g.uuid.clone())?;
    a.opt_string(attr::UUID, m.instance.uuid.clone())?;
    a.int(attr::MIG_START, m.instance.start);
    a.int(attr::MEMORY_SLICES, m.instance.size);
    Ok(())
}

fn memory(g: &GpuEntry) -> Option<Quantity> {
    g.memory_mib.map(|m| Quantity(format!("{m}Mi")))
}

fn bandwidth(n: &PhysicalNic) -> Option<Quantity> {
    n.bandwidth_bps.map(|b| {
        Quantity(if b % 1_000_000_000 == 0 {
            format!("{}G", b / 1_000_000_000)
        } else if b % 1_000_000 == 0 {
            format!("{}M", b / 1_000_000)
        } else {
            b.to_string()
        })
    })
}

/// The NUMA node a GPU and a NIC share, if they share one: a pair across two nodes
/// sits on none (a claim aligning CPUs by NUMA node must never take it).
fn same_node(gpu: Option<u32>, nic: Option<u32>) -> Option<u32> {
    gpu.filter(|g| Some(*g) == nic)
}

/// One published device as the API object.
pub(crate) fn device(d: &DeviceRef<'_>) -> Result<Device, DraError> {
    let mut a = Attrs::new(d.name());
    let mut cap: BTreeMap<String, DeviceCapacity> = BTreeMap::new();
    let mut put_cap = |k: &str, q: Option<Quantity>| {
        if let Some(value) = q {
            cap.insert(
                k.to_string(),
                DeviceCapacity {
                    value,
                    request_policy: None,
                },
            );
        }
    };
    a.string(attr::TYPE, d.kind().as_str())?;
    match d {
        DeviceRef::Gpu(g) => {
            gpu_attrs(&mut a, g)?;
            a.string(attr::PCI_BUS_ID, g.bdf.to_string())?;
            a.opt_string(attr::PCIE_ROOT, g.pcie_root.clone())?;
            a.numa(g.numa_node);
            put_cap(attr::CAP_MEMORY, memory(g));
        }
        DeviceRef::Nic(n) => {
            nic_attrs(&mut a, n)?;
            a.string(attr::VENDOR, n.vendor.clone())?;
            a.opt_int(attr::NUMA_NODE, n.numa_node);
            a.opt_int(attr::SOCKET, n.socket);
            a.opt_string(attr::PCIE_SWITCH, n.pcie_switch.map(|b| b.to_string()))?;
            a.opt_int(attr::ALIGNMENT_GROUP, n.alignment_group);
            a.opt_string(attr::NETDEV, n.netdev.clone())?;
            a.int(attr::PF_VF_COUNT, n.functions.len() as i64);
            a.string(attr::PCI_BUS_ID, n.bdf.to_string())?;
            a.opt_string(attr::PCIE_ROOT, n.pcie_root.clone())?;
            a.numa(n.numa_node);
            put_cap(attr::CAP_BANDWIDTH, bandwidth(n));
        }
        DeviceRef::Pair { pair, gpu, nic } => {
            // A pair sits where its GPU sits (numaNode, socket, switch, groups).
            gpu_attrs(&mut a, gpu)?;
            nic_attrs(&mut a, nic)?;
            a.string(attr::CLASS, pair.path.class.as_str())?;
            a.int(attr::RANK, pair.path.class.rank());
            a.bool(attr::GDR, pair.path.gdr);
            a.string(attr::GPU_PCI_BUS_ID, gpu.bdf.to_string())?;
            a.string(attr::NIC_PCI_BUS_ID, nic.bdf.to_string())?;
            a.numa(same_node(gpu.numa_node, nic.numa_node));
            put_cap(attr::CAP_MEMORY, memory(gpu));
            put_cap(attr::CAP_BANDWIDTH, bandwidth(nic));
        }
        DeviceRef::Mig { mig, gpu } => {
            // An instance sits where its parent sits: the parent's PCI attributes.
            gpu_attrs(&mut a, gpu)?;
            mig_attrs(&mut a, mig, gpu)?;
            a.string(attr::PCI_BUS_ID, gpu.bdf.to_string())?;
            a.opt_string(attr::PCIE_ROOT, gpu.pcie_root.clone())?;
            a.numa(gpu.numa_node);
        }
        DeviceRef::MigPair {
            mig,
            parent_pair,
            gpu,
            nic,
            ..
        } => {
            gpu_attrs(&mut a, gpu)?;
            nic_attrs(&mut a, nic)?;
            mig_attrs(&mut a, mig, gpu)?;
            a.string(attr::CLASS, parent_pair.path.class.as_str())?;
            a.int(attr::RANK, parent_pair.path.class.rank());
            a.bool(attr::GDR, parent_pair.path.gdr);
            a.string(attr::GPU_PCI_BUS_ID, gpu.bdf.to_string())?;
            a.string(attr::NIC_PCI_BUS_ID, nic.bdf.to_string())?;
            a.numa(same_node(gpu.numa_node, nic.numa_node));
            put_cap(attr::CAP_BANDWIDTH, bandwidth(nic));
        }
    }
    if a.map.len() + cap.len() > MAX_ATTRIBUTES_AND_CAPACITIES {
        return Err(DraError::TooLarge(format!(
            "device {} would carry {} attributes and capacities, the API allows {MAX_ATTRIBUTES_AND_CAPACITIES}",
            d.name(),
            a.map.len() + cap.len()
        )));
    }
    // One consumesCounters entry per counter set, at most two (GPU set, NIC set).
    let mut consumes: Vec<DeviceCounterConsumption> = Vec::new();
    for c in d.counters() {
        let counter = Counter {
            value: Quantity(c.amount.to_string()),
        };
        match consumes.iter_mut().find(|e| e.counter_set == c.set) {
            Some(e) => {
                e.counters.insert(c.counter, counter);
            }
            None => consumes.push(DeviceCounterConsumption {
                counter_set: c.set,
                counters: BTreeMap::from([(c.counter, counter)]),
                ..Default::default()
            }),
        }
    }
    if consumes.len() > MAX_CONSUMES_COUNTERS_PER_DEVICE {
        return Err(DraError::TooLarge(format!(
            "device {} would consume counters of {} sets, the API allows {MAX_CONSUMES_COUNTERS_PER_DEVICE}",
            d.name(),
            consumes.len()
        )));
    }
    Ok(Device {
        name: d.name().to_string(),
        attributes: Some(a.map),
        capacity: (!cap.is_empty()).then_some(cap),
        consumes_counters: Some(consumes),
        ..Default::default()
    })
}
