//! Why a plan could not be made.

use std::fmt;

use serde::Serialize;
use thiserror::Error;

use crate::types::Plan;

/// The bound a request could not meet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum Bound {
    /// Not enough free GPUs passing the filters.
    Gpus,
    /// Not enough free NICs passing the filters.
    Nics,
    /// Not enough free CPUs.
    Cpus,
    /// Not enough free memory.
    Memory,
    /// No choice keeps every GPU↔NIC pair within `max_pair`.
    MaxPair,
    /// No choice of GPUs is fully NVLink/xGMI connected.
    GpuLink,
    /// The bounds can each be met, but not all together.
    Combined,
}

impl fmt::Display for Bound {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Bound::Gpus => "gpus",
            Bound::Nics => "nics",
            Bound::Cpus => "cpus",
            Bound::Memory => "memory",
            Bound::MaxPair => "max-pair",
            Bound::GpuLink => "gpu-link",
            Bound::Combined => "combined bounds",
        })
    }
}

/// Errors of the planner.
#[derive(Debug, Clone, Error)]
pub enum PlanError {
    /// The request itself makes no sense (e.g. zero GPUs).
    #[error("invalid request: {0}")]
    InvalidRequest(String),
    /// An entry of the usage names a device the topology does not have.
    #[error("usage entry `{entry}` in `{field}`: {reason}")]
    UnknownDevice {
        /// `gpus`, `nics` or `memory`.
        field: &'static str,
        /// The entry as written.
        entry: String,
        /// What is wrong with it.
        reason: String,
    },
    /// NVLink/xGMI was required but the topology does not know the GPU fabric (NVIDIA
    /// sysfs has no NVLink; a paste without a link table): unknown, not absent.
    #[error(
        "gpu-link {gpus} GPUs: this node's GPU fabric is unknown (not discovered), so NVLink/xGMI cannot be checked; supply it with --nvlink-from FILE (saved `nvidia-smi topo -m`) or discover on the host where nvidia-smi/NVML answers (--sysfs-root /)"
    )]
    FabricUnknown {
        /// GPUs requested.
        gpus: usize,
    },
    /// No plan meets every hard bound.
    #[error("unsatisfiable ({bound}): {detail}{}", relaxation_text(.relaxation))]
    Unsatisfiable {
        /// The bound that could not be met.
        bound: Bound,
        /// What was needed and what is there.
        detail: String,
        /// The best plan when that bound is dropped, if there is one.
        relaxation: Option<Box<Plan>>,
    },
}

fn relaxation_text(relaxation: &Option<Box<Plan>>) -> String {
    match relaxation {
        None => String::new(),
        Some(p) => {
            let worst = p
                .score
                .worst_pair
                .map_or_else(|| "no NIC pairs".to_string(), |c| format!("worst pair {c}"));
            format!(
                "; best relaxation: GPUs {} with {}, {} of {} pairs with GPUDirect RDMA, {} NUMA node(s)",
                join(&p.gpus),
                worst,
                p.score.gdr_pairs,
                p.score.pairs,
                p.score.numa_span
            )
        }
    }
}

fn join<T: fmt::Display>(items: &[T]) -> String {
    items
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(",")
}
