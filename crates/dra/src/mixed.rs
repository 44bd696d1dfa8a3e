//! Claims across two drivers that know nothing of each other (seed 001: GPUs from
//! `gpu.nvidia.com`, NICs from `dra.net`), written from their published ResourceSlices.
//!
//! First choice: one `matchAttribute` per GPU on an attribute both drivers publish
//! (`resource.kubernetes.io/pcieRoot`, then `resource.kubernetes.io/numaNode`), when it
//! can be met on the named node. Otherwise the node's devices are turned into a
//! topology (NUMA node, host bridge, address from the attributes), the planner picks the
//! best GPUs and NICs, and every request is pinned to its device by an attribute unique
//! on the node: what the seed's author wrote by hand, computed.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::resource::v1::{
    CELDeviceSelector, Device, DeviceAttribute, DeviceClaim, DeviceClass, DeviceClassSpec,
    DeviceSelector, ResourceClaimSpec, ResourceSlice,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::Serialize;
use topoalign_plan::{NicCount, Planner, Request, Usage};
use topoalign_topology::parse_root_name;
use topoalign_topology::pci::{class, vendor};
use topoalign_topology::{Bdf, CpuSet, Gpu, GpuVendor, Nic, PciParent, Topology, TopologyBuilder};

use crate::cel::lookup;
use crate::claims::{exactly, match_attr};
use crate::limits::MAX_REQUESTS_PER_CLAIM;
use crate::{DraError, attr};

/// Which drivers and classes to combine.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MixedSpec {
    /// The node the slices are read for.
    pub node: String,
    /// N GPUs.
    pub pairs: u32,
    /// K NICs per GPU.
    pub nics_per_gpu: u32,
    /// The GPU driver (`gpu.nvidia.com`).
    pub gpu_driver: String,
    /// The DeviceClass for its GPUs (`gpu.nvidia.com`).
    pub gpu_class: String,
    /// The NIC driver (`dra.net`).
    pub nic_driver: String,
    /// The DeviceClass for its NICs (`dranet`).
    pub nic_class: String,
}

/// How the claim ties GPUs to NICs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase", tag = "strategy")]
pub enum MixedStrategy {
    /// A `matchAttribute` on this attribute per GPU; works on any node where it can be met.
    MatchAttribute {
        /// The fully qualified attribute.
        attribute: String,
    },
    /// Requests pinned to the planner's devices on one node.
    Pinned {
        /// The node.
        node: String,
        /// (GPU device, NIC devices, class of the pair) per GPU.
        pairs: Vec<(String, Vec<String>, String)>,
    },
}

/// The claim and how it was made.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct MixedClaim {
    /// The claim's device part.
    pub spec: ResourceClaimSpec,
    /// The strategy taken.
    pub strategy: MixedStrategy,
    /// Why the other strategies were not taken.
    pub notes: Vec<String>,
}

impl MixedStrategy {
    /// One line for a person: how the claim ties GPUs to NICs.
    pub fn text(&self) -> String {
        match self {
            MixedStrategy::MatchAttribute { attribute } => {
                format!(
                    "each GPU's NICs match it on {attribute}: the claim works on any node where that holds"
                )
            }
            MixedStrategy::Pinned { node, pairs } => {
                let list: Vec<String> = pairs
                    .iter()
                    .map(|(g, n, c)| format!("{g} + {} ({c})", n.join(" + ")))
                    .collect();
                format!(
                    "pinned to devices of node {node}: {}; it serves one pod at a time, on {node} only (every pod made from a template asks for the same devices): write one claim per node",
                    list.join(", ")
                )
            }
        }
    }
}

/// The DeviceClass for `driver`'s devices when none is named: a class among `classes`
/// (saved beside the slices) whose selector is `device.driver == "<driver>"`, else the
/// name its users have (`dranet.net` for dranet, which ships no DeviceClass), else the
/// driver's name (`gpu.nvidia.com`, as NVIDIA's chart names its class).
#[cfg(feature = "clap")]
pub(crate) fn class_for(driver: &str, classes: &[DeviceClass]) -> String {
    let selects = |c: &&DeviceClass| {
        c.spec
            .as_ref()
            .and_then(|s| s.selectors.as_ref())
            .into_iter()
            .flatten()
            .filter_map(|sel| sel.cel.as_ref())
            .any(|cel| {
                let e: String = cel.expression.split_whitespace().collect();
                e.contains(&format!("device.driver==\"{driver}\""))
                    || e.contains(&format!("device.driver=='{driver}'"))
            })
    };
    if let Some(name) = classes
        .iter()
        .find(selects)
        .and_then(|c| c.metadata.name.clone())
    {
        return name;
    }
    match driver {
        "dra.net" => "dranet.net".to_string(),
        other => other.to_string(),
    }
}

/// One device of a foreign driver on the node.
#[derive(Debug, Clone)]
pub struct ForeignDevice {
    /// Driver.
    pub driver: String,
    /// Device.
    pub device: Device,
}

impl ForeignDevice {
    pub(crate) fn attr(&self, qualified: &str) -> Option<&DeviceAttribute> {
        let (d, n) = qualified.split_once('/')?;
        lookup(self.device.attributes.as_ref()?, &self.driver, d, n)
    }

    pub(crate) fn string(&self, qualified: &str) -> Option<String> {
        let a = self.attr(qualified)?;
        a.string
            .clone()
            .or_else(|| a.int.map(|i| i.to_string()))
            .or_else(|| a.bool.map(|b| b.to_string()))
    }

    /// The PCI address: the standard `pciBusID`, else the driver's own (`pciAddress` as
    /// dranet writes it, `pcieBusID` as NVIDIA's GPU driver writes it, `pciBusID`).
    pub fn bdf(&self) -> Option<Bdf> {
        std::iter::once(attr::PCI_BUS_ID.to_string())
            .chain(
                OWN_PCI_ADDRESS
                    .iter()
                    .map(|a| format!("{}/{a}", self.driver)),
            )
            .find_map(|a| self.string(&a))
            .and_then(|s| s.trim().parse().ok())
    }

    /// The NUMA node: the standard attribute, else the driver's own `numaNode` (dranet),
    /// read as an integer or a decimal string; negative values (the kernel's `-1`) are
    /// no NUMA node.
    pub fn numa(&self) -> Option<u32> {
        std::iter::once(attr::NUMA_NODE_STD.to_string())
            .chain(OWN_NUMA.iter().map(|a| format!("{}/{a}", self.driver)))
            .find_map(|a| self.attr(&a))
            .and_then(|a| a.int.or_else(|| a.string.as_deref()?.trim().parse().ok()))
            .and_then(|i| u32::try_from(i).ok())
    }
}

/// What a device of a foreign driver is to GPU–NIC pairing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum DeviceRole {
    /// A GPU (or a MIG slice of one).
    Gpu,
    /// A network device (an RDMA function, a netdev).
    Nic,
}

/// Driver-domain attributes that make a device a NIC (dranet: `rdma`, `rdmaDevice`,
/// `ifName`, `ibOnly`).
pub(crate) const NIC_MARKS: [&str; 4] = ["rdmaDevice", "rdma", "ifName", "ibOnly"];
/// Driver-domain attributes that make a device a GPU when it is no NIC (NVIDIA's GPU
/// driver: `type` `gpu` or `mig`, `productName`, `uuid`).
pub(crate) const GPU_MARKS: [&str; 2] = ["productName", "uuid"];

impl ForeignDevice {
    /// Whether the device is a GPU or a NIC, from its driver's own attributes
    /// ([`NIC_MARKS`] first, then `type` `gpu`/`mig` or [`GPU_MARKS`]); `None` for
    /// anything else (a channel, an IMEX daemon …).
    pub fn role(&self) -> Option<DeviceRole> {
        let own = |n: &str| self.attr(&format!("{}/{n}", self.driver));
        if NIC_MARKS.iter().any(|n| own(n).is_some()) {
            return Some(DeviceRole::Nic);
        }
        let typed = own("type").and_then(|a| a.string.as_deref());
        if matches!(typed, Some("gpu" | "mig")) || GPU_MARKS.iter().any(|n| own(n).is_some()) {
            return Some(DeviceRole::Gpu);
        }
        None
    }
}

/// The drivers' own names for a device's PCI address (dranet: `pciAddress`; NVIDIA's GPU
/// driver: `pcieBusID`), read after the standard `resource.kubernetes.io/pciBusID`.
pub(crate) const OWN_PCI_ADDRESS: [&str; 3] = ["pciAddress", "pcieBusID", "pciBusID"];
/// The drivers' own names for a device's NUMA node (dranet: `numaNode`), read after the
/// standard `resource.kubernetes.io/numaNode`.
pub(crate) const OWN_NUMA: [&str; 2] = ["numaNode", "numa"];

/// The topology sources that tell the planner what the slices leave out, as flags.
pub(crate) const TOPOLOGY_FLAGS: &str =
    "--profile NAME, --sysfs-root DIR, --from-nvidia-smi FILE or --from-nccl-xml FILE";

/// Why the slices alone cannot tell which NIC is near which GPU: devices with an address
/// but no NUMA node (a planner on such a topology would pair at random and call it
/// optimal). `None` when every GPU and NIC with an address publishes its NUMA node.
pub(crate) fn blind_reason(gpus: &[ForeignDevice], nics: &[ForeignDevice]) -> Option<String> {
    let side = |devs: &[ForeignDevice], what: &str| {
        let placed: Vec<&ForeignDevice> = devs.iter().filter(|d| d.bdf().is_some()).collect();
        let missing: Vec<&str> = placed
            .iter()
            .filter(|d| d.numa().is_none())
            .map(|d| d.device.name.as_str())
            .collect();
        let driver = devs.first().map_or("?", |d| d.driver.as_str());
        (!missing.is_empty()).then(|| {
            format!(
                "{} of {} {what} of {driver} ({}) publish no NUMA node (read: {}, {})",
                missing.len(),
                placed.len(),
                sample(&missing),
                attr::NUMA_NODE_STD,
                OWN_NUMA
                    .iter()
                    .map(|a| format!("{driver}/{a}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        })
    };
    let parts: Vec<String> = [side(gpus, "GPUs"), side(nics, "NICs")]
        .into_iter()
        .flatten()
        .collect();
    (!parts.is_empty()).then(|| parts.join("; "))
}

/// Up to three names, then how many more.
fn sample(names: &[&str]) -> String {
    let head = names.iter().take(3).copied().collect::<Vec<_>>().join(", ");
    match names.len() {
        n if n > 3 => format!("{head} and {} more", n - 3),
        _ => head,
    }
}

/// The devices of `driver` on `node` (highest pool generation only).
pub(crate) fn devices_of(slices: &[ResourceSlice], node: &str, driver: &str) -> Vec<ForeignDevice> {
    pooled_devices_of(slices, node, driver)
        .into_iter()
        .map(|(_, d)| d)
        .collect()
}

/// [`pooled_devices_of`] for every driver that publishes slices for `node`, drivers in
/// name order.
pub fn node_devices(slices: &[ResourceSlice], node: &str) -> Vec<(String, ForeignDevice)> {
    let drivers: BTreeSet<&str> = slices
        .iter()
        .filter(|s| s.spec.node_name.as_deref() == Some(node))
        .map(|s| s.spec.driver.as_str())
        .collect();
    drivers
        .into_iter()
        .flat_map(|driver| pooled_devices_of(slices, node, driver))
        .collect()
}

/// [`devices_of`], each device with the name of its pool (a device's identity in an
/// allocation is driver, pool and name).
pub(crate) fn pooled_devices_of(
    slices: &[ResourceSlice],
    node: &str,
    driver: &str,
) -> Vec<(String, ForeignDevice)> {
    let mut best: BTreeMap<String, i64> = BTreeMap::new();
    for s in slices {
        if s.spec.driver == driver && s.spec.node_name.as_deref() == Some(node) {
            let g = best.entry(s.spec.pool.name.clone()).or_insert(i64::MIN);
            *g = (*g).max(s.spec.pool.generation);
        }
    }
    slices
        .iter()
        .filter(|s| {
            s.spec.driver == driver
                && s.spec.node_name.as_deref() == Some(node)
                && best.get(&s.spec.pool.name) == Some(&s.spec.pool.generation)
        })
        .flat_map(|s| {
            s.spec
                .devices
                .iter()
                .flatten()
                .map(|d| (s.spec.pool.name.clone(), d))
        })
        .map(|(pool, d)| {
            (
                pool,
                ForeignDevice {
                    driver: driver.to_string(),
                    device: d.clone(),
                },
            )
        })
        .collect()
}

/// DeviceClasses standing in for the foreign drivers' own in a simulation: a class
/// named like the driver's class that selects every device of the driver.
pub fn stand_in_classes(spec: &MixedSpec) -> Vec<DeviceClass> {
    [
        (&spec.gpu_class, &spec.gpu_driver),
        (&spec.nic_class, &spec.nic_driver),
    ]
    .into_iter()
    .map(|(class, driver)| DeviceClass {
        metadata: ObjectMeta {
            name: Some(class.clone()),
            ..Default::default()
        },
        spec: Some(DeviceClassSpec {
            selectors: Some(vec![DeviceSelector {
                cel: Some(CELDeviceSelector {
                    expression: format!("device.driver == \"{driver}\""),
                }),
            }]),
            ..Default::default()
        }),
    })
    .collect()
}

/// How many GPUs can get K NICs each with the same value of `attribute`.
fn capacity(gpus: &[ForeignDevice], nics: &[ForeignDevice], attribute: &str, k: u32) -> u32 {
    let mut g: BTreeMap<String, u32> = BTreeMap::new();
    let mut n: BTreeMap<String, u32> = BTreeMap::new();
    for d in gpus {
        if let Some(v) = d.string(attribute) {
            *g.entry(v).or_default() += 1;
        }
    }
    for d in nics {
        if let Some(v) = d.string(attribute) {
            *n.entry(v).or_default() += 1;
        }
    }
    g.iter()
        .map(|(v, c)| (*c).min(n.get(v).copied().unwrap_or(0) / k.max(1)))
        .sum()
}

/// An attribute whose value is unique among `devs` and present on `d`, to pin it by.
fn pin(d: &ForeignDevice, devs: &[ForeignDevice]) -> Option<String> {
    let mut candidates = vec![
        attr::PCI_BUS_ID.to_string(),
        format!("{}/pciAddress", d.driver),
        format!("{}/uuid", d.driver),
        format!("{}/rdmaDevice", d.driver),
    ];
    for k in d.device.attributes.iter().flatten().map(|(k, _)| k) {
        candidates.push(if k.contains('/') {
            k.clone()
        } else {
            format!("{}/{k}", d.driver)
        });
    }
    for c in candidates {
        let Some(v) = d.attr(&c).and_then(|a| a.string.clone()) else {
            continue;
        };
        let same = devs
            .iter()
            .filter(|o| o.attr(&c).and_then(|a| a.string.as_ref()) == Some(&v))
            .count();
        if same == 1 {
            return Some(format!("{} == \"{v}\"", attr::cel(&c)));
        }
    }
    None
}

/// A topology of the node made from the foreign devices' attributes: NUMA nodes from
/// `numaNode`, host bridges from `pcieRoot`, devices at their addresses directly below
/// their host bridge (the drivers publish no switches, so PIX/PXB cannot be told apart
/// from PHB). Devices without an address are left out.
///
/// Refused ([`DraError::Blind`]) when a GPU or NIC publishes no NUMA node: which NIC is
/// near which GPU is then unknown, and the node's topology must be given.
pub fn topology_of(
    node: &str,
    gpus: &[ForeignDevice],
    nics: &[ForeignDevice],
) -> Result<Topology, DraError> {
    if let Some(why) = blind_reason(gpus, nics) {
        return Err(DraError::Blind {
            node: node.to_string(),
            why,
        });
    }
    let mut b = TopologyBuilder::new("from-slices");
    let numas: BTreeSet<u32> = gpus
        .iter()
        .chain(nics)
        .filter_map(ForeignDevice::numa)
        .collect();
    for n in &numas {
        let d = numas.iter().map(|m| if m == n { 10 } else { 20 }).collect();
        b.numa_node(*n, CpuSet::new(), None, d, None);
    }
    let mut hosts: BTreeMap<(u16, u8), PciParent> = BTreeMap::new();
    let mut host_for = |b: &mut TopologyBuilder, d: &ForeignDevice, bdf: Bdf| {
        let (dom, bus) = d
            .string(attr::PCIE_ROOT)
            .and_then(|r| parse_root_name(&r).ok())
            .unwrap_or((bdf.domain, bdf.bus));
        *hosts
            .entry((dom, bus))
            .or_insert_with(|| b.host_bridge(dom, bus))
    };
    let mut seen = BTreeSet::new();
    for d in gpus {
        let Some(bdf) = d.bdf() else { continue };
        if !seen.insert(bdf) {
            continue;
        }
        let p = host_for(&mut b, d, bdf);
        let pci = b.endpoint(p, bdf, vendor::NVIDIA, 0, class::DISPLAY_3D, d.numa(), None);
        b.gpu(Gpu::on(pci, GpuVendor::Other));
    }
    for d in nics {
        let Some(bdf) = d.bdf() else { continue };
        if !seen.insert(bdf) {
            continue;
        }
        let p = host_for(&mut b, d, bdf);
        let pci = b.endpoint(
            p,
            bdf,
            vendor::MELLANOX,
            0,
            class::INFINIBAND,
            d.numa(),
            None,
        );
        let mut nic = Nic::on(pci);
        nic.rdma = d.string(&format!("{}/rdmaDevice", d.driver));
        b.nic(nic);
    }
    b.build()
        .map_err(|e| DraError::Plan(format!("the devices do not form a valid topology: {e}")))
}

/// Writes the best claim the stock scheduler can satisfy for N GPUs with K NICs each.
/// `node_topology` is the node's discovered topology when known (a profile, its sysfs):
/// the planner then sees switches and NUMA nodes the drivers do not publish; without
/// it the planner works on [`topology_of`] the slices. Devices are matched to the
/// topology by PCI address.
pub fn mixed_claim(
    slices: &[ResourceSlice],
    spec: &MixedSpec,
    node_topology: Option<&Topology>,
) -> Result<MixedClaim, DraError> {
    if spec.pairs == 0 || spec.nics_per_gpu == 0 {
        return Err(DraError::BadClaim(
            "--pairs and --nics-per-gpu must be at least 1".into(),
        ));
    }
    let gpus = devices_of(slices, &spec.node, &spec.gpu_driver);
    let nics = devices_of(slices, &spec.node, &spec.nic_driver);
    if gpus.is_empty() || nics.is_empty() {
        return Err(DraError::BadSlice {
            slice: format!("node {}", spec.node),
            what: format!(
                "found {} devices of {} and {} of {}; both drivers must publish devices for the node",
                gpus.len(),
                spec.gpu_driver,
                nics.len(),
                spec.nic_driver
            ),
        });
    }
    let n = spec.pairs;
    let k = spec.nics_per_gpu;
    let mut notes = Vec::new();
    for attribute in [attr::PCIE_ROOT, attr::NUMA_NODE_STD] {
        let both = gpus.iter().any(|d| d.attr(attribute).is_some())
            && nics.iter().any(|d| d.attr(attribute).is_some());
        if !both {
            notes.push(format!("{attribute}: not published by both drivers"));
            continue;
        }
        let cap = capacity(&gpus, &nics, attribute, k);
        if cap < n {
            notes.push(format!(
                "{attribute}: at most {cap} GPUs on {} can get {k} NIC(s) with the same value, {n} asked",
                spec.node
            ));
            continue;
        }
        let mut requests = Vec::new();
        let mut constraints = Vec::new();
        for i in 0..n {
            let (g, nic) = (format!("gpu-{i}"), format!("nic-{i}"));
            requests.push(exactly(&g, &spec.gpu_class, 1, vec![]));
            requests.push(exactly(&nic, &spec.nic_class, k, vec![]));
            constraints.push(match_attr(attribute, vec![g, nic]));
        }
        return finish(
            requests,
            constraints,
            MixedStrategy::MatchAttribute {
                attribute: attribute.to_string(),
            },
            notes,
        );
    }

    // Pinned: plan on the node's topology, restricted to the published devices.
    let topo = match node_topology {
        Some(t) => restrict(t, &gpus, &nics),
        None => topology_of(&spec.node, &gpus, &nics)?,
    };
    let mut req = Request::new(n as usize, NicCount::PerGpu(k as usize));
    req.require_rdma = nics
        .iter()
        .any(|d| d.string(&format!("{}/rdmaDevice", d.driver)).is_some());
    let plan = Planner::new(&topo)
        .plan(&req, &Usage::empty())
        .map_err(|e| DraError::Plan(e.to_string()))?;
    let by_bdf = |devs: &[ForeignDevice], b: Bdf| devs.iter().find(|d| d.bdf() == Some(b)).cloned();
    let mut requests = Vec::new();
    let mut pinned = Vec::new();
    for (i, g) in plan.gpus.iter().enumerate() {
        let gd = by_bdf(&gpus, *g).ok_or_else(|| DraError::Plan(format!("GPU {g} vanished")))?;
        let gsel = pin(&gd, &gpus).ok_or_else(|| DraError::BadSlice {
            slice: format!("node {}", spec.node),
            what: format!(
                "GPU {:?} has no attribute unique on the node to pin it by",
                gd.device.name
            ),
        })?;
        requests.push(exactly(&format!("gpu-{i}"), &spec.gpu_class, 1, vec![gsel]));
        let mine: Vec<_> = plan.pairs.iter().filter(|p| p.gpu == *g).collect();
        let mut nic_names = Vec::new();
        let mut worst = None;
        for (j, p) in mine.iter().enumerate() {
            let nd = by_bdf(&nics, p.nic)
                .ok_or_else(|| DraError::Plan(format!("NIC {} vanished", p.nic)))?;
            let nsel = pin(&nd, &nics).ok_or_else(|| DraError::BadSlice {
                slice: format!("node {}", spec.node),
                what: format!(
                    "NIC {:?} has no attribute unique on the node to pin it by",
                    nd.device.name
                ),
            })?;
            let name = if k == 1 {
                format!("nic-{i}")
            } else {
                format!("nic-{i}-{j}")
            };
            requests.push(exactly(&name, &spec.nic_class, 1, vec![nsel]));
            nic_names.push(nd.device.name.clone());
            worst = worst.max(Some(p.class));
        }
        pinned.push((
            gd.device.name.clone(),
            nic_names,
            worst.map_or_else(String::new, |c| c.to_string()),
        ));
    }
    finish(
        requests,
        vec![],
        MixedStrategy::Pinned {
            node: spec.node.clone(),
            pairs: pinned,
        },
        notes,
    )
}

/// The node topology without the GPUs and NICs the drivers do not publish.
fn restrict(t: &Topology, gpus: &[ForeignDevice], nics: &[ForeignDevice]) -> Topology {
    let g: BTreeSet<Bdf> = gpus.iter().filter_map(ForeignDevice::bdf).collect();
    let n: BTreeSet<Bdf> = nics.iter().filter_map(ForeignDevice::bdf).collect();
    let mut out = t.clone();
    let gpu_keep: Vec<bool> = (0..t.gpus.len())
        .map(|i| g.contains(&t.gpu_bdf(i)))
        .collect();
    // Drop links to removed GPUs and renumber the rest.
    let mut new_index = vec![usize::MAX; t.gpus.len()];
    let mut next = 0;
    for (i, keep) in gpu_keep.iter().enumerate() {
        if *keep {
            new_index[i] = next;
            next += 1;
        }
    }
    out.gpus = t
        .gpus
        .iter()
        .zip(&gpu_keep)
        .filter(|(_, k)| **k)
        .map(|(x, _)| x.clone())
        .collect();
    out.gpu_links = t
        .gpu_links
        .iter()
        .filter(|l| gpu_keep.get(l.a) == Some(&true) && gpu_keep.get(l.b) == Some(&true))
        .map(|l| {
            let mut l = l.clone();
            l.a = new_index[l.a];
            l.b = new_index[l.b];
            l
        })
        .collect();
    out.nics = t
        .nics
        .iter()
        .filter(|x| n.contains(&t.pci[x.pci].bdf))
        .cloned()
        .collect();
    out
}

fn finish(
    requests: Vec<k8s_openapi::api::resource::v1::DeviceRequest>,
    constraints: Vec<k8s_openapi::api::resource::v1::DeviceConstraint>,
    strategy: MixedStrategy,
    notes: Vec<String>,
) -> Result<MixedClaim, DraError> {
    if requests.len() > MAX_REQUESTS_PER_CLAIM {
        return Err(DraError::BadClaim(format!(
            "{} requests; a claim holds at most {MAX_REQUESTS_PER_CLAIM}",
            requests.len()
        )));
    }
    Ok(MixedClaim {
        spec: ResourceClaimSpec {
            devices: Some(DeviceClaim {
                requests: Some(requests),
                constraints: (!constraints.is_empty()).then_some(constraints),
                config: None,
            }),
        },
        strategy,
        notes,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn dev(driver: &str, name: &str, attrs: serde_json::Value) -> ForeignDevice {
        ForeignDevice {
            driver: driver.into(),
            device: serde_json::from_value(json!({"name": name, "attributes": attrs})).unwrap(),
        }
    }

    #[test]
    fn roles_and_blindness_from_the_drivers_formats() {
        // NVIDIA's GPU driver: unqualified `type`, `uuid`, `productName`, `pcieBusID`.
        let gpu = dev(
            "gpu.nvidia.com",
            "gpu-0",
            json!({"type": {"string": "gpu"}, "uuid": {"string": "GPU-1"},
                   "pcieBusID": {"string": "0008:06:00.0"},
                   "resource.kubernetes.io/pcieRoot": {"string": "pci0008:00"}}),
        );
        let channel = dev(
            "gpu.nvidia.com",
            "channel-0",
            json!({"type": {"string": "channel"}}),
        );
        // dranet: qualified `dra.net/…`; an IB function and an Ethernet one.
        let ib = dev(
            "dra.net",
            "pci-0101-00-00-0",
            json!({"dra.net/rdma": {"bool": true}, "dra.net/numaNode": {"int": 0},
                   "dra.net/pciAddress": {"string": "0101:00:00.0"}}),
        );
        let eth = dev(
            "dra.net",
            "pci-7870-00-00-0",
            json!({"dra.net/ifName": {"string": "eth0"}, "dra.net/pciAddress": {"string": "7870:00:00.0"}}),
        );
        assert_eq!(gpu.role(), Some(DeviceRole::Gpu));
        assert_eq!(channel.role(), None);
        assert_eq!(
            (ib.role(), eth.role()),
            (Some(DeviceRole::Nic), Some(DeviceRole::Nic))
        );
        assert_eq!(gpu.bdf(), Some("0008:06:00.0".parse().unwrap()));
        assert_eq!((gpu.numa(), ib.numa(), eth.numa()), (None, Some(0), None));
        let why = blind_reason(&[gpu], &[ib, eth]).unwrap();
        assert_eq!(
            why,
            "1 of 1 GPUs of gpu.nvidia.com (gpu-0) publish no NUMA node (read: resource.kubernetes.io/numaNode, gpu.nvidia.com/numaNode, gpu.nvidia.com/numa); \
             1 of 2 NICs of dra.net (pci-7870-00-00-0) publish no NUMA node (read: resource.kubernetes.io/numaNode, dra.net/numaNode, dra.net/numa)"
        );
    }
}
