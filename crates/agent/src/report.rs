//! From what the kubelet reports to what the agent publishes (pure, no I/O): devices in
//! use mapped onto the node's topology, per-NUMA-zone counts, the best pair class a new
//! pod can still get, the GPU fabric, and the compact switch-level detail.

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;
use topoalign_topology::{
    Bdf, CpuSet, FabricKind, NodeUsage, PciKind, PciParent, PcieClass, Topology,
};

use crate::podresources::KubeletView;

/// A device ID the kubelet reported, resolved on the topology.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum DeviceRef {
    /// GPU index.
    Gpu(usize),
    /// NIC index.
    Nic(usize),
}

/// Resolves a device plugin's device ID: a PCI address (AMD GPU, SR-IOV and RDMA plugins)
/// or an NVIDIA GPU UUID (`GPU-…`, the NVIDIA plugin).
pub(crate) fn resolve_id(topo: &Topology, id: &str) -> Option<DeviceRef> {
    if let Ok(b) = id.trim().parse::<Bdf>() {
        if let Some(g) = topo.gpu_index(b) {
            return Some(DeviceRef::Gpu(g));
        }
        return topo.nic_index(b).map(DeviceRef::Nic);
    }
    topo.gpus
        .iter()
        .position(|g| {
            g.uuid
                .as_deref()
                .is_some_and(|u| u.eq_ignore_ascii_case(id.trim()))
        })
        .map(DeviceRef::Gpu)
}

/// Per resource and NUMA zone: allocatable and available counts.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct ZoneCount {
    /// Devices the kubelet can hand out in the zone.
    pub allocatable: u64,
    /// Of those, not held by any pod.
    pub available: u64,
}

/// Everything the agent publishes, computed from one kubelet snapshot.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Report {
    /// GPUs and NICs held by pods (addresses), and their exclusive CPUs.
    pub used: NodeUsage,
    /// Pods (`namespace/name`) holding devices or exclusive CPUs.
    pub pods: Vec<String>,
    /// resource → NUMA id (-1: no topology) → counts.
    pub zones: BTreeMap<String, BTreeMap<i64, ZoneCount>>,
    /// NUMA id → (allocatable CPUs, available CPUs).
    pub cpus: BTreeMap<u32, (u64, u64)>,
    /// The CPUs the kubelet keeps for the system (`reservedSystemCPUs`): the node's CPUs
    /// it does not report allocatable. `None` when it reports none allocatable (CPU
    /// manager policy `none`).
    pub reserved_cpus: Option<CpuSet>,
    /// The best GPU↔NIC class among free GPUs and free NICs (`None`: no free pair).
    pub best_pair: Option<PcieClass>,
    /// `nvlink`, `xgmi` or `pcie`.
    pub fabric: &'static str,
    /// Per PCIe switch: its GPUs and NICs (`switch: gpus | nics`), `;`-separated.
    pub switch_groups: String,
    /// Per free GPU, its best free NIC and their class (`gpu>nic:CLASS`), `;`-separated.
    pub free_pairs: String,
    /// Device IDs the topology does not know (reported, not counted).
    pub unknown_ids: Vec<String>,
}

/// Builds the report.
pub fn build(topo: &Topology, view: &KubeletView) -> Report {
    let mut unknown = BTreeSet::new();
    let mut used_devs = BTreeSet::new();
    let mut used_ids: BTreeSet<(&str, &str)> = BTreeSet::new();
    let mut pods = Vec::new();
    let mut used_cpus = Vec::new();
    for p in &view.pods {
        let mut holds = !p.cpus.is_empty();
        for d in &p.devices {
            for id in &d.ids {
                holds = true;
                used_ids.insert((d.resource.as_str(), id.as_str()));
                match resolve_id(topo, id) {
                    Some(r) => {
                        used_devs.insert(r);
                    }
                    None => {
                        unknown.insert(id.clone());
                    }
                }
            }
        }
        used_cpus.extend(p.cpus.iter().filter_map(|c| u32::try_from(*c).ok()));
        if holds {
            pods.push(format!("{}/{}", p.namespace, p.name));
        }
    }
    pods.sort();
    pods.dedup();
    let mut zones: BTreeMap<String, BTreeMap<i64, ZoneCount>> = BTreeMap::new();
    for d in &view.allocatable {
        let numa = d.numa.first().copied().unwrap_or(-1);
        let z = zones
            .entry(d.resource.clone())
            .or_default()
            .entry(numa)
            .or_default();
        for id in &d.ids {
            z.allocatable += 1;
            if !used_ids.contains(&(d.resource.as_str(), id.as_str())) {
                z.available += 1;
            }
            if resolve_id(topo, id).is_none() {
                unknown.insert(id.clone());
            }
        }
    }
    let used_cpus = CpuSet::from_ids(used_cpus);
    let alloc_cpus = CpuSet::from_ids(
        view.allocatable_cpus
            .iter()
            .filter_map(|c| u32::try_from(*c).ok()),
    );
    let reserved_cpus = (!alloc_cpus.is_empty()).then(|| {
        let all = CpuSet::from_ids(topo.numa.iter().flat_map(|n| n.cpus.ids().iter().copied()));
        all.difference(&alloc_cpus)
    });
    let cpus = topo
        .numa
        .iter()
        .map(|n| {
            let a = n.cpus.intersection(&alloc_cpus);
            let free = a.difference(&used_cpus);
            (n.id, (a.len() as u64, free.len() as u64))
        })
        .collect();
    let mut used = NodeUsage::empty();
    for r in &used_devs {
        match *r {
            DeviceRef::Gpu(g) => used.gpus.push(topo.gpu_bdf(g)),
            DeviceRef::Nic(n) => used.nics.push(topo.nic_bdf(n)),
        }
    }
    used.cpus = used_cpus;
    let cls = topo.classifier();
    let free_gpus: Vec<usize> = (0..topo.gpus.len())
        .filter(|g| !used_devs.contains(&DeviceRef::Gpu(*g)))
        .collect();
    let free_nics: Vec<usize> = (0..topo.nics.len())
        .filter(|n| !used_devs.contains(&DeviceRef::Nic(*n)))
        .collect();
    let mut best_pair = None;
    let mut pairs = Vec::new();
    for &g in &free_gpus {
        if let Some((n, path)) = cls.best_nic(g, free_nics.iter().copied()) {
            best_pair = Some(best_pair.map_or(path.class, |b: PcieClass| b.min(path.class)));
            pairs.push(format!(
                "{}>{}:{}",
                topo.gpu_bdf(g),
                topo.nic_bdf(n),
                path.class
            ));
        }
    }
    let fabric = if topo.gpu_links.iter().any(|l| l.kind == FabricKind::Nvlink) {
        "nvlink"
    } else if topo.gpu_links.iter().any(|l| l.kind == FabricKind::Xgmi) {
        "xgmi"
    } else {
        "pcie"
    };
    Report {
        used,
        pods,
        zones,
        cpus,
        reserved_cpus,
        best_pair,
        fabric,
        switch_groups: switch_groups(topo),
        free_pairs: pairs.join(";"),
        unknown_ids: unknown.into_iter().collect(),
    }
}

/// The nearest switch upstream port above a PCI function.
fn switch_of(topo: &Topology, pci: usize) -> Option<usize> {
    let mut cur = topo.pci.get(pci)?.parent;
    for _ in 0..=topo.pci.len() {
        match cur {
            PciParent::Bridge(p) => {
                if topo.pci.get(p)?.kind == PciKind::SwitchUpstream {
                    return Some(p);
                }
                cur = topo.pci[p].parent;
            }
            PciParent::Host(_) => return None,
        }
    }
    None
}

/// `switch: gpu,gpu | nic,nic` per PCIe switch holding a GPU or a physical NIC.
pub(crate) fn switch_groups(topo: &Topology) -> String {
    let mut groups: BTreeMap<Bdf, (Vec<Bdf>, Vec<Bdf>)> = BTreeMap::new();
    for g in 0..topo.gpus.len() {
        if let Some(s) = switch_of(topo, topo.gpus[g].pci) {
            groups
                .entry(topo.pci[s].bdf)
                .or_default()
                .0
                .push(topo.gpu_bdf(g));
        }
    }
    for (n, nic) in topo.nics.iter().enumerate() {
        if nic.is_vf() {
            continue;
        }
        if let Some(s) = switch_of(topo, nic.pci) {
            groups
                .entry(topo.pci[s].bdf)
                .or_default()
                .1
                .push(topo.nic_bdf(n));
        }
    }
    let join = |v: &[Bdf]| v.iter().map(Bdf::to_string).collect::<Vec<_>>().join(",");
    groups
        .iter()
        .map(|(s, (g, n))| format!("{s}: {} | {}", join(g), join(n)))
        .collect::<Vec<_>>()
        .join("; ")
}
