//! What the ladder template ([`crate::claim::ladder_claim`]) gets on each node: the stock
//! allocator's model run on the node's free devices, each pair's rung and class, the
//! node's best free choice, and where the ladder's first rung does not deliver what it
//! promises on that machine.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::resource::v1::{DeviceClass, ResourceClaimSpec, ResourceSlice};
use serde::Serialize;
use topoalign_plan::{NicCount, Planner, Request, Usage};
use topoalign_topology::{Bdf, PcieClass, Topology};

use crate::DraError;
use crate::alloc::{DeviceId, NodeDevices, first_fit};
use crate::claim::cpus::CPU_DRIVER;
use crate::claim::ladder::Rung;
use crate::foreign::devices::{DeviceRole, ForeignDevice, pooled_devices_of};
use crate::foreign::slice_topology;
use crate::publish::driver_class;

/// What the report is run on.
#[derive(Debug, Clone, Copy)]
pub struct LadderInput<'a> {
    /// The template's claim.
    pub claim: &'a ResourceClaimSpec,
    /// The GPUs' driver and DeviceClass.
    pub gpu: (&'a str, &'a str),
    /// The NICs' driver and DeviceClass.
    pub nic: (&'a str, &'a str),
    /// Every slice (other nodes' are ignored).
    pub slices: &'a [ResourceSlice],
    /// DeviceClasses (the cluster's or the file's); a class the template names that is
    /// missing stands for every device of its driver.
    pub classes: &'a [DeviceClass],
    /// The CPU driver's DeviceClass when the template asks for CPUs (`--cpus`).
    pub cpu_class: Option<&'a str>,
    /// Devices held by allocated claims.
    pub in_use: &'a BTreeSet<DeviceId>,
    /// A topology of the node's machine (a profile, a saved sysfs …): used for a node
    /// whose GPUs and NICs it has, instead of the one the slices describe.
    pub topology: Option<&'a Topology>,
    /// Devices the allocator may try.
    pub budget: u64,
}

/// One GPU with its NICs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct LadderPair {
    /// The GPU device.
    pub gpu: String,
    /// Its PCI address.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gpu_bdf: Option<Bdf>,
    /// The NIC devices.
    pub nics: Vec<String>,
    /// Their names (RDMA device, interface).
    pub nic_labels: Vec<String>,
    /// The rung the pair took.
    pub rung: Rung,
    /// The worst class over its NICs (`None` when a device's place is unknown).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub class: Option<PcieClass>,
    /// Whether NCCL uses GPUDirect RDMA on every NIC of the pair by default (`None`
    /// when unknown).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gdr: Option<bool>,
}

/// The template on one node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeLadder {
    /// The node.
    pub node: String,
    /// Whether the allocator finds devices for the claim.
    pub fits: bool,
    /// Devices it tried.
    pub steps: u64,
    /// True when it stopped at the budget.
    pub gave_up: bool,
    /// Where the classes come from: `topology` (the one given) or `slices`.
    pub classes_from: &'static str,
    /// The pairs, in request order.
    pub pairs: Vec<LadderPair>,
    /// Their worst class.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub worst: Option<PcieClass>,
    /// The worst class of the planner's best free choice for the same shape.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub best_worst: Option<PcieClass>,
    /// Where the first rung does not deliver, or the claim falls short.
    pub warnings: Vec<String>,
    /// What the slices leave out or were read as.
    pub notes: Vec<String>,
}

/// `driver`'s class named `name` when missing from `classes`: every device of the
/// driver (the CPU class: every device of dra-driver-cpu).
fn with_stand_ins(
    classes: &[DeviceClass],
    wanted: [(&str, &str); 2],
    cpu_class: Option<&str>,
) -> Vec<DeviceClass> {
    let mut out = classes.to_vec();
    let missing = |out: &[DeviceClass], name: &str| {
        !out.iter().any(|c| c.metadata.name.as_deref() == Some(name))
    };
    for (driver, name) in wanted {
        if missing(&out, name) {
            out.push(driver_class(name, driver));
        }
    }
    if let Some(name) = cpu_class
        && missing(&out, name)
    {
        out.push(crate::claim::cpu_device_class(name));
    }
    out
}

/// The shares of devices that allow multiple allocations allocated claims hold: every
/// `consumedCapacity` entry of `status.allocation.devices.results`, quantities as
/// written (checked where they are used: [`crate::alloc::NodeDevices::consume_capacity`]).
pub fn held_shares<'a>(
    claims: impl IntoIterator<Item = &'a k8s_openapi::api::resource::v1::ResourceClaim>,
) -> Vec<crate::alloc::Share> {
    let results = claims
        .into_iter()
        .filter_map(|c| c.status.as_ref()?.allocation.as_ref()?.devices.as_ref())
        .flat_map(|d| d.results.iter().flatten());
    let mut out = Vec::new();
    for r in results {
        for (capacity, q) in r.consumed_capacity.iter().flatten() {
            out.push(crate::alloc::Share {
                device: DeviceId {
                    driver: r.driver.clone(),
                    pool: r.pool.clone(),
                    device: r.device.clone(),
                },
                capacity: capacity.clone(),
                quantity: q.0.clone(),
            });
        }
    }
    out
}

/// The devices allocated claims hold (`status.allocation.devices.results`).
pub fn held_devices<'a>(
    claims: impl IntoIterator<Item = &'a k8s_openapi::api::resource::v1::ResourceClaim>,
) -> BTreeSet<DeviceId> {
    claims
        .into_iter()
        .filter_map(|c| c.status.as_ref()?.allocation.as_ref()?.devices.as_ref())
        .flat_map(|d| d.results.iter().flatten())
        .map(|r| DeviceId {
            driver: r.driver.clone(),
            pool: r.pool.clone(),
            device: r.device.clone(),
        })
        .collect()
}

impl NodeLadder {
    /// The report in words: one line for the node, one per pair, warnings and notes.
    pub fn text(&self) -> String {
        let fit = match (self.fits, self.gave_up) {
            (true, _) => format!("fits ({} devices tried)", self.steps),
            (false, true) => format!("undecided (gave up after {} devices)", self.steps),
            (false, false) => format!("no fit ({} devices tried)", self.steps),
        };
        let opt = |c: Option<PcieClass>| c.map_or_else(|| "?".to_string(), |c| c.to_string());
        let mut out = format!(
            "node {}: {fit}; worst {}, best free choice worst {} (classes from {})\n",
            self.node,
            opt(self.worst),
            opt(self.best_worst),
            self.classes_from
        );
        for (i, p) in self.pairs.iter().enumerate() {
            let gdr = match p.gdr {
                Some(true) => "GDR",
                Some(false) => "no GDR",
                None => "GDR ?",
            };
            out += &format!(
                "  pair {i}: {}{} + {}: rung {}, {} ({gdr})\n",
                p.gpu,
                p.gpu_bdf.map_or_else(String::new, |b| format!(" ({b})")),
                p.nic_labels.join(" + "),
                p.rung.as_str(),
                opt(p.class)
            );
        }
        for w in &self.warnings {
            out += &format!("  warning: {w}\n");
        }
        for n in &self.notes {
            out += &format!("  note: {n}\n");
        }
        out
    }
}

/// The report of every node with devices of both drivers ([`ladder_nodes`]), in name
/// order; an error when there is none.
pub fn ladder_reports(input: &LadderInput<'_>) -> Result<Vec<NodeLadder>, DraError> {
    let (gpu_driver, nic_driver) = (input.gpu.0, input.nic.0);
    let nodes = ladder_nodes(input.slices, gpu_driver, nic_driver);
    if nodes.is_empty() {
        let seen: BTreeSet<&str> = input
            .slices
            .iter()
            .map(|s| s.spec.driver.as_str())
            .collect();
        let seen = seen.into_iter().collect::<Vec<_>>().join(", ");
        return Err(DraError::NoLadderNode {
            gpu_driver: gpu_driver.to_string(),
            nic_driver: nic_driver.to_string(),
            seen: if seen.is_empty() { "none".into() } else { seen },
        });
    }
    let report = |node: &String| {
        ladder_report(input, node).map_err(|e| DraError::LadderNode {
            node: node.clone(),
            source: Box::new(e),
        })
    };
    nodes.iter().map(report).collect()
}

/// The nodes with devices of both drivers, in name order.
pub fn ladder_nodes(slices: &[ResourceSlice], gpu_driver: &str, nic_driver: &str) -> Vec<String> {
    let of = |driver: &str| -> BTreeSet<String> {
        (slices.iter())
            .filter(|s| s.spec.driver == driver)
            .filter_map(|s| s.spec.node_name.clone())
            .collect()
    };
    of(gpu_driver)
        .intersection(&of(nic_driver))
        .cloned()
        .collect()
}

/// The devices of a role, by id.
fn of_role(
    slices: &[ResourceSlice],
    node: &str,
    driver: &str,
    role: DeviceRole,
) -> BTreeMap<DeviceId, ForeignDevice> {
    pooled_devices_of(slices, node, driver)
        .into_iter()
        .filter(|(_, d)| d.role() == Some(role))
        .map(|(pool, d)| {
            let id = DeviceId {
                driver: driver.to_string(),
                pool,
                device: d.device.name.clone(),
            };
            (id, d)
        })
        .collect()
}

/// Runs the template on `node` (see the module documentation).
pub fn ladder_report(input: &LadderInput<'_>, node: &str) -> Result<NodeLadder, DraError> {
    let gpus = of_role(input.slices, node, input.gpu.0, DeviceRole::Gpu);
    let nics = of_role(input.slices, node, input.nic.0, DeviceRole::Nic);
    let mut warnings = Vec::new();
    let mut notes = Vec::new();
    let gpu_list: Vec<ForeignDevice> =
        crate::foreign::devices::physical_gpus(gpus.values().cloned().collect());
    let nic_list: Vec<ForeignDevice> = nics.values().cloned().collect();
    let sliced = slice_topology(node, &gpu_list, &nic_list);
    let all_bdfs: BTreeSet<Bdf> = (gpu_list.iter().chain(&nic_list))
        .filter(|d| d.rdma() != Some(false))
        .filter_map(ForeignDevice::bdf)
        .collect();
    let given = input.topology.filter(|t| {
        all_bdfs
            .iter()
            .all(|b| t.gpu_index(*b).is_some() || t.nic_index(*b).is_some())
    });
    let (topo, classes_from) = match (given, &sliced) {
        (Some(t), _) => (Some(t.clone()), "topology"),
        (None, Ok(s)) => {
            notes.extend(s.notes());
            (Some(s.topology.clone()), "slices")
        }
        (None, Err(e)) => {
            notes.push(e.to_string());
            (None, "slices")
        }
    };
    warnings.extend(promises(
        &gpu_list,
        &nic_list,
        topo.as_ref(),
        given.is_some(),
    ));

    let mut free = NodeDevices::gather(input.slices, node)?;
    free.mark_in_use(input.in_use);
    let classes = with_stand_ins(input.classes, [input.gpu, input.nic], input.cpu_class);
    if input.cpu_class.is_some()
        && !(input.slices.iter())
            .any(|s| s.spec.node_name.as_deref() == Some(node) && s.spec.driver == CPU_DRIVER)
    {
        notes.push(format!(
            "no CPUs of {CPU_DRIVER} published on this node: the CPU requests cannot be met (is dra-driver-cpu running here?)"
        ));
    }
    let out = first_fit(input.claim, &classes, &free, input.budget)?;
    let class_of = |g: Option<Bdf>, n: Option<Bdf>| -> (Option<PcieClass>, Option<bool>) {
        let (Some(t), Some(g), Some(n)) = (topo.as_ref(), g, n) else {
            return (None, None);
        };
        match (t.gpu_index(g), t.nic_index(n)) {
            (Some(gi), Some(ni)) => {
                let p = t.classifier().gpu_nic(gi, ni);
                (Some(p.class), Some(p.gdr))
            }
            _ => (None, None),
        }
    };
    let mut pairs: Vec<LadderPair> = Vec::new();
    let mut gpu_rung: BTreeMap<String, Rung> = BTreeMap::new();
    for r in out.allocation.iter().flatten() {
        let (head, tail) = r.request.split_once('/').unwrap_or((&r.request, ""));
        let Some(i) = head.rsplit_once('-').map(|x| x.1.to_string()) else {
            continue;
        };
        let id = DeviceId {
            driver: r.driver.clone(),
            pool: r.pool.clone(),
            device: r.device.clone(),
        };
        if head.starts_with("gpu-") {
            let d = gpus.get(&id);
            gpu_rung.insert(i.clone(), Rung::of_request(&r.request).unwrap_or(Rung::Any));
            pairs.push(LadderPair {
                gpu: r.device.clone(),
                gpu_bdf: d.and_then(ForeignDevice::bdf),
                nics: Vec::new(),
                nic_labels: Vec::new(),
                rung: Rung::Any,
                class: None,
                gdr: None,
            });
        } else if head.starts_with("nic-") {
            let d = nics.get(&id);
            let nic_rung = match tail {
                "" => Rung::Any,
                t => Rung::of_request(&format!("x/{t}")).unwrap_or(Rung::Any),
            };
            let rung = match gpu_rung.get(&i) {
                Some(Rung::Any) | None => Rung::Any,
                Some(_) => nic_rung,
            };
            if let Some(p) = pairs.last_mut() {
                let (class, gdr) = class_of(p.gpu_bdf, d.and_then(ForeignDevice::bdf));
                p.class = if p.nics.is_empty() {
                    class
                } else {
                    p.class.max(class)
                };
                p.gdr = if p.nics.is_empty() {
                    gdr
                } else {
                    p.gdr.zip(gdr).map(|(a, b)| a && b)
                };
                p.nics.push(r.device.clone());
                p.nic_labels
                    .push(d.map_or_else(|| r.device.clone(), ForeignDevice::nic_label));
                p.rung = rung;
            }
        }
    }
    let worst = pairs.iter().filter_map(|p| p.class).max();
    let best_worst = topo
        .as_ref()
        .and_then(|t| best_free(t, input, &gpus, &nics, claim_pairs(input.claim)));
    if out.gave_up {
        warnings.push(format!(
            "the allocator gave up after {} devices tried: on a cluster the scheduler's Filter times out here",
            out.steps
        ));
    } else if out.allocation.is_none() {
        warnings.push("the claim does not fit the node's free devices".into());
    }
    if let (Some(w), Some(b)) = (worst, best_worst)
        && w > b
    {
        warnings.push(format!(
            "the allocator's pairs (worst {w}) are worse than the node's best free choice (worst {b})"
        ));
    }
    Ok(NodeLadder {
        node: node.to_string(),
        fits: out.allocation.is_some(),
        steps: out.steps,
        gave_up: out.gave_up,
        classes_from,
        pairs,
        worst,
        best_worst,
        warnings,
        notes,
    })
}

/// The number of `gpu-i` requests of the template.
fn claim_pairs(claim: &ResourceClaimSpec) -> usize {
    (claim.devices.as_ref())
        .and_then(|d| d.requests.as_ref())
        .map_or(0, |r| {
            r.iter().filter(|r| r.name.starts_with("gpu-")).count()
        })
        .max(1)
}

/// The worst class of the planner's best choice of `n` GPUs with the template's NICs
/// per GPU on the free devices.
fn best_free(
    t: &Topology,
    input: &LadderInput<'_>,
    gpus: &BTreeMap<DeviceId, ForeignDevice>,
    nics: &BTreeMap<DeviceId, ForeignDevice>,
    n: usize,
) -> Option<PcieClass> {
    let per_gpu = (input.claim.devices.as_ref())
        .and_then(|d| d.requests.as_ref())
        .and_then(|r| r.iter().find(|r| r.name == "nic-0"))
        .and_then(|r| r.first_available.as_ref()?.first()?.count)
        .unwrap_or(1)
        .max(1) as usize;
    let used = |devs: &BTreeMap<DeviceId, ForeignDevice>| -> Vec<Bdf> {
        (devs.iter())
            .filter(|(id, _)| input.in_use.contains(*id))
            .filter_map(|(_, d)| d.bdf())
            .collect()
    };
    let usage = Usage {
        gpus: used(gpus),
        nics: used(nics),
        ..Usage::empty()
    };
    let mut req = Request::new(n, NicCount::PerGpu(per_gpu));
    req.require_rdma = t.nics.iter().any(|x| x.is_rdma());
    let plan = Planner::new(t).plan(&req, &usage).ok()?;
    plan.pairs.iter().map(|p| p.class).max()
}

/// Where the ladder's first rung does not deliver on this machine.
fn promises(
    gpus: &[ForeignDevice],
    nics: &[ForeignDevice],
    topo: Option<&Topology>,
    real: bool,
) -> Vec<String> {
    let mut out = Vec::new();
    let rdma: Vec<&ForeignDevice> = nics.iter().filter(|d| d.rdma() != Some(false)).collect();
    let roots = |devs: &mut dyn Iterator<Item = &ForeignDevice>| -> BTreeSet<String> {
        devs.filter_map(ForeignDevice::pcie_root).collect()
    };
    let gpu_roots = roots(&mut gpus.iter());
    let nic_roots = roots(&mut rdma.iter().copied());
    if !gpus.is_empty() && !rdma.is_empty() && gpu_roots.is_disjoint(&nic_roots) {
        out.push(
            "the first rung (same pcieRoot) never applies here: no GPU shares a root with an RDMA NIC (one root per device, as on GB200/GB300); pairs get the NUMA rung at best".to_string(),
        );
    }
    if rdma.iter().any(|d| d.pcie_root().is_none()) {
        out.push(format!(
            "{} RDMA NIC(s) publish no resource.kubernetes.io/pcieRoot (dranet before v1.4): the template takes them at no rung",
            rdma.iter().filter(|d| d.pcie_root().is_none()).count()
        ));
    }
    let keys = |devs: &mut dyn Iterator<Item = &ForeignDevice>| -> BTreeSet<String> {
        devs.filter_map(|d| d.numa_with_key().map(|(_, k)| k))
            .collect()
    };
    let (gk, nk) = (keys(&mut gpus.iter()), keys(&mut rdma.iter().copied()));
    for (empty, what) in [
        (
            gk.is_empty(),
            "GPUs publish no NUMA node (NVIDIA's GPU driver before v0.5)",
        ),
        (nk.is_empty(), "RDMA NICs publish no NUMA node"),
    ] {
        if empty && !gpus.is_empty() && !rdma.is_empty() {
            out.push(format!("the NUMA rungs never apply here: the {what}"));
        }
    }
    if !gk.is_empty() && !nk.is_empty() && gk.is_disjoint(&nk) {
        out.push(format!(
            "the NUMA rungs never apply here: the GPUs publish their NUMA node as {} and the NICs as {}; a matchAttribute compares one attribute name",
            gk.into_iter().collect::<Vec<_>>().join(", "),
            nk.into_iter().collect::<Vec<_>>().join(", ")
        ));
    }
    if gpus.len() > 1
        && gpus
            .iter()
            .any(|d| d.string(crate::attr::PCI_BUS_ID).is_none())
    {
        out.push(
            "GPUs without resource.kubernetes.io/pciBusID cannot be taken by a claim of two or more pairs (its distinctAttribute keeps one GPU from being taken twice)".into(),
        );
    }
    // Same root but not the same switch: PHB, no GPUDirect RDMA by default.
    if let (Some(t), true) = (topo, real) {
        let cls = t.classifier();
        let mut phb = Vec::new();
        for g in gpus {
            for n in &rdma {
                if g.pcie_root().is_some() && g.pcie_root() == n.pcie_root() {
                    let (Some(gb), Some(nb)) = (g.bdf(), n.bdf()) else {
                        continue;
                    };
                    if let (Some(gi), Some(ni)) = (t.gpu_index(gb), t.nic_index(nb)) {
                        let p = cls.gpu_nic(gi, ni);
                        if !p.gdr {
                            phb.push(format!(
                                "{} and {} ({})",
                                g.device.name,
                                n.nic_label(),
                                p.class
                            ));
                        }
                    }
                }
            }
        }
        if !phb.is_empty() {
            out.push(format!(
                "the first rung (same pcieRoot) gives no GPUDirect RDMA here: {} share a root but not a PCIe switch (NCCL_NET_GDR_LEVEL defaults to PXB)",
                phb.join(", ")
            ));
        }
    }
    out
}
