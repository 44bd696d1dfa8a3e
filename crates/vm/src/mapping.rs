//! Host NUMA node → guest cell: a guest cell belongs to the host node that holds every
//! host CPU its vCPUs are pinned to (`<cputune><vcpupin>`, else `<vcpu cpuset>`); a cell
//! with no pinned vCPUs falls back to a single-node `<numatune><memnode>`. A device goes
//! to the guest cell of its host node; where several cells share that node, to the one
//! with the most vCPUs (lowest id on a tie); where none does, it stays where it was and
//! the report says why.

use serde::Serialize;

use crate::domain::Domain;
use crate::host::{HostDevice, HostView};

/// How one guest cell maps onto the host.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CellMapping {
    /// Guest cell id.
    pub cell: u32,
    /// vCPUs in the cell.
    pub vcpus: String,
    /// The host node it lives on, if it lives on exactly one.
    pub host_node: Option<u32>,
    /// What decided it (`vcpupin`, `numatune memnode`) or why nothing did.
    pub evidence: String,
}

/// Maps every guest cell.
pub(crate) fn map_cells(domain: &Domain, host: &HostView) -> Vec<CellMapping> {
    domain
        .cells
        .iter()
        .map(|c| {
            let mut out = CellMapping {
                cell: c.id,
                vcpus: c.vcpus.to_string(),
                host_node: None,
                evidence: String::new(),
            };
            if c.vcpus.is_empty() {
                out.evidence = "the cell has no vCPUs".into();
                return out;
            }
            let unpinned: Vec<u32> = c
                .vcpus
                .ids()
                .iter()
                .copied()
                .filter(|v| domain.pin_of(*v).is_none())
                .collect();
            if unpinned.is_empty() {
                let mut all = topoalign_topology::CpuSet::new();
                for v in c.vcpus.ids() {
                    if let Some(p) = domain.pin_of(*v) {
                        all = all.union(p);
                    }
                }
                if let Some(n) = host.node_of_cpus(&all) {
                    out.host_node = Some(n);
                    out.evidence = format!("vcpupin → host CPUs {all}");
                } else {
                    let touching = host.nodes_touching(&all);
                    out.evidence = if touching.is_empty() {
                        format!("its vCPUs are pinned to host CPUs {all}, which no host node has")
                    } else {
                        let list: Vec<String> = touching.iter().map(u32::to_string).collect();
                        format!(
                            "its vCPUs are pinned to host CPUs {all} across host nodes {}",
                            list.join(",")
                        )
                    };
                }
                return out;
            }
            if let Some(ns) = domain.memnodes.get(&c.id)
                && ns.len() == 1
            {
                out.host_node = ns.ids().first().copied();
                out.evidence = format!("numatune memnode nodeset={ns} (vCPUs not pinned)");
                return out;
            }
            let list: Vec<String> = unpinned.iter().map(u32::to_string).collect();
            out.evidence = format!(
                "vCPU(s) {} are not pinned (no <vcpupin> or <vcpu cpuset>) and no single-node <numatune><memnode>",
                list.join(",")
            );
            out
        })
        .collect()
}

/// Where a device goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Target {
    /// Into this guest cell.
    Cell(u32),
    /// Left where it was, for this reason.
    Left(String),
}

/// Chooses the guest cell for a device on the host.
pub(crate) fn target_for(
    dev: Option<&HostDevice>,
    cells: &[CellMapping],
    domain: &Domain,
    host_name: &str,
) -> Target {
    let Some(dev) = dev else {
        return Target::Left(format!(
            "not in the host topology `{host_name}` (topoalign knows GPUs, NICs and the bridges above them)"
        ));
    };
    let Some(node) = dev.numa else {
        return Target::Left("its host NUMA node is unknown (numa_node -1)".into());
    };
    let size = |cell: u32| {
        domain
            .cells
            .iter()
            .find(|c| c.id == cell)
            .map_or(0, |c| c.vcpus.len())
    };
    let best = cells
        .iter()
        .filter(|m| m.host_node == Some(node))
        .max_by(|a, b| size(a.cell).cmp(&size(b.cell)).then(b.cell.cmp(&a.cell)));
    match best {
        Some(m) => Target::Cell(m.cell),
        None => {
            let why: Vec<String> = cells
                .iter()
                .map(|m| match m.host_node {
                    Some(n) => format!("cell {} → host node {n}", m.cell),
                    None => format!("cell {}: {}", m.cell, m.evidence),
                })
                .collect();
            Target::Left(format!(
                "no guest cell lives on host NUMA node {node} ({})",
                why.join("; ")
            ))
        }
    }
}
