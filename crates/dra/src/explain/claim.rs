//! `--explain`: what the stock allocator picks for a claim on a node's free devices,
//! next to the planner's optimum for the same request.

use std::collections::BTreeMap;

use k8s_openapi::api::resource::v1::{DeviceClass, ResourceClaimSpec};
use serde::Serialize;
use topoalign_plan::{Planner, Request, Usage};
use topoalign_topology::{Bdf, PcieClass, Topology};

use crate::alloc::AllocatedDevice;
use crate::alloc::{NodeDevices, Outcome, first_fit};
use crate::claim::spec::request_group;
use crate::explain::cpus::{CpuShare, cpu_shares};
use crate::publish::Inventory;
use crate::{DRIVER_NAME, DraError};

/// One GPU with its NICs, as chosen by the allocator or the planner.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ChosenPair {
    /// The GPU.
    pub gpu: Bdf,
    /// Its NICs (PFs).
    pub nics: Vec<Bdf>,
    /// The class of each GPU→NIC path, in `nics` order.
    pub classes: Vec<PcieClass>,
    /// The published devices behind it (allocator only).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub devices: Vec<String>,
}

/// A side of the comparison.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Side {
    /// The pairs, GPU by GPU.
    pub pairs: Vec<ChosenPair>,
    /// The worst pair class.
    pub worst: Option<PcieClass>,
    /// Sum of class ranks (PIX 0 … SYS 4).
    pub rank_sum: u32,
}

impl Side {
    fn of(pairs: Vec<ChosenPair>) -> Side {
        let all = pairs.iter().flat_map(|p| p.classes.iter().copied());
        Side {
            worst: all.clone().max(),
            rank_sum: all.map(PcieClass::rank).sum(),
            pairs,
        }
    }
}

/// The comparison.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Explanation {
    /// The allocator's search: its result, the devices it tried, whether it gave up.
    pub outcome: Outcome,
    /// What the allocator's result means in pairs (`None` when it found nothing).
    pub allocator: Option<Side>,
    /// The planner's optimum (`None` when the request cannot be met at all).
    pub planner: Option<Side>,
    /// Why the planner found nothing, when it did not.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub planner_error: Option<String>,
    /// The CPUs of dra-driver-cpu the allocator gave, request by request, each with the
    /// GPUs it was asked for (claims with `--cpus`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub cpus: Vec<CpuShare>,
    /// True when the allocator's pairs are as good as the planner's (same worst class
    /// and the same rank sum), or both found nothing.
    pub as_good: bool,
}

/// The GPUs, NICs and device names of one group of results.
type Group = (Vec<Bdf>, Vec<Bdf>, Vec<String>);

/// Turns an allocation into pairs: `resolve` gives each device's GPUs and NICs.
pub(crate) fn pairs_of(
    topo: &Topology,
    allocation: &[AllocatedDevice],
    resolve: impl Fn(&AllocatedDevice) -> (Vec<Bdf>, Vec<Bdf>),
) -> Vec<ChosenPair> {
    let cls = topo.classifier();
    let mut groups: BTreeMap<String, Group> = BTreeMap::new();
    let mut order = Vec::new();
    for (i, a) in allocation.iter().enumerate() {
        let key = request_group(&a.request, i);
        if !groups.contains_key(&key) {
            order.push(key.clone());
        }
        let (g, n) = resolve(a);
        let e = groups.entry(key).or_default();
        e.0.extend(g);
        e.1.extend(n);
        e.2.push(a.device.clone());
    }
    let mut out = Vec::new();
    for key in order {
        let Some((gpus, nics, devices)) = groups.remove(&key) else {
            continue;
        };
        for g in gpus {
            let classes = nics
                .iter()
                .map(|n| match (topo.gpu_index(g), topo.nic_index(*n)) {
                    (Some(gi), Some(ni)) => cls.gpu_nic(gi, ni).class,
                    _ => PcieClass::Sys,
                })
                .collect();
            out.push(ChosenPair {
                gpu: g,
                nics: nics.clone(),
                classes,
                devices: devices.clone(),
            });
        }
    }
    out
}

/// Runs both and compares. `resolve` maps an allocated device to its GPUs and NICs.
#[allow(clippy::too_many_arguments)]
pub fn explain(
    claim: &ResourceClaimSpec,
    classes: &[DeviceClass],
    node: &NodeDevices,
    budget: u64,
    topo: &Topology,
    request: &Request,
    usage: &Usage,
    resolve: impl Fn(&AllocatedDevice) -> (Vec<Bdf>, Vec<Bdf>),
) -> Result<Explanation, DraError> {
    let outcome = first_fit(claim, classes, node, budget)?;
    let allocator = outcome
        .allocation
        .as_ref()
        .map(|a| Side::of(pairs_of(topo, a, &resolve)));
    let (planner, planner_error) = match Planner::new(topo).plan(request, usage) {
        Ok(plan) => {
            let mut by_gpu: BTreeMap<Bdf, ChosenPair> = BTreeMap::new();
            for p in &plan.pairs {
                let e = by_gpu.entry(p.gpu).or_insert_with(|| ChosenPair {
                    gpu: p.gpu,
                    nics: Vec::new(),
                    classes: Vec::new(),
                    devices: Vec::new(),
                });
                e.nics.push(p.nic);
                e.classes.push(p.class);
            }
            (Some(Side::of(by_gpu.into_values().collect())), None)
        }
        Err(e) => (None, Some(e.to_string())),
    };
    let cpus = cpu_shares(&outcome, node, topo, &resolve);
    let as_good = match (&allocator, &planner) {
        (Some(a), Some(p)) => a.worst == p.worst && a.rank_sum == p.rank_sum,
        (None, None) => true,
        _ => false,
    };
    Ok(Explanation {
        outcome,
        allocator,
        planner,
        planner_error,
        cpus,
        as_good,
    })
}

/// Resolves this driver's allocated devices through the inventory.
pub fn resolve_with(inv: &Inventory) -> impl Fn(&AllocatedDevice) -> (Vec<Bdf>, Vec<Bdf>) + '_ {
    move |a| {
        if a.driver != DRIVER_NAME {
            return (vec![], vec![]);
        }
        match inv.device(&a.device) {
            Some(d) => (
                d.gpu().map(|g| g.bdf).into_iter().collect(),
                d.nic().map(|n| n.bdf).into_iter().collect(),
            ),
            None => (vec![], vec![]),
        }
    }
}

/// Consumes, on `node`, the counters of GPUs and NIC functions already in use on the
/// node (`usage`), so that the allocator sees only what is free. Returns the addresses
/// in `usage` that this inventory does not know.
pub fn mark_usage(node: &mut NodeDevices, inv: &Inventory, pool: &str, usage: &Usage) -> Vec<Bdf> {
    let mut unknown = Vec::new();
    for g in &usage.gpus {
        match inv.gpu_by_bdf(*g) {
            Some(e) => node.consume(DRIVER_NAME, pool, &e.counter_set, &e.name, 1),
            None => unknown.push(*g),
        }
    }
    for f in &usage.nics {
        match inv.nic_by_function(*f) {
            Some(n) => node.consume(DRIVER_NAME, pool, &n.counter_set, &n.name, 1),
            None => unknown.push(*f),
        }
    }
    unknown
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn groups() {
        assert_eq!(request_group("gpu-3/switch", 0), "3");
        assert_eq!(request_group("nic-3", 1), "3");
        assert_eq!(request_group("cpus-3", 1), "3");
        assert_eq!(request_group("pair-12", 1), "12");
        assert_eq!(request_group("pairs", 4), "pairs#4");
    }
}
