//! `claims --explain` on a whole node: the node's devices as the stock allocator sees
//! them (this driver's simulated pool, or two foreign drivers' slices), the devices
//! already in use taken out, and the planner's request that matches the claim; then
//! [`explain`] compares the two.

use k8s_openapi::api::resource::v1::{DeviceClass, ResourceClaimSpec, ResourceSlice};
use thiserror::Error;
use topoalign_plan::{NicCount, NicRole, Request, Usage};
use topoalign_topology::{Bdf, PcieClass, Topology};

use crate::alloc::AllocatedDevice;
use crate::alloc::NodeDevices;
use crate::claim::{ClaimShape, ClaimSpec};
use crate::claim::{CpuClaim, CpuRelease, cpu_device_class, cpu_slices};
use crate::claim::{MixedClaim, MixedSpec, stand_in_classes};
use crate::explain::claim::{Explanation, explain, mark_usage, resolve_with};
use crate::foreign::devices::{ForeignDevice, gpus_and_nics};
use crate::foreign::topology_of;
use crate::publish::device_classes;
use crate::publish::slices_for;
use crate::publish::{Inventory, PublishOptions};
use crate::{DraError, attr};

/// Why a claim cannot be explained on a node.
#[derive(Debug, Error)]
pub enum ExplainError {
    /// The DRA model refused the node, the claim or the allocation.
    #[error(transparent)]
    Dra(#[from] DraError),
    /// The usage file names devices the node does not have.
    #[error("--used names devices this node does not have: {}", list(.0))]
    UnknownUsage(Vec<Bdf>),
}

fn list(bdfs: &[Bdf]) -> String {
    let all: Vec<String> = bdfs.iter().map(ToString::to_string).collect();
    all.join(", ")
}

/// A node as this project's driver would publish it, seen by the stock allocator.
#[derive(Debug, Clone)]
pub struct SimulatedNode {
    name: String,
    inventory: Inventory,
    devices: NodeDevices,
    classes: Vec<DeviceClass>,
}

impl SimulatedNode {
    /// Publishes `topo` as node `name` (checked to be a valid node name) and gathers its
    /// devices as the allocator sees them.
    pub fn new(topo: &Topology, name: &str) -> Result<SimulatedNode, DraError> {
        SimulatedNode::with_cpus(topo, name, None)
    }

    /// [`SimulatedNode::new`], with the node's CPUs published by dra-driver-cpu as
    /// `cpus` expects them (its device mode; v0.2.0's NUMA keys when it matches on
    /// `dra.net/numaNode`, else the newest's) and its DeviceClass.
    pub fn with_cpus(
        topo: &Topology,
        name: &str,
        cpus: Option<&CpuClaim>,
    ) -> Result<SimulatedNode, DraError> {
        let inventory = Inventory::new(topo, &PublishOptions::default());
        let mut slices = slices_for(&inventory, name, 1)?;
        let mut classes = device_classes();
        if let Some(c) = cpus {
            let release = match c.numa_attribute.as_str() {
                attr::NUMA_NODE_COMPAT => CpuRelease::V0_2,
                _ => CpuRelease::Main,
            };
            slices.extend(cpu_slices(topo, name, c.mode, release)?);
            classes.push(cpu_device_class(&c.class));
        }
        let devices = NodeDevices::gather(&slices, name)?;
        Ok(SimulatedNode {
            name: name.to_string(),
            inventory,
            devices,
            classes,
        })
    }

    /// What the stock allocator picks for `claim` with `usage` already taken, within
    /// `budget` devices tried, next to the planner's optimum for `request` (see
    /// [`own_request`]) on `topo`, the topology this node was built from.
    pub fn explain(
        &self,
        claim: &ResourceClaimSpec,
        request: &Request,
        topo: &Topology,
        usage: &Usage,
        budget: u64,
    ) -> Result<Explanation, ExplainError> {
        let mut devices = self.devices.clone();
        let unknown = mark_usage(&mut devices, &self.inventory, &self.name, usage);
        if !unknown.is_empty() {
            return Err(ExplainError::UnknownUsage(unknown));
        }
        let resolve = resolve_with(&self.inventory);
        let e = explain(
            claim,
            &self.classes,
            &devices,
            budget,
            topo,
            request,
            usage,
            resolve,
        )?;
        Ok(e)
    }
}

/// The planner's request matching a claim for this project's driver: N GPUs with K
/// RDMA-capable physical NICs each, within the claim's class bound (the ladder admits
/// same-NUMA pairs at worst).
pub fn own_request(spec: &ClaimSpec) -> Request {
    let mut req = Request::new(
        spec.pairs as usize,
        NicCount::PerGpu(spec.nics_per_gpu as usize),
    );
    req.require_rdma = true;
    req.nic_role = NicRole::Pf;
    req.max_pair = match spec.shape {
        ClaimShape::Ladder => Some(PcieClass::Node),
        ClaimShape::Pairs => spec
            .max_rank
            .and_then(|r| PcieClass::ALL.into_iter().find(|c| c.rank() == r)),
    };
    req.cpus = spec.cpus.as_ref().map_or(0, |c| c.count as usize);
    req
}

/// What the stock allocator picks for a claim written by
/// [`mixed_claim`](crate::claim::mixed_claim) from two drivers' `slices`, next to the planner's
/// optimum on the node's topology (`node_topology`, else the one the slices describe).
pub fn explain_mixed(
    mixed: &MixedClaim,
    slices: &[ResourceSlice],
    spec: &MixedSpec,
    node_topology: Option<&Topology>,
    usage: &Usage,
    budget: u64,
) -> Result<Explanation, DraError> {
    let (gpus, nics) = gpus_and_nics(slices, &spec.node, &spec.gpu_driver, &spec.nic_driver);
    let topo = match node_topology {
        Some(t) => t.clone(),
        None => topology_of(&spec.node, &gpus, &nics)?,
    };
    let devices = NodeDevices::gather(slices, &spec.node)?;
    let mut req = Request::new(
        spec.pairs as usize,
        NicCount::PerGpu(spec.nics_per_gpu as usize),
    );
    req.require_rdma = topo.nics.iter().any(|n| n.is_rdma());
    let resolve = |a: &AllocatedDevice| {
        let find = |devs: &[ForeignDevice]| {
            devs.iter()
                .filter(|d| d.driver == a.driver && d.device.name == a.device)
                .filter_map(ForeignDevice::bdf)
                .collect::<Vec<_>>()
        };
        (find(&gpus), find(&nics))
    };
    let classes = stand_in_classes(spec);
    explain(
        &mixed.spec,
        &classes,
        &devices,
        budget,
        &topo,
        &req,
        usage,
        resolve,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mi300x() -> Topology {
        topoalign_profiles::get("mi300x-8").unwrap()
    }

    fn explain(
        node: &SimulatedNode,
        spec: &ClaimSpec,
        topo: &Topology,
        usage: &Usage,
    ) -> Result<Explanation, ExplainError> {
        let claim = crate::claim::claim_spec(spec).unwrap();
        node.explain(&claim, &own_request(spec), topo, usage, 2_000_000)
    }

    #[test]
    fn the_allocator_matches_the_optimum_on_an_empty_node() {
        let topo = mi300x();
        let node = SimulatedNode::new(&topo, "node").unwrap();
        let e = explain(&node, &ClaimSpec::pairs(4), &topo, &Usage::empty()).unwrap();
        assert!(e.as_good, "{}", e.text());
        assert_eq!(e.allocator.unwrap().pairs.len(), 4);
    }

    #[test]
    fn usage_outside_the_node_is_refused_with_the_addresses() {
        let topo = mi300x();
        let node = SimulatedNode::new(&topo, "node").unwrap();
        let usage = Usage {
            gpus: vec!["0000:ff:00.0".parse().unwrap()],
            ..Usage::empty()
        };
        let e = explain(&node, &ClaimSpec::pairs(2), &topo, &usage).unwrap_err();
        assert_eq!(
            e.to_string(),
            "--used names devices this node does not have: 0000:ff:00.0"
        );
    }

    #[test]
    fn a_bad_node_name_is_refused() {
        assert!(matches!(
            SimulatedNode::new(&mi300x(), "Bad_Name"),
            Err(DraError::BadNodeName { .. })
        ));
    }

    #[test]
    fn the_ladder_bounds_the_planner_at_numa_level() {
        let ladder = ClaimSpec {
            shape: ClaimShape::Ladder,
            ..ClaimSpec::pairs(2)
        };
        assert_eq!(own_request(&ladder).max_pair, Some(PcieClass::Node));
        let pxb = ClaimSpec {
            max_rank: Some(PcieClass::Pxb.rank()),
            ..ClaimSpec::pairs(2)
        };
        assert_eq!(own_request(&pxb).max_pair, Some(PcieClass::Pxb));
        assert_eq!(own_request(&ClaimSpec::pairs(2)).max_pair, None);
    }
}
