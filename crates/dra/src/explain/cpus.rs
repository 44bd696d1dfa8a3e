//! `--explain` for a claim with CPUs of dra-driver-cpu: which CPUs the allocator gives,
//! from which NUMA node, next to the GPUs they were asked for, and whether each share
//! sits on its GPUs' node.

use std::collections::BTreeMap;

use k8s_openapi::api::resource::v1::DeviceAttribute;
use serde::Serialize;
use topoalign_topology::{Bdf, Topology};

use crate::alloc::AllocatedDevice;
use crate::alloc::{DeviceId, NodeDevices, Outcome};
use crate::attr;
use crate::claim::cpus::{CPU_CAPACITY, CPU_DRIVER, CPU_NUMA_NODE_ID};
use crate::claim::spec::request_group;

/// The CPUs one CPU request got.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CpuShare {
    /// The request (`cpus-0`, `cpus`).
    pub request: String,
    /// The devices it got (one grouped device, or individual CPUs).
    pub devices: Vec<String>,
    /// How many CPUs.
    pub cpus: u32,
    /// The NUMA node of the CPUs (`None` when a device publishes none).
    pub numa: Option<u32>,
    /// The GPUs the request is tied to (its pair's, or every GPU of the claim).
    pub gpus: Vec<Bdf>,
    /// The NUMA nodes of those GPUs.
    pub gpu_numa: Vec<u32>,
    /// True when every CPU sits on the NUMA node of each of its GPUs.
    pub aligned: bool,
}

/// A device's NUMA node: the standard attribute, else the compatibility key, else
/// dra-driver-cpu's own.
fn numa_of(node: &NodeDevices, id: &DeviceId) -> Option<u32> {
    let attrs = node.device(id)?.attributes.as_ref()?;
    let int = |a: &DeviceAttribute| a.int.and_then(|i| u32::try_from(i).ok());
    [
        attr::NUMA_NODE_STD,
        attr::NUMA_NODE_COMPAT,
        CPU_NUMA_NODE_ID,
    ]
    .iter()
    .find_map(|k| attrs.get(*k).and_then(int))
}

/// The CPU shares of an allocation: each CPU request of the CPU driver with the GPUs of
/// its group (requests `cpus-3` and `pair-3` form group 3; a lone `cpus` request goes
/// with every GPU of the claim). `resolve` gives each device's GPUs.
pub(crate) fn cpu_shares(
    outcome: &Outcome,
    node: &NodeDevices,
    topo: &Topology,
    resolve: impl Fn(&AllocatedDevice) -> (Vec<Bdf>, Vec<Bdf>),
) -> Vec<CpuShare> {
    let Some(allocation) = &outcome.allocation else {
        return Vec::new();
    };
    let mut gpus_by_group: BTreeMap<String, Vec<Bdf>> = BTreeMap::new();
    let mut all_gpus = Vec::new();
    for (i, a) in allocation.iter().enumerate() {
        let (g, _) = resolve(a);
        all_gpus.extend(g.iter().copied());
        (gpus_by_group
            .entry(request_group(&a.request, i))
            .or_default())
        .extend(g);
    }
    let mut shares: Vec<CpuShare> = Vec::new();
    for (i, a) in allocation
        .iter()
        .enumerate()
        .filter(|(_, a)| a.driver == CPU_DRIVER)
    {
        let id = DeviceId {
            driver: a.driver.clone(),
            pool: a.pool.clone(),
            device: a.device.clone(),
        };
        let cpus = match outcome.consumed.get(i).and_then(|c| c.get(CPU_CAPACITY)) {
            Some(q) => q.parse::<u32>().unwrap_or(0),
            None => 1,
        };
        let numa = numa_of(node, &id);
        let share = match shares.iter_mut().find(|s| s.request == a.request) {
            Some(s) => s,
            None => {
                let group = request_group(&a.request, i);
                let gpus = match gpus_by_group.get(&group) {
                    Some(g) if !g.is_empty() => g.clone(),
                    _ => all_gpus.clone(),
                };
                let gpu_numa = (gpus.iter())
                    .filter_map(|b| topo.gpu_index(*b))
                    .filter_map(|g| topo.pci[topo.gpus[g].pci].numa_node)
                    .collect();
                shares.push(CpuShare {
                    request: a.request.clone(),
                    devices: Vec::new(),
                    cpus: 0,
                    numa,
                    gpus,
                    gpu_numa,
                    aligned: true,
                });
                let last = shares.len() - 1;
                &mut shares[last]
            }
        };
        share.devices.push(a.device.clone());
        share.cpus += cpus;
        if share.numa != numa {
            share.numa = None;
        }
    }
    for s in &mut shares {
        s.aligned = s.numa.is_some_and(|n| s.gpu_numa.iter().all(|g| *g == n));
    }
    shares
}

/// The shares in words, one line each.
pub(crate) fn cpu_text(shares: &[CpuShare]) -> String {
    let mut out = String::new();
    for s in shares {
        let node = s
            .numa
            .map_or("no one NUMA node".to_string(), |n| format!("NUMA {n}"));
        let gpus: Vec<String> = s.gpus.iter().map(ToString::to_string).collect();
        let devices = match s.devices.len() {
            0..=2 => s.devices.join(", "),
            n => format!("{} … {} ({n} devices)", s.devices[0], s.devices[n - 1]),
        };
        out += &format!(
            "  {}: {} CPUs on {node} from {devices}, for GPU {}: {}\n",
            s.request,
            s.cpus,
            gpus.join(", "),
            if s.aligned {
                "aligned"
            } else {
                "NOT on the GPUs' NUMA node"
            }
        );
    }
    out
}
