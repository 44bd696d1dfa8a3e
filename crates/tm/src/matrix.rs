//! Seed 000's policy table (4 GPU + 4 VF and 8 GPU + 8 VF under each policy), computed by
//! running the simulator, with many seeded draws so that `none`'s randomness shows.

use std::collections::BTreeMap;

use serde::Serialize;
use topoalign_topology::{GpuVendor, Topology};

use crate::outcome::Outcome;
use crate::pod::Pod;
use crate::resources::{DeviceKind, ResourceMap};
use crate::simulate::{Case, SimError, simulate};
use topoalign_kube_types::kubelet_settings::{PREFER_CLOSEST_NUMA_NODES, Policy, Settings};

/// The matrix's knobs.
#[derive(Debug, Clone)]
pub struct MatrixSpec {
    /// (GPUs, VFs) per column; the seed's are (4, 4) and (8, 8).
    pub sizes: Vec<(u64, u64)>,
    /// Draws per cell.
    pub draws: u32,
    /// VFs per PF in the SR-IOV resource pool (`None`: all enabled VFs).
    pub vfs_per_pf: Option<u32>,
    /// Whether to set `prefer-closest-numa-nodes` where the policy honours it (the seed's fix).
    pub prefer_closest: bool,
    /// The VF resource name.
    pub vf_resource: String,
}

impl Default for MatrixSpec {
    fn default() -> Self {
        MatrixSpec {
            sizes: vec![(4, 4), (8, 8)],
            draws: 1000,
            vfs_per_pf: None,
            prefer_closest: true,
            vf_resource: "nvidia.com/sriov-rdma-vf".to_string(),
        }
    }
}

/// One cell: a policy and a request size over all draws.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct MatrixCell {
    /// GPUs requested.
    pub gpus: u64,
    /// VFs requested.
    pub vfs: u64,
    /// Draws run.
    pub draws: u32,
    /// Draws admitted.
    pub admitted: u32,
    /// Admitted draws whose devices all sat on one NUMA node.
    pub single_numa: u32,
    /// The rejection reason, when any draw was rejected.
    pub reason: Option<String>,
    /// NUMA nodes used by the first admitted draw.
    pub numa_nodes: Vec<u32>,
    /// Pair classes of the first admitted draw (class → GPUs).
    pub pair_classes: BTreeMap<String, u32>,
    /// GPUs with GPUDirect RDMA to their best NIC, first admitted draw.
    pub gdr: u32,
    /// The row's reading, in the seed's words.
    pub verdict: String,
    /// For a rejection: each resource's hints and the merged hint, which say why.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub why: Option<String>,
}

/// One policy's row.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct MatrixRow {
    /// The policy.
    pub policy: Policy,
    /// One cell per size.
    pub cells: Vec<MatrixCell>,
}

/// The GPU resource name for the node's GPUs.
pub fn gpu_resource(topo: &Topology) -> &'static str {
    match topo.gpus.first().map(|g| g.vendor) {
        Some(GpuVendor::Amd) => "amd.com/gpu",
        Some(GpuVendor::Intel) => "gpu.intel.com/i915",
        _ => "nvidia.com/gpu",
    }
}

/// Runs the table.
pub fn seed_matrix(topo: &Topology, spec: &MatrixSpec) -> Result<Vec<MatrixRow>, SimError> {
    if spec.draws == 0 {
        return Err(crate::error::InputError::field(
            "--draws",
            "0: expected at least 1 draw per cell",
        )
        .into());
    }
    let gpu_res = gpu_resource(topo);
    let mut resources = ResourceMap::default();
    resources.add(gpu_res, DeviceKind::Gpus(None));
    resources.add(
        &spec.vf_resource,
        DeviceKind::Vfs {
            per_pf: spec.vfs_per_pf,
        },
    );
    let mut rows = Vec::new();
    for policy in Policy::ALL {
        let mut settings = Settings {
            topology_manager_policy: policy,
            ..Settings::default()
        };
        if spec.prefer_closest && matches!(policy, Policy::BestEffort | Policy::Restricted) {
            settings
                .topology_manager_policy_options
                .insert(PREFER_CLOSEST_NUMA_NODES.to_string(), "true".to_string());
        }
        let mut cells = Vec::new();
        for &(g, v) in &spec.sizes {
            let pod = Pod::from_flags(
                &[(gpu_res.to_string(), g), (spec.vf_resource.clone(), v)],
                None,
                None,
            )?;
            let mut outcomes: Vec<Outcome> = Vec::new();
            for draw in 0..spec.draws {
                let case = Case {
                    topology: topo,
                    settings: &settings,
                    resources: &resources,
                    pod: &pod,
                    usage: &Default::default(),
                    seed: u64::from(draw),
                };
                outcomes.push(simulate(&case)?);
            }
            cells.push(cell(policy, g, v, &outcomes));
        }
        rows.push(MatrixRow { policy, cells });
    }
    Ok(rows)
}

fn cell(policy: Policy, gpus: u64, vfs: u64, outcomes: &[Outcome]) -> MatrixCell {
    let draws = outcomes.len() as u32;
    let admitted: Vec<&Outcome> = outcomes.iter().filter(|o| o.admitted).collect();
    let single = admitted
        .iter()
        .filter(|o| o.numa_nodes_used.len() == 1)
        .count() as u32;
    let reason = outcomes.iter().find_map(|o| o.reason.clone());
    let first = admitted.first();
    let numa_nodes = first.map(|o| o.numa_nodes_used.clone()).unwrap_or_default();
    let mut pair_classes = BTreeMap::new();
    let mut gdr = 0;
    if let Some(o) = first {
        for p in &o.pairs {
            let k = p.class.map_or("none".to_string(), |c| c.to_string());
            *pair_classes.entry(k).or_insert(0) += 1;
            gdr += u32::from(p.gdr);
        }
    }
    let n_adm = admitted.len() as u32;
    let nodes = numa_nodes
        .iter()
        .map(u32::to_string)
        .collect::<Vec<_>>()
        .join(",");
    let verdict = if n_adm == 0 {
        format!(
            "Rejects pod ({})",
            reason.clone().unwrap_or_else(|| "rejected".into())
        )
    } else if policy == Policy::None {
        format!("No alignment — random (one NUMA node in {single}/{draws} draws)")
    } else if single == n_adm {
        if policy == Policy::BestEffort {
            "Aligns to one NUMA node; would admit misaligned".to_string()
        } else {
            "Forces single-NUMA".to_string()
        }
    } else if single == 0 {
        if policy == Policy::BestEffort {
            format!("Allows everything (NUMA {nodes})")
        } else {
            format!("Allows cross-NUMA (NUMA {nodes})")
        }
    } else {
        format!("Mixed: one NUMA node in {single}/{n_adm} admitted draws")
    };
    let why = outcomes
        .iter()
        .find(|o| !o.admitted)
        .and_then(|o| o.merges.iter().find(|m| !m.admit))
        .map(explain_merge);
    MatrixCell {
        gpus,
        vfs,
        draws,
        admitted: n_adm,
        single_numa: single,
        reason,
        numa_nodes,
        pair_classes,
        gdr,
        verdict,
        why,
    }
}

/// `resource: hints; …; best hint` for a merge, e.g.
/// `amd.com/gpu {0,1}T; nvidia.com/sriov-rdma-vf {0}T {1}T {0,1}F -> {0,1}F`.
fn explain_merge(m: &crate::outcome::MergeRecord) -> String {
    let mut parts = Vec::new();
    for p in &m.providers {
        for r in &p.resources {
            parts.push(format!("{} {}", r.resource, r.hints_text()));
        }
    }
    format!("{} -> best {}", parts.join("; "), m.best)
}
