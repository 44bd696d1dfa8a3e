//! The `dra-first-fit` policy: Kubernetes DRA (resource.k8s.io/v1) as the stock drivers
//! and the scheduler do it, decided by the one model of the allocator,
//! [`topoalign_dra::alloc::first_fit`] (the one the extender judges with, `claims --explain`
//! shows and the e2e checks against kube-scheduler).
//!
//! A node's GPUs and NICs are published as two stock drivers publish them: one
//! ResourceSlice each, devices by PCI address, with the standard `pciBusID`, `pcieRoot`
//! and (when the kernel knows it) `numaNode` attributes. A pod's claim has one request per
//! GPU and per NIC and a `matchAttribute` per pair. The claim is worked out once per node
//! type and size ([`ClaimSearch`]) and searched with the node's devices in use, which is
//! `first_fit` after `mark_in_use`: requests in order, devices in pool → slice → device
//! order, the first full solution wins (backtracking, no scoring), within a search budget
//! standing in for the scheduler's Filter timeout.

use k8s_openapi::api::resource::v1::{
    Device, DeviceAttribute, DeviceClaim, DeviceClass, DeviceConstraint, DeviceRequest,
    ExactDeviceRequest, ResourceClaimSpec, ResourcePool, ResourceSlice, ResourceSliceSpec,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::Serialize;
use topoalign_dra::claim::{MixedSpec, stand_in_classes};
use topoalign_dra::limits::MAX_DEVICES_PER_CLAIM;
use topoalign_dra::{
    alloc::{ClaimSearch, NodeDevices},
    attr,
};
use topoalign_topology::GpuVendor;

use crate::error::FleetError;
use crate::node::{NodeModel, NodeState};

/// The NIC driver's name (dranet).
pub(crate) const NIC_DRIVER: &str = "dra.net";

/// The attribute a pair's `matchAttribute` constraint names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
#[serde(rename_all = "camelCase")]
pub enum MatchOn {
    /// `resource.kubernetes.io/pcieRoot`.
    #[cfg_attr(feature = "clap", value(name = "pcieRoot"))]
    PcieRoot,
    /// `resource.kubernetes.io/numaNode`.
    #[cfg_attr(feature = "clap", value(name = "numaNode"))]
    NumaNode,
}

impl MatchOn {
    /// Both, in the order [`DraNode`] keeps its claims.
    const ALL: [MatchOn; 2] = [MatchOn::PcieRoot, MatchOn::NumaNode];

    /// The place in [`MatchOn::ALL`].
    fn index(self) -> usize {
        match self {
            MatchOn::PcieRoot => 0,
            MatchOn::NumaNode => 1,
        }
    }

    /// The fully qualified attribute name.
    pub fn attribute(self) -> &'static str {
        match self {
            MatchOn::PcieRoot => attr::PCIE_ROOT,
            MatchOn::NumaNode => attr::NUMA_NODE_STD,
        }
    }
}

/// The GPU driver (and its DeviceClass) of a node: the vendor's.
pub(crate) fn gpu_driver(model: &NodeModel) -> &'static str {
    let topo = &*model.topology;
    match topo.gpus.first().map(|g| g.vendor) {
        Some(GpuVendor::Amd) => "gpu.amd.com",
        Some(GpuVendor::Intel) => "gpu.intel.com",
        _ => "gpu.nvidia.com",
    }
}

/// Publishes a node's GPUs (`gpu-N`) and NICs (`nic-N`, N their positions in
/// [`NodeModel::gpus`] and [`NodeModel::nics`]) as two drivers would: one slice each in
/// the pool `node`, devices by PCI address, with `pciBusID`, `pcieRoot` and (not for NUMA
/// node -1, KEP-6072) `numaNode`.
pub(crate) fn publish(model: &NodeModel, node: &str) -> Vec<ResourceSlice> {
    let topo = &*model.topology;
    let string = |s: String| DeviceAttribute {
        string: Some(s),
        ..Default::default()
    };
    let device = |name: String, pci: usize| {
        let dev = &topo.pci[pci];
        let mut attributes = std::collections::BTreeMap::new();
        attributes.insert(attr::PCI_BUS_ID.to_string(), string(dev.bdf.to_string()));
        if let Some(root) = topo.pcie_root(pci) {
            attributes.insert(attr::PCIE_ROOT.to_string(), string(root));
        }
        if let Some(numa) = dev.numa_node {
            let numa = DeviceAttribute {
                int: Some(i64::from(numa)),
                ..Default::default()
            };
            attributes.insert(attr::NUMA_NODE_STD.to_string(), numa);
        }
        Device {
            name,
            attributes: Some(attributes),
            ..Default::default()
        }
    };
    let slice = |driver: &str, devices: Vec<Device>| ResourceSlice {
        metadata: ObjectMeta {
            name: Some(format!("{node}-{driver}")),
            ..Default::default()
        },
        spec: ResourceSliceSpec {
            driver: driver.to_string(),
            node_name: Some(node.to_string()),
            pool: ResourcePool {
                name: node.to_string(),
                generation: 1,
                resource_slice_count: 1,
            },
            devices: Some(devices),
            ..Default::default()
        },
    };
    let gpus = (model.gpus.iter().enumerate())
        .map(|(pos, &g)| device(format!("gpu-{pos}"), topo.gpus[g].pci))
        .collect();
    let nics = (model.nics.iter().enumerate())
        .map(|(pos, &n)| device(format!("nic-{pos}"), topo.nics[n].pci))
        .collect();
    vec![slice(gpu_driver(model), gpus), slice(NIC_DRIVER, nics)]
}

/// The DeviceClasses of the two drivers, named after them, each selecting its driver's
/// devices (`device.driver == "…"`).
pub(crate) fn classes(model: &NodeModel) -> Vec<DeviceClass> {
    let gpu = gpu_driver(model).to_string();
    stand_in_classes(&MixedSpec {
        node: String::new(),
        pairs: 0,
        nics_per_gpu: 1,
        gpu_class: gpu.clone(),
        gpu_driver: gpu,
        nic_class: NIC_DRIVER.to_string(),
        nic_driver: NIC_DRIVER.to_string(),
    })
}

/// The claim a topology-minded user writes for `pairs` GPU+NIC pairs: requests `gpu-i`
/// (class `gpu_class`) and `nic-i` ([`NIC_DRIVER`]), one device each, and one
/// `matchAttribute` per pair.
pub(crate) fn pairs_claim(pairs: u32, on: MatchOn, gpu_class: &str) -> ResourceClaimSpec {
    let request = |name: String, class: &str| DeviceRequest {
        name,
        exactly: Some(ExactDeviceRequest {
            device_class_name: class.to_string(),
            count: Some(1),
            allocation_mode: Some("ExactCount".into()),
            ..Default::default()
        }),
        first_available: None,
    };
    let mut requests = Vec::new();
    let mut constraints = Vec::new();
    for i in 0..pairs {
        requests.push(request(format!("gpu-{i}"), gpu_class));
        requests.push(request(format!("nic-{i}"), NIC_DRIVER));
        constraints.push(DeviceConstraint {
            match_attribute: Some(on.attribute().to_string()),
            requests: Some(vec![format!("gpu-{i}"), format!("nic-{i}")]),
            distinct_attribute: None,
        });
    }
    ResourceClaimSpec {
        devices: Some(DeviceClaim {
            requests: Some(requests),
            constraints: Some(constraints),
            ..Default::default()
        }),
    }
}

/// A device of the node: a GPU or a NIC, by its position in [`NodeModel::gpus`] or
/// [`NodeModel::nics`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Place {
    Gpu(usize),
    Nic(usize),
}

/// What the allocator did with a pod's claim on one node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Allocation {
    /// The first full solution: GPU and NIC positions, in claim order.
    Pairs {
        /// GPU positions.
        gpus: Vec<usize>,
        /// NIC positions.
        nics: Vec<usize>,
    },
    /// No solution on this node's free devices.
    NoFit,
    /// The search tried `budget` devices without an answer.
    BudgetExceeded,
}

/// A node type as the allocator sees it, built once: its published devices and, per
/// [`MatchOn`] and claim size (1 pair up to one per GPU, within the allocator's limit of
/// [`MAX_DEVICES_PER_CLAIM`] devices), the pairs claim worked out against them.
#[derive(Debug, Clone)]
pub struct DraNode {
    /// The devices, as [`NodeDevices::gather`] finds them in [`publish`]'s slices.
    devices: NodeDevices,
    /// The DeviceClasses the claims name.
    classes: Vec<DeviceClass>,
    /// The GPU driver's class.
    gpu_class: String,
    /// Per device, in [`NodeDevices::ids`] order: which GPU or NIC it is.
    places: Vec<Place>,
    /// Per GPU position, its place in [`NodeDevices::ids`] order; the same per NIC.
    gpu_index: Vec<usize>,
    nic_index: Vec<usize>,
    /// Per [`MatchOn::ALL`], the claims of 1, 2, … pairs.
    claims: [Vec<ClaimSearch>; 2],
}

impl DraNode {
    /// Publishes `model` as the pool `node` and prepares its claims.
    pub fn new(model: &NodeModel, node: &str) -> Result<DraNode, FleetError> {
        let devices = NodeDevices::gather(&publish(model, node), node)?;
        let gpu_driver = gpu_driver(model);
        let mut places = Vec::with_capacity(devices.len());
        let mut gpu_index = vec![None; model.gpus.len()];
        let mut nic_index = vec![None; model.nics.len()];
        for (i, id) in devices.ids().enumerate() {
            let place = match id.device.split_once('-') {
                Some(("gpu", n)) if id.driver == gpu_driver => n.parse().ok().map(Place::Gpu),
                Some(("nic", n)) if id.driver == NIC_DRIVER => n.parse().ok().map(Place::Nic),
                _ => None,
            };
            let slot = match place {
                Some(Place::Gpu(p)) => gpu_index.get_mut(p),
                Some(Place::Nic(p)) => nic_index.get_mut(p),
                None => None,
            };
            let (Some(place), Some(slot)) = (place, slot) else {
                return Err(unpublished(model, format!("device {id:?}")));
            };
            *slot = Some(i);
            places.push(place);
        }
        let every = |index: Vec<Option<usize>>| index.into_iter().collect::<Option<Vec<_>>>();
        let (Some(gpu_index), Some(nic_index)) = (every(gpu_index), every(nic_index)) else {
            return Err(unpublished(model, "a GPU or NIC".to_string()));
        };
        let mut node = DraNode {
            devices,
            classes: classes(model),
            gpu_class: gpu_driver.to_string(),
            places,
            gpu_index,
            nic_index,
            claims: [Vec::new(), Vec::new()],
        };
        let most = model.gpus.len().min(MAX_DEVICES_PER_CLAIM / 2);
        for on in MatchOn::ALL {
            node.claims[on.index()] = (1..=most as u32)
                .map(|pairs| node.prepare(pairs, on))
                .collect::<Result<_, _>>()?;
        }
        Ok(node)
    }

    fn prepare(&self, pairs: u32, on: MatchOn) -> Result<ClaimSearch, FleetError> {
        let claim = pairs_claim(pairs, on, &self.gpu_class);
        Ok(ClaimSearch::new(&claim, &self.classes, &self.devices)?)
    }

    /// Allocates `pairs` GPU+NIC pairs matched on `on` from the devices free in `state`,
    /// trying at most `budget` devices.
    pub fn allocate(
        &self,
        state: &NodeState,
        pairs: u32,
        on: MatchOn,
        budget: u64,
    ) -> Result<Allocation, FleetError> {
        let prepared;
        let claim = match (pairs as usize).checked_sub(1) {
            Some(i) if i < self.claims[on.index()].len() => &self.claims[on.index()][i],
            _ => {
                prepared = self.prepare(pairs, on)?;
                &prepared
            }
        };
        Ok(self.search(claim, state, pairs, budget))
    }

    /// The claim of `pairs` GPUs and `pairs` NICs with no constraint between them: what
    /// a user writes who asks for counts only (the `simulate --gangs` stock policy).
    pub fn unmatched_claim(&self, pairs: u32) -> Result<ClaimSearch, FleetError> {
        let mut claim = pairs_claim(pairs, MatchOn::PcieRoot, &self.gpu_class);
        if let Some(d) = claim.devices.as_mut() {
            d.constraints = None;
        }
        Ok(ClaimSearch::new(&claim, &self.classes, &self.devices)?)
    }

    /// Runs a claim prepared against this node type's devices ([`DraNode::unmatched_claim`])
    /// with the devices in use in `state`, trying at most `budget` devices.
    pub fn search(
        &self,
        claim: &ClaimSearch,
        state: &NodeState,
        pairs: u32,
        budget: u64,
    ) -> Allocation {
        let mut in_use = vec![false; self.places.len()];
        let used = |flags: &[bool], index: &[usize], in_use: &mut [bool]| {
            for (&u, &i) in flags.iter().zip(index) {
                in_use[i] = u;
            }
        };
        used(&state.gpu_used, &self.gpu_index, &mut in_use);
        used(&state.nic_used, &self.nic_index, &mut in_use);
        let found = claim.search(&in_use, budget);
        let Some(devices) = found.devices else {
            return if found.gave_up {
                Allocation::BudgetExceeded
            } else {
                Allocation::NoFit
            };
        };
        let mut gpus = Vec::with_capacity(pairs as usize);
        let mut nics = Vec::with_capacity(pairs as usize);
        for d in devices {
            match self.places[d] {
                Place::Gpu(p) => gpus.push(p),
                Place::Nic(p) => nics.push(p),
            }
        }
        Allocation::Pairs { gpus, nics }
    }
}

fn unpublished(model: &NodeModel, what: String) -> FleetError {
    FleetError::UnusableNode {
        profile: model.topology.name.clone(),
        reason: format!("{what} does not map to one published device"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::model;
    use topoalign_topology::PcieClass;

    fn string(s: &str) -> Option<DeviceAttribute> {
        Some(DeviceAttribute {
            string: Some(s.to_string()),
            ..Default::default()
        })
    }

    fn pairs(a: Allocation) -> (Vec<usize>, Vec<usize>) {
        match a {
            Allocation::Pairs { gpus, nics } => (gpus, nics),
            other => panic!("expected pairs, got {other:?}"),
        }
    }

    #[test]
    fn publishes_standard_attributes_in_address_order() {
        let m = model("mi300x-8");
        let slices = publish(&m, "node-0");
        assert_eq!(slices.len(), 2);
        assert_eq!(slices[0].spec.driver, "gpu.amd.com");
        assert_eq!(slices[1].spec.driver, NIC_DRIVER);
        let gpus = slices[0].spec.devices.as_deref().unwrap();
        assert_eq!(gpus.len(), 8);
        assert_eq!(slices[1].spec.devices.as_deref().unwrap().len(), 32);
        let g0 = gpus[0].attributes.as_ref().unwrap();
        assert_eq!(g0.get(attr::PCI_BUS_ID).cloned(), string("0000:11:00.0"));
        assert_eq!(g0.get(attr::PCIE_ROOT).cloned(), string("pci0000:08"));
        assert_eq!(g0[attr::NUMA_NODE_STD].int, Some(0));
        let gpu_class = classes(&m);
        assert_eq!(gpu_class[0].metadata.name.as_deref(), Some("gpu.amd.com"));
    }

    #[test]
    fn pcie_root_pairs_are_pix_on_mi300x() {
        let m = model("mi300x-8");
        let node = DraNode::new(&m, "n").unwrap();
        let s = NodeState::new(&m);
        let (g, n) = pairs(node.allocate(&s, 4, MatchOn::PcieRoot, 10_000).unwrap());
        assert_eq!(g, vec![0, 1, 2, 3]);
        // First fit: the first VF under each GPU's root.
        assert_eq!(n, vec![0, 4, 8, 12]);
        assert!(m.pairs(&g, &n).iter().all(|p| p.class == PcieClass::Pix));
    }

    #[test]
    fn numa_match_takes_the_first_vfs_of_the_node() {
        let m = model("mi300x-8");
        let node = DraNode::new(&m, "n").unwrap();
        let s = NodeState::new(&m);
        let (g, n) = pairs(node.allocate(&s, 4, MatchOn::NumaNode, 10_000).unwrap());
        assert_eq!(g, vec![0, 1, 2, 3]);
        // All four VFs of PF0: the packed choice, one PIX and three NODE pairs.
        assert_eq!(n, vec![0, 1, 2, 3]);
        let p = m.pairs(&g, &n);
        assert_eq!(p.iter().filter(|p| p.gdr).count(), 1);
    }

    #[test]
    fn backtracks_past_a_gpu_whose_root_has_no_free_nic() {
        let m = model("mi300x-8");
        let node = DraNode::new(&m, "n").unwrap();
        let mut s = NodeState::new(&m);
        // Use up the four VFs under GPU0's root.
        for v in 0..4 {
            s.nic_used[v] = true;
        }
        let got = node.allocate(&s, 1, MatchOn::PcieRoot, 10_000).unwrap();
        assert_eq!(pairs(got), (vec![1], vec![4]));
        // Devices in use are skipped: GPU1 held, the pair is GPU2 and its first VF.
        s.gpu_used[1] = true;
        let got = node.allocate(&s, 1, MatchOn::PcieRoot, 10_000).unwrap();
        assert_eq!(pairs(got), (vec![2], vec![8]));
    }

    #[test]
    fn no_solution_when_gpus_and_nics_never_share_a_root() {
        // GB300: GPUs in domains 0008.., NICs in 0101..: pcieRoot never matches (seed 001).
        let m = model("gb300-4");
        let node = DraNode::new(&m, "n").unwrap();
        let s = NodeState::new(&m);
        let got = node.allocate(&s, 1, MatchOn::PcieRoot, 10_000).unwrap();
        assert_eq!(got, Allocation::NoFit);
        let got = node.allocate(&s, 2, MatchOn::NumaNode, 10_000).unwrap();
        assert!(matches!(got, Allocation::Pairs { .. }), "{got:?}");
    }

    #[test]
    fn the_budget_counts_free_devices_only_and_stops_a_hopeless_search() {
        let m = model("mi300x-8");
        let node = DraNode::new(&m, "n").unwrap();
        let mut s = NodeState::new(&m);
        // Only the VFs under GPU7's root left: 2 pairs cannot match.
        for v in 0..28 {
            s.nic_used[v] = true;
        }
        let full = node.allocate(&s, 2, MatchOn::PcieRoot, 1_000_000).unwrap();
        assert_eq!(full, Allocation::NoFit);
        // The search tries the 8 GPUs and, under each, the 4 free VFs (never the 28
        // held ones): 8 × (1 + 4) for the first pair, and for GPU7 + its VF the second
        // pair's 7 GPUs × (1 + 3) on each of 4 VFs.
        let steps = 8 * 5 + 4 * 7 * 4;
        assert_eq!(
            node.allocate(&s, 2, MatchOn::PcieRoot, steps).unwrap(),
            Allocation::NoFit
        );
        assert_eq!(
            node.allocate(&s, 2, MatchOn::PcieRoot, steps - 1).unwrap(),
            Allocation::BudgetExceeded
        );
    }

    #[test]
    fn the_prepared_search_is_first_fit_after_mark_in_use() {
        use std::collections::BTreeSet;
        let m = model("mi300x-8");
        let node = DraNode::new(&m, "n").unwrap();
        let mut s = NodeState::new(&m);
        for v in [0, 1, 5, 9, 12, 13, 14, 15] {
            s.nic_used[v] = true;
        }
        s.gpu_used[2] = true;
        let mut free = node.devices.clone();
        let ids = node.devices.ids();
        let held: BTreeSet<_> = ids
            .zip(&node.places)
            .filter(|(_, p)| match **p {
                Place::Gpu(g) => s.gpu_used[g],
                Place::Nic(n) => s.nic_used[n],
            })
            .map(|(id, _)| id.clone())
            .collect();
        free.mark_in_use(&held);
        for on in MatchOn::ALL {
            for n in 1..=7 {
                let claim = pairs_claim(n, on, "gpu.amd.com");
                let out =
                    topoalign_dra::alloc::first_fit(&claim, &node.classes, &free, 100_000).unwrap();
                let want: Option<(Vec<usize>, Vec<usize>)> = out.allocation.map(|a| {
                    let pos = |d: &str| d[4..].parse::<usize>().unwrap();
                    let gpus = a.iter().filter(|d| d.device.starts_with("gpu-"));
                    let nics = a.iter().filter(|d| d.device.starts_with("nic-"));
                    (
                        gpus.map(|d| pos(&d.device)).collect(),
                        nics.map(|d| pos(&d.device)).collect(),
                    )
                });
                let got = match node.allocate(&s, n, on, 100_000).unwrap() {
                    Allocation::Pairs { gpus, nics } => Some((gpus, nics)),
                    _ => None,
                };
                assert_eq!(got, want, "{on:?} {n} pairs");
            }
        }
    }
}
