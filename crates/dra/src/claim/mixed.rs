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

use k8s_openapi::api::resource::v1::{DeviceClaim, DeviceClass, ResourceClaimSpec, ResourceSlice};
use serde::Serialize;
use topoalign_plan::{NicCount, Planner, Request, Usage};
use topoalign_topology::{Bdf, Topology};

use crate::claim::spec::{exactly, match_attr};
use crate::foreign::devices::{
    DeviceRole, ForeignDevice, devices_of, gpus_and_nics, rdma_selector,
};
use crate::foreign::topology_of;
use crate::limits::MAX_REQUESTS_PER_CLAIM;
use crate::publish::driver_class;
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

/// DeviceClasses standing in for the foreign drivers' own in a simulation: a class
/// named like the driver's class that selects every device of the driver.
pub fn stand_in_classes(spec: &MixedSpec) -> Vec<DeviceClass> {
    vec![
        driver_class(&spec.gpu_class, &spec.gpu_driver),
        driver_class(&spec.nic_class, &spec.nic_driver),
    ]
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
    let (gpus, nics) = gpus_and_nics(slices, &spec.node, &spec.gpu_driver, &spec.nic_driver);
    // Every GPU view (MIG instances, twins) for the uniqueness of a pin.
    let all_gpus: Vec<ForeignDevice> = devices_of(slices, &spec.node, &spec.gpu_driver)
        .into_iter()
        .filter(|d| d.role() == Some(DeviceRole::Gpu))
        .collect();
    // Only RDMA functions where the driver says which do RDMA (a p4d's ENA shares its
    // root with the EFA).
    let rdma_sel =
        rdma_selector(&spec.nic_driver).filter(|_| nics.iter().any(|d| d.rdma() == Some(true)));
    let all_nics = nics.clone();
    let nics: Vec<ForeignDevice> = match &rdma_sel {
        Some(_) => nics
            .into_iter()
            .filter(|d| d.rdma() == Some(true))
            .collect(),
        None => nics,
    };
    let nic_sel: Vec<String> = rdma_sel.iter().cloned().collect();
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
            requests.push(exactly(&nic, &spec.nic_class, k, nic_sel.clone()));
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
        let gsel = pin(&gd, &all_gpus).ok_or_else(|| DraError::BadSlice {
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
            let nsel = pin(&nd, &all_nics).ok_or_else(|| DraError::BadSlice {
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
