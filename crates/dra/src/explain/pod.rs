//! `explain pod`: what a running pod got from its ResourceClaims (each device, what it
//! is, each GPU–NIC pair with its class), the planner's best choice for the same shape
//! on the devices that were free on the node (all devices minus other claims'), and why
//! the two differ. Pure: the caller reads the pod, its claims ([`claim_refs`] names
//! them as the scheduler finds them), the node's ResourceSlices, every other claim and
//! the DeviceClasses from the cluster.
//!
//! Devices are told apart by their attributes: topoalign's own carry `type`
//! (`gpu`/`nic`/`pair`) and its pairs their `class`; other drivers' devices by
//! [`ForeignDevice::role`](crate::foreign::ForeignDevice::role). The node's topology is
//! rebuilt from the attributes ([`topology_of`](crate::foreign::topology_of): NUMA node and
//! host bridge); a class topoalign published on a pair device wins over the rebuilt
//! topology's, which cannot see PCIe switches.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::resource::v1::{DeviceClass, ResourceClaim, ResourceSlice};
use serde::Serialize;
use thiserror::Error;
use topoalign_plan::Usage;
use topoalign_topology::{Bdf, PcieClass, Topology, TopologyBuilder};

use crate::alloc::AllocatedDevice;
use crate::alloc::{DEFAULT_BUDGET, DeviceId, NodeDevices, first_fit};
use crate::explain::claim::pairs_of;
use node::NodeView;
use why::{compare, device_plugin};

/// Why a pod cannot be explained.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum PodError {
    /// The pod has no node yet.
    #[error(
        "pod {pod} is not scheduled yet (no spec.nodeName): its claims are allocated when it is"
    )]
    NotScheduled {
        /// `namespace/name`.
        pod: String,
    },
    /// A template entry whose claim the controller has not made yet.
    #[error(
        "pod {pod}: the claim for spec.resourceClaims[{entry}] is not created yet (no status.resourceClaimStatuses entry)"
    )]
    ClaimNotCreated {
        /// `namespace/name` of the pod.
        pod: String,
        /// The entry's name.
        entry: String,
    },
    /// An entry naming neither a claim nor a template.
    #[error(
        "pod {pod}: spec.resourceClaims[{entry}] names neither resourceClaimName nor resourceClaimTemplateName"
    )]
    BadEntry {
        /// `namespace/name` of the pod.
        pod: String,
        /// The entry's name.
        entry: String,
    },
    /// A claim the caller did not hand over.
    #[error("ResourceClaim {claim} was not read")]
    ClaimMissing {
        /// `namespace/name`.
        claim: String,
    },
    /// A claim without `status.allocation`.
    #[error("ResourceClaim {claim} is not allocated yet (no status.allocation)")]
    NotAllocated {
        /// `namespace/name`.
        claim: String,
    },
}

/// One of the pod's claims, as the scheduler finds it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ClaimRef {
    /// The entry's name in `spec.resourceClaims`.
    pub entry: String,
    /// The ResourceClaim's name (in the pod's namespace).
    pub claim: String,
}

/// `namespace/name` of the pod.
pub(crate) fn pod_key(pod: &Pod) -> String {
    let ns = pod.metadata.namespace.as_deref().unwrap_or("default");
    format!("{ns}/{}", pod.metadata.name.as_deref().unwrap_or(""))
}

/// The pod's claims: `spec.resourceClaims[].resourceClaimName`, or, for an entry made
/// from a template, `status.resourceClaimStatuses[].resourceClaimName` of the same name
/// (an entry whose status names no claim needs none and is skipped).
pub fn claim_refs(pod: &Pod) -> Result<Vec<ClaimRef>, PodError> {
    let entries = pod.spec.as_ref().and_then(|s| s.resource_claims.as_ref());
    let statuses = pod
        .status
        .as_ref()
        .and_then(|s| s.resource_claim_statuses.as_ref());
    let mut out = Vec::new();
    for e in entries.into_iter().flatten() {
        if let Some(c) = &e.resource_claim_name {
            out.push(ClaimRef {
                entry: e.name.clone(),
                claim: c.clone(),
            });
            continue;
        }
        if e.resource_claim_template_name.is_none() {
            return Err(PodError::BadEntry {
                pod: pod_key(pod),
                entry: e.name.clone(),
            });
        }
        let status = statuses.into_iter().flatten().find(|s| s.name == e.name);
        match status {
            None => {
                return Err(PodError::ClaimNotCreated {
                    pod: pod_key(pod),
                    entry: e.name.clone(),
                });
            }
            Some(s) => {
                if let Some(c) = &s.resource_claim_name {
                    out.push(ClaimRef {
                        entry: e.name.clone(),
                        claim: c.clone(),
                    });
                }
            }
        }
    }
    // The claim the scheduler made for the pod's extended resources (a DeviceClass with
    // `extendedResourceName`, DRAExtendedResource): `status.extendedResourceClaimStatus`.
    let extended = pod.status.as_ref();
    if let Some(x) = extended.and_then(|s| s.extended_resource_claim_status.as_ref()) {
        out.push(ClaimRef {
            entry: "(extended resources)".to_string(),
            claim: x.resource_claim_name.clone(),
        });
    }
    Ok(out)
}

/// What the caller read from the cluster.
#[derive(Debug, Clone, Copy)]
pub struct PodInput<'a> {
    /// The pod.
    pub pod: &'a Pod,
    /// The pod's claims (those [`claim_refs`] names).
    pub claims: &'a [ResourceClaim],
    /// ResourceSlices (those of other nodes are ignored).
    pub slices: &'a [ResourceSlice],
    /// Every other claim of the cluster; those allocated on the node count as used.
    pub others: &'a [ResourceClaim],
    /// DeviceClasses, to replay the stock allocator on the claims.
    pub classes: &'a [DeviceClass],
    /// What the node says about its devices (labels or annotations of topoalign's
    /// agent, name → value), shown for device-plugin pods.
    pub node_facts: &'a [(String, String)],
    /// The node's machine (a profile, a saved sysfs …), used instead of the topology the
    /// slices describe when it has every GPU and NIC the node publishes: it sees PCIe
    /// switches and C2C links the slices do not.
    pub topology: Option<&'a Topology>,
}

/// What a device is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    /// A GPU.
    Gpu,
    /// A NIC.
    Nic,
    /// A topoalign GPU+NIC pair.
    Pair,
    /// Something else the node publishes.
    Other,
    /// Not found in the node's ResourceSlices.
    Unknown,
}

/// One allocated device.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DeviceReport {
    /// The request (or `request/subrequest`).
    pub request: String,
    /// Driver.
    pub driver: String,
    /// Pool.
    pub pool: String,
    /// Device.
    pub device: String,
    /// What it is.
    pub kind: Kind,
    /// Its GPU's PCI address (GPU or pair).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gpu: Option<Bdf>,
    /// Its NIC's PCI address (NIC or pair).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub nic: Option<Bdf>,
    /// The pair's class (topoalign pairs).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub class: Option<PcieClass>,
}

/// One claim of the pod.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ClaimReport {
    /// The entry's name in the pod.
    pub entry: String,
    /// `namespace/name` of the claim.
    pub claim: String,
    /// Its devices, in allocation order.
    pub devices: Vec<DeviceReport>,
    /// Whether the stock allocator's first fit, replayed on the devices free to it, gives
    /// the same devices (`None` when it cannot be replayed; see the notes).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub first_fit: Option<bool>,
    /// The CEL selectors of its requests (beyond their DeviceClasses'), which narrow what
    /// the allocator may take.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub selectors: Vec<String>,
}

/// A GPU with one NIC.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PairReport {
    /// The GPU.
    pub gpu: Bdf,
    /// The NIC (PF).
    pub nic: Bdf,
    /// The NIC's RDMA device (`mlx5_0`), else its device name.
    pub nic_name: String,
    /// The class of the GPU→NIC path (`None` when the node's topology is unknown).
    pub class: Option<PcieClass>,
    /// Whether NCCL uses GPUDirect RDMA on it by default (`None` when unknown).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gdr: Option<bool>,
}

/// Pairs with their worst class and rank sum.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Pairs {
    /// GPU by GPU.
    pub pairs: Vec<PairReport>,
    /// The worst class.
    pub worst: Option<PcieClass>,
    /// Sum of class ranks (PIX 0 … SYS 4).
    pub rank_sum: u32,
}

impl Pairs {
    fn of(pairs: Vec<PairReport>) -> Pairs {
        let classes = pairs.iter().filter_map(|p| p.class);
        Pairs {
            worst: classes.clone().max(),
            rank_sum: classes.map(PcieClass::rank).sum(),
            pairs,
        }
    }

    fn key(&self) -> (Option<PcieClass>, u32) {
        (self.worst, self.rank_sum)
    }
}

/// A device-plugin pod: what can be known without the kubelet.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DevicePluginReport {
    /// Per container, the extended resources it asks for (`nvidia.com/gpu: 4`).
    pub resources: BTreeMap<String, BTreeMap<String, String>>,
    /// What the node says (topoalign's agent), name → value.
    pub node: BTreeMap<String, String>,
}

/// The whole answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PodExplanation {
    /// `namespace/name`.
    pub pod: String,
    /// The node.
    pub node: String,
    /// `claims` or `device-plugin`.
    pub source: &'static str,
    /// The pod's claims.
    pub claims: Vec<ClaimReport>,
    /// The GPU–NIC pairs the pod got.
    pub pairs: Pairs,
    /// The planner's best for the same shape on the devices free to the pod.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub best: Option<Pairs>,
    /// Why there is no best.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub best_error: Option<String>,
    /// True when the pod's pairs are as good as the best (or there is nothing to compare).
    pub as_good: bool,
    /// Why they differ (or why they do not).
    pub reasons: Vec<String>,
    /// What could not be known.
    pub notes: Vec<String>,
    /// For a pod without claims.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub device_plugin: Option<DevicePluginReport>,
}

/// The CEL expressions of a claim's requests (and their `firstAvailable` alternatives).
fn selectors(c: &ResourceClaim) -> Vec<String> {
    let requests = c.spec.iter().flat_map(|s| s.devices.iter());
    let requests = requests.flat_map(|d| d.requests.iter().flatten());
    let mut out = Vec::new();
    for r in requests {
        let exact = r.exactly.iter().flat_map(|e| e.selectors.iter().flatten());
        let alts = r.first_available.iter().flatten();
        let alts = alts.flat_map(|a| a.selectors.iter().flatten());
        out.extend(
            exact
                .chain(alts)
                .filter_map(|s| s.cel.as_ref())
                .map(|c| c.expression.clone()),
        );
    }
    out
}

fn claim_key(c: &ResourceClaim) -> String {
    let ns = c.metadata.namespace.as_deref().unwrap_or("default");
    format!("{ns}/{}", c.metadata.name.as_deref().unwrap_or(""))
}

fn allocation(c: &ResourceClaim) -> Option<Vec<AllocatedDevice>> {
    let a = c.status.as_ref()?.allocation.as_ref()?;
    let results = a.devices.as_ref().and_then(|d| d.results.as_ref());
    Some(
        results
            .into_iter()
            .flatten()
            .map(AllocatedDevice::from)
            .collect(),
    )
}

fn id_of(a: &AllocatedDevice) -> DeviceId {
    DeviceId {
        driver: a.driver.clone(),
        pool: a.pool.clone(),
        device: a.device.clone(),
    }
}

/// Explains a pod: see the module documentation.
pub fn explain_pod(input: &PodInput<'_>) -> Result<PodExplanation, PodError> {
    let pod = pod_key(input.pod);
    let node = input
        .pod
        .spec
        .as_ref()
        .and_then(|s| s.node_name.clone())
        .ok_or_else(|| PodError::NotScheduled { pod: pod.clone() })?;
    let refs = claim_refs(input.pod)?;
    let ns = input.pod.metadata.namespace.as_deref().unwrap_or("default");
    let mut mine = Vec::new();
    for r in &refs {
        let key = format!("{ns}/{}", r.claim);
        let c = input
            .claims
            .iter()
            .find(|c| claim_key(c) == key)
            .ok_or_else(|| PodError::ClaimMissing { claim: key.clone() })?;
        let alloc = allocation(c).ok_or(PodError::NotAllocated { claim: key.clone() })?;
        mine.push((r, key, c, alloc));
    }
    let mut notes = Vec::new();
    if refs.is_empty() {
        return Ok(device_plugin(input, pod, node));
    }
    let view = NodeView::new(input.slices, &node, input.topology, &mut notes);
    if view.devices.is_empty() {
        notes.push(format!(
            "node {node} has no ResourceSlices: what its devices are is unknown"
        ));
    }
    let mine_keys: BTreeSet<&str> = mine.iter().map(|m| m.1.as_str()).collect();

    // Devices of other claims on this node: their ids, GPUs and NICs, and who holds them.
    let pools: BTreeSet<(&str, &str)> = input
        .slices
        .iter()
        .filter(|s| s.spec.node_name.as_deref() == Some(node.as_str()))
        .map(|s| (s.spec.driver.as_str(), s.spec.pool.name.as_str()))
        .collect();
    let mut taken: BTreeSet<DeviceId> = BTreeSet::new();
    let mut usage = Usage::empty();
    let mut holders: BTreeMap<Bdf, String> = BTreeMap::new();
    for c in input.others {
        let key = claim_key(c);
        if mine_keys.contains(key.as_str()) {
            continue;
        }
        for a in allocation(c).into_iter().flatten() {
            if !pools.contains(&(a.driver.as_str(), a.pool.as_str())) {
                continue;
            }
            taken.insert(id_of(&a));
            let (g, n) = view.resolve(&a);
            for b in &g {
                holders.insert(*b, key.clone());
            }
            for b in &n {
                holders.insert(*b, key.clone());
            }
            usage.gpus.extend(g);
            usage.nics.extend(n);
        }
    }

    // The pod's devices, claim by claim, with a replay of the stock allocator.
    let node_devices = NodeDevices::gather(input.slices, &node);
    let empty = TopologyBuilder::new("none").build().ok();
    let mut claims = Vec::new();
    let mut pod_pairs = Vec::new();
    let mut earlier: BTreeSet<DeviceId> = BTreeSet::new();
    for (r, key, c, alloc) in &mine {
        let devices: Vec<DeviceReport> = alloc
            .iter()
            .map(|a| {
                let (g, n) = view.resolve(a);
                let kind = view.known(a).map_or(Kind::Unknown, |k| k.kind);
                if kind == Kind::Unknown {
                    notes.push(format!(
                        "device {}/{}/{} of claim {key} is not in node {node}'s ResourceSlices",
                        a.driver, a.pool, a.device
                    ));
                }
                let class = match (kind, g.first(), n.first()) {
                    (Kind::Pair, Some(g), Some(n)) => view.class(*g, *n),
                    _ => None,
                };
                DeviceReport {
                    request: a.request.clone(),
                    driver: a.driver.clone(),
                    pool: a.pool.clone(),
                    device: a.device.clone(),
                    kind,
                    gpu: g.first().copied(),
                    nic: n.first().copied(),
                    class,
                }
            })
            .collect();
        let first_fit = match &node_devices {
            Ok(nd) => replay(
                c,
                alloc,
                nd,
                &taken,
                &earlier,
                input.classes,
                key,
                &mut notes,
            ),
            Err(e) => {
                notes.push(format!(
                    "the stock allocator cannot be replayed on node {node}: {e}"
                ));
                None
            }
        };
        earlier.extend(alloc.iter().map(id_of));
        pod_pairs.extend(claim_pairs(&view, empty.as_ref(), alloc));
        claims.push(ClaimReport {
            entry: r.entry.clone(),
            claim: key.clone(),
            devices,
            first_fit,
            selectors: selectors(c),
        });
    }
    let pairs = Pairs::of(pod_pairs);
    let mut out = PodExplanation {
        pod,
        node,
        source: "claims",
        claims,
        pairs,
        best: None,
        best_error: None,
        as_good: true,
        reasons: Vec::new(),
        notes,
        device_plugin: None,
    };
    compare(&mut out, &view, &usage, &holders);
    Ok(out)
}

/// One claim's GPU–NIC pairs on the node: grouped by request (`gpu-3` with `nic-3`, a
/// pair device alone); when that leaves a GPU without NICs, the claim's GPUs and NICs
/// form one group.
fn claim_pairs(
    view: &NodeView,
    empty: Option<&Topology>,
    alloc: &[AllocatedDevice],
) -> Vec<PairReport> {
    let Some(topo) = view.topo.as_ref().or(empty) else {
        return Vec::new();
    };
    let resolve = |a: &AllocatedDevice| view.resolve(a);
    let mut groups = pairs_of(topo, alloc, resolve);
    let has_nics = alloc.iter().any(|a| !view.resolve(a).1.is_empty());
    if has_nics && groups.iter().any(|p| p.nics.is_empty()) {
        let one: Vec<AllocatedDevice> = alloc
            .iter()
            .map(|a| AllocatedDevice {
                // One numeric suffix: one group (see `pairs_of`).
                request: "claim-0".into(),
                ..a.clone()
            })
            .collect();
        groups = pairs_of(topo, &one, |a: &AllocatedDevice| view.resolve(a));
    }
    let mut out = Vec::new();
    for g in groups {
        for n in g.nics {
            out.push(view.pair(g.gpu, n));
        }
    }
    out
}

/// A node's devices read once, for the pairs of many pods' claims (`explain --all`'s
/// counts from the claims alone).
pub(crate) struct NodePairs {
    view: NodeView,
    empty: Option<Topology>,
}

impl NodePairs {
    /// Reads `node`'s devices from `slices` (a `topology` with all their addresses wins
    /// over the one the slices describe).
    pub(crate) fn new(slices: &[ResourceSlice], node: &str, topology: Option<&Topology>) -> Self {
        let mut notes = Vec::new();
        NodePairs {
            view: NodeView::new(slices, node, topology, &mut notes),
            empty: TopologyBuilder::new("none").build().ok(),
        }
    }

    /// The pairs of a pod whose claims got `allocs`.
    pub(crate) fn pairs<'a>(
        &self,
        allocs: impl IntoIterator<Item = &'a [AllocatedDevice]>,
    ) -> Pairs {
        let all = allocs
            .into_iter()
            .flat_map(|a| claim_pairs(&self.view, self.empty.as_ref(), a))
            .collect();
        Pairs::of(all)
    }
}

/// Replays the stock allocator's first fit for claim `c` on the node's devices minus
/// other claims' (`taken`) and the pod's earlier claims'; `Some(same devices)`.
#[allow(clippy::too_many_arguments)]
fn replay(
    c: &ResourceClaim,
    alloc: &[AllocatedDevice],
    node: &NodeDevices,
    taken: &BTreeSet<DeviceId>,
    earlier: &BTreeSet<DeviceId>,
    classes: &[DeviceClass],
    key: &str,
    notes: &mut Vec<String>,
) -> Option<bool> {
    let mut free = node.clone();
    free.mark_in_use(&taken.union(earlier).cloned().collect());
    let spec = c.spec.clone().unwrap_or_default();
    match first_fit(&spec, classes, &free, DEFAULT_BUDGET) {
        Ok(o) => {
            let got: BTreeSet<DeviceId> = alloc.iter().map(id_of).collect();
            let sim: Option<BTreeSet<DeviceId>> =
                o.allocation.map(|a| a.iter().map(id_of).collect());
            Some(sim.as_ref() == Some(&got))
        }
        Err(e) => {
            notes.push(format!(
                "the stock allocator cannot be replayed on claim {key}: {e}"
            ));
            None
        }
    }
}

mod node;
mod why;

#[cfg(test)]
mod tests;
