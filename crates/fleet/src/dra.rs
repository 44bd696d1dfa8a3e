//! Kubernetes DRA (resource.k8s.io/v1) allocation as the scheduler does it: devices
//! published in ResourceSlices (by PCI address, as a driver lists them), a ResourceClaim
//! with one request per GPU/NIC pair and a `matchAttribute` constraint per pair, and the
//! structured-parameters allocator's search: requests in order, devices in pool → slice
//! → device order, the first full solution wins (backtracking, no scoring), with a
//! search budget standing in for the scheduler's Filter timeout.

use serde::Serialize;
use thiserror::Error;

use crate::node::{NodeModel, NodeState};

/// The standard attribute naming a device's PCIe root complex.
pub const PCIE_ROOT: &str = "resource.kubernetes.io/pcieRoot";
/// The standard attribute naming a device's NUMA node (KEP-6072).
pub const NUMA_NODE: &str = "resource.kubernetes.io/numaNode";
/// The standard attribute with a device's PCI address.
pub const PCI_BUS_ID: &str = "resource.kubernetes.io/pciBusID";

/// Which device class a request asks for (the `deviceClassName`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum DeviceClass {
    /// A GPU.
    Gpu,
    /// A NIC function (VF or PF).
    Nic,
}

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
    /// The fully qualified attribute name.
    pub fn attribute(self) -> &'static str {
        match self {
            MatchOn::PcieRoot => PCIE_ROOT,
            MatchOn::NumaNode => NUMA_NODE,
        }
    }
}

/// An attribute value (DRA allows bool/int/string/version; we need two).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(untagged)]
pub enum AttrValue {
    /// A string attribute.
    String(String),
    /// An int attribute.
    Int(i64),
}

/// One published device.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Device {
    /// Device name within the pool (`gpu-0`, `nic-3`).
    pub name: String,
    /// Its class.
    pub class: DeviceClass,
    /// Position in [`NodeModel::gpus`] or [`NodeModel::nics`].
    pub position: usize,
    /// Attributes (name, value), in publication order.
    pub attributes: Vec<(String, AttrValue)>,
}

impl Device {
    /// The value of an attribute, if published.
    pub fn attribute(&self, name: &str) -> Option<&AttrValue> {
        self.attributes
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v)
    }
}

/// One ResourceSlice (a driver's devices on one node).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ResourceSlice {
    /// The driver.
    pub driver: String,
    /// The pool (the node).
    pub pool: String,
    /// Devices, by PCI address.
    pub devices: Vec<Device>,
}

/// Publishes a node's GPUs and NICs as two drivers would: one slice each, devices by PCI
/// address, with `pcieRoot`, `pciBusID` and (when the kernel knows it) `numaNode`.
pub fn publish(model: &NodeModel, pool: &str) -> Vec<ResourceSlice> {
    let topo = &*model.topology;
    let attrs = |pci: usize| {
        let dev = &topo.pci[pci];
        let mut a = vec![(
            PCI_BUS_ID.to_string(),
            AttrValue::String(dev.bdf.to_string()),
        )];
        if let Some(root) = topo.pcie_root(pci) {
            a.push((PCIE_ROOT.to_string(), AttrValue::String(root)));
        }
        // Not published for numa_node -1 (KEP-6072).
        if let Some(numa) = dev.numa_node {
            a.push((NUMA_NODE.to_string(), AttrValue::Int(i64::from(numa))));
        }
        a
    };
    let gpu_driver = match topo.gpus.first().map(|g| g.vendor) {
        Some(topoalign_topology::GpuVendor::Amd) => "gpu.amd.com",
        Some(topoalign_topology::GpuVendor::Intel) => "gpu.intel.com",
        _ => "gpu.nvidia.com",
    };
    let devices = |class: DeviceClass, prefix: &str, pcis: Vec<usize>| -> Vec<Device> {
        pcis.into_iter()
            .enumerate()
            .map(|(pos, pci)| Device {
                name: format!("{prefix}-{pos}"),
                class,
                position: pos,
                attributes: attrs(pci),
            })
            .collect()
    };
    let gpus = devices(
        DeviceClass::Gpu,
        "gpu",
        model.gpus.iter().map(|&g| topo.gpus[g].pci).collect(),
    );
    let nics = devices(
        DeviceClass::Nic,
        "nic",
        model.nics.iter().map(|&n| topo.nics[n].pci).collect(),
    );
    vec![
        ResourceSlice {
            driver: gpu_driver.to_string(),
            pool: pool.to_string(),
            devices: gpus,
        },
        ResourceSlice {
            driver: "dra.net".to_string(),
            pool: pool.to_string(),
            devices: nics,
        },
    ]
}

/// One request of a claim (`exactly`, ExactCount).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Request {
    /// Request name.
    pub name: String,
    /// Device class.
    pub class: DeviceClass,
    /// How many devices.
    pub count: u32,
}

/// A `matchAttribute` constraint over some requests (indices into the claim's requests).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Constraint {
    /// The requests it binds.
    pub requests: Vec<usize>,
    /// The attribute that must be equal on all their devices.
    pub attribute: MatchOn,
}

/// A ResourceClaim's device requests and constraints.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Claim {
    /// Requests, in order.
    pub requests: Vec<Request>,
    /// Constraints.
    pub constraints: Vec<Constraint>,
}

impl Claim {
    /// The claim a topology-minded user writes for `pairs` GPU+NIC pairs: requests
    /// `gpu-i` and `nic-i` (count 1 each) and one `matchAttribute` per pair.
    pub fn pairs(pairs: u32, on: MatchOn) -> Claim {
        let mut requests = Vec::new();
        let mut constraints = Vec::new();
        for i in 0..pairs as usize {
            requests.push(Request {
                name: format!("gpu-{i}"),
                class: DeviceClass::Gpu,
                count: 1,
            });
            requests.push(Request {
                name: format!("nic-{i}"),
                class: DeviceClass::Nic,
                count: 1,
            });
            constraints.push(Constraint {
                requests: vec![2 * i, 2 * i + 1],
                attribute: on,
            });
        }
        Claim {
            requests,
            constraints,
        }
    }
}

/// One allocated device (`status.allocation.devices.results[]`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct AllocationResult {
    /// Index of the request in the claim.
    pub request: usize,
    /// Index of the slice.
    pub slice: usize,
    /// Index of the device in the slice.
    pub device: usize,
}

/// Why the allocator gave up without an answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum DraError {
    /// The search looked at more candidate devices than its budget allows.
    #[error("allocation search exceeded its budget of {0} steps")]
    BudgetExceeded(u64),
}

/// The search state of one allocation.
struct Search<'a> {
    slices: &'a [ResourceSlice],
    claim: &'a Claim,
    /// Slots to fill: one per device wanted, as request indices.
    slots: Vec<usize>,
    /// Chosen (slice, device) per filled slot.
    chosen: Vec<(usize, usize)>,
    /// Per constraint: the value fixed so far and how many chosen devices fixed it.
    fixed: Vec<(Option<AttrValue>, usize)>,
    taken: &'a dyn Fn(DeviceClass, usize) -> bool,
    steps: u64,
    budget: u64,
}

impl Search<'_> {
    fn run(&mut self) -> Result<bool, DraError> {
        let slot = self.chosen.len();
        let Some(&req_idx) = self.slots.get(slot) else {
            return Ok(true);
        };
        let req = &self.claim.requests[req_idx];
        for s in 0..self.slices.len() {
            for d in 0..self.slices[s].devices.len() {
                let dev = &self.slices[s].devices[d];
                if dev.class != req.class {
                    continue;
                }
                self.steps += 1;
                if self.steps > self.budget {
                    return Err(DraError::BudgetExceeded(self.budget));
                }
                if (self.taken)(dev.class, dev.position) || self.chosen.contains(&(s, d)) {
                    continue;
                }
                let Some(applied) = self.apply(req_idx, dev) else {
                    continue;
                };
                self.chosen.push((s, d));
                if self.run()? {
                    return Ok(true);
                }
                self.chosen.pop();
                self.undo(&applied);
            }
        }
        Ok(false)
    }

    /// Checks the constraints naming `req_idx` against `dev`; on success records the
    /// values and returns the touched constraints.
    fn apply(&mut self, req_idx: usize, dev: &Device) -> Option<Vec<usize>> {
        let mut touched = Vec::new();
        for (ci, c) in self.claim.constraints.iter().enumerate() {
            if !c.requests.contains(&req_idx) {
                continue;
            }
            let value = dev.attribute(c.attribute.attribute())?;
            if let (Some(v), _) = &self.fixed[ci]
                && v != value
            {
                return None;
            }
            touched.push(ci);
        }
        for &ci in &touched {
            let c = &self.claim.constraints[ci];
            if let Some(v) = dev.attribute(c.attribute.attribute()) {
                let slot = &mut self.fixed[ci];
                slot.0.get_or_insert_with(|| v.clone());
                slot.1 += 1;
            }
        }
        Some(touched)
    }

    fn undo(&mut self, touched: &[usize]) {
        for &ci in touched {
            let slot = &mut self.fixed[ci];
            slot.1 -= 1;
            if slot.1 == 0 {
                slot.0 = None;
            }
        }
    }
}

/// Allocates `claim` from `slices`, skipping devices for which `taken(class, position)`
/// is true. `Ok(None)`: no solution exists. `Err`: the budget ran out first.
pub fn allocate(
    slices: &[ResourceSlice],
    claim: &Claim,
    taken: &dyn Fn(DeviceClass, usize) -> bool,
    budget: u64,
) -> Result<Option<Vec<AllocationResult>>, DraError> {
    let slots = claim
        .requests
        .iter()
        .enumerate()
        .flat_map(|(i, r)| std::iter::repeat_n(i, r.count as usize))
        .collect();
    let mut search = Search {
        slices,
        claim,
        slots,
        chosen: Vec::new(),
        fixed: vec![(None, 0); claim.constraints.len()],
        taken,
        steps: 0,
        budget,
    };
    if !search.run()? {
        return Ok(None);
    }
    Ok(Some(
        search
            .slots
            .iter()
            .zip(&search.chosen)
            .map(|(&request, &(slice, device))| AllocationResult {
                request,
                slice,
                device,
            })
            .collect(),
    ))
}

/// GPU positions and NIC positions of an allocation, in claim order.
pub type PairPositions = (Vec<usize>, Vec<usize>);

/// Allocates `pairs` GPU+NIC pairs on a node in `state`: GPU and NIC positions, in
/// claim order.
pub fn allocate_pairs(
    slices: &[ResourceSlice],
    state: &NodeState,
    pairs: u32,
    on: MatchOn,
    budget: u64,
) -> Result<Option<PairPositions>, DraError> {
    let claim = Claim::pairs(pairs, on);
    let taken = |class: DeviceClass, pos: usize| match class {
        DeviceClass::Gpu => state.gpu_used.get(pos).copied().unwrap_or(true),
        DeviceClass::Nic => state.nic_used.get(pos).copied().unwrap_or(true),
    };
    let Some(results) = allocate(slices, &claim, &taken, budget)? else {
        return Ok(None);
    };
    let mut gpus = Vec::new();
    let mut nics = Vec::new();
    for r in results {
        let dev = &slices[r.slice].devices[r.device];
        match dev.class {
            DeviceClass::Gpu => gpus.push(dev.position),
            DeviceClass::Nic => nics.push(dev.position),
        }
    }
    Ok(Some((gpus, nics)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::model;
    use topoalign_topology::PcieClass;

    #[test]
    fn publishes_standard_attributes_in_address_order() {
        let m = model("mi300x-8");
        let slices = publish(&m, "node-0");
        assert_eq!(slices.len(), 2);
        assert_eq!(slices[0].driver, "gpu.amd.com");
        assert_eq!(slices[0].devices.len(), 8);
        assert_eq!(slices[1].devices.len(), 32);
        let g0 = &slices[0].devices[0];
        assert_eq!(
            g0.attribute(PCI_BUS_ID),
            Some(&AttrValue::String("0000:11:00.0".into()))
        );
        assert_eq!(
            g0.attribute(PCIE_ROOT),
            Some(&AttrValue::String("pci0000:08".into()))
        );
        assert_eq!(g0.attribute(NUMA_NODE), Some(&AttrValue::Int(0)));
    }

    #[test]
    fn pcie_root_pairs_are_pix_on_mi300x() {
        let m = model("mi300x-8");
        let slices = publish(&m, "n");
        let s = NodeState::new(&m);
        let (g, n) = allocate_pairs(&slices, &s, 4, MatchOn::PcieRoot, 10_000)
            .unwrap()
            .unwrap();
        assert_eq!(g, vec![0, 1, 2, 3]);
        // First fit: the first VF under each GPU's root.
        assert_eq!(n, vec![0, 4, 8, 12]);
        assert!(m.pairs(&g, &n).iter().all(|p| p.class == PcieClass::Pix));
    }

    #[test]
    fn numa_match_takes_the_first_vfs_of_the_node() {
        let m = model("mi300x-8");
        let slices = publish(&m, "n");
        let s = NodeState::new(&m);
        let (g, n) = allocate_pairs(&slices, &s, 4, MatchOn::NumaNode, 10_000)
            .unwrap()
            .unwrap();
        assert_eq!(g, vec![0, 1, 2, 3]);
        // All four VFs of PF0: the packed choice, one PIX and three NODE pairs.
        assert_eq!(n, vec![0, 1, 2, 3]);
        let pairs = m.pairs(&g, &n);
        assert_eq!(pairs.iter().filter(|p| p.gdr).count(), 1);
    }

    #[test]
    fn backtracks_past_a_gpu_whose_root_has_no_free_nic() {
        let m = model("mi300x-8");
        let slices = publish(&m, "n");
        let mut s = NodeState::new(&m);
        // Use up the four VFs under GPU0's root.
        for v in 0..4 {
            s.nic_used[v] = true;
        }
        let (g, n) = allocate_pairs(&slices, &s, 1, MatchOn::PcieRoot, 10_000)
            .unwrap()
            .unwrap();
        assert_eq!((g, n), (vec![1], vec![4]));
    }

    #[test]
    fn no_solution_when_gpus_and_nics_never_share_a_root() {
        // GB300: GPUs in domains 0008.., NICs in 0101..: pcieRoot never matches (seed 001).
        let m = model("gb300-4");
        let slices = publish(&m, "n");
        let s = NodeState::new(&m);
        assert_eq!(
            allocate_pairs(&slices, &s, 1, MatchOn::PcieRoot, 10_000).unwrap(),
            None
        );
        assert!(
            allocate_pairs(&slices, &s, 2, MatchOn::NumaNode, 10_000)
                .unwrap()
                .is_some()
        );
    }

    #[test]
    fn budget_stops_a_hopeless_search() {
        let m = model("mi300x-8");
        let slices = publish(&m, "n");
        let mut s = NodeState::new(&m);
        // Leave GPUs free but only NICs under root of GPU7: 8 pairs cannot match.
        for v in 0..28 {
            s.nic_used[v] = true;
        }
        let r = allocate_pairs(&slices, &s, 4, MatchOn::PcieRoot, 500);
        assert_eq!(r, Err(DraError::BudgetExceeded(500)));
        let r = allocate_pairs(&slices, &s, 2, MatchOn::PcieRoot, 1_000_000).unwrap();
        assert_eq!(r, None);
    }
}
