//! Static MIG: a node's MIG instances (from a [`MigState`] of `crates/mig`) joined to its
//! topology's GPUs, and the devices and counters the pool publishes for them.
//!
//! A GPU with at least one GPU instance is *MIG-enabled* here (static MIG: the instances
//! exist, made beforehand by mig-parted or `nvidia-smi mig -cgi`). For such a GPU the pool
//! holds one counter set of its own, `<gpu>-counter-set`, shaped like the NVIDIA DRA
//! driver's: `memory-slice-0` … `memory-slice-7` (1 each) and `sm-slices` (7). Each MIG
//! instance consumes its memory slices and its SM slices; the whole GPU (and each of its
//! whole-GPU pairs) consumes all of them, so the stock allocator can give a memory slice
//! once and never a whole GPU together with one of its instances. A MIG×NIC pair consumes
//! the instance's amounts and one function of the NIC: two `consumesCounters` entries,
//! the API's limit. Everything else of the pool keeps the counters it has without MIG.
//!
//! A MIG instance has no PCI function of its own: its PCIe path, its NUMA node and so its
//! NIC classes are its parent's (REFERENCE §11). Its pairs are its parent's pairs.
//!
//! The join: a MIG GPU with a UUID is the topology GPU with that UUID; one without (saved
//! `-lgi` alone) is the `index`-th NVIDIA GPU in PCI address order, the order
//! `nvidia-smi` numbers GPUs in. A MIG GPU the topology lacks, two MIG GPUs on one GPU, a
//! GPU whose model has no MIG profile table, a profile the model lacks or instances that
//! break the placement rules are errors ([`MigJoinError`]).

use serde::{Deserialize, Serialize};
use topoalign_mig::Shape;
use topoalign_mig::{MigState, Model, Placement, model_for_name, validate};
use topoalign_topology::{Bdf, GpuVendor, Topology};

mod dynamic;
mod geometry;

pub use geometry::MigGeometryError;

/// Memory slices of one GPU (REFERENCE §11).
pub(crate) const MEMORY_SLICES: u8 = topoalign_mig::MEMORY_SLICES;
/// SM slices of one GPU.
pub(crate) const SM_SLICES: u8 = topoalign_mig::SM_SLICES;
/// The counter of SM slices in a MIG GPU's counter set.
pub(crate) const COUNTER_SM_SLICES: &str = "sm-slices";

/// The counter of memory slice `i` in a MIG GPU's counter set: `memory-slice-<i>`.
pub(crate) fn memory_slice_counter(i: u8) -> String {
    format!("memory-slice-{i}")
}

/// The MIG layout of a node, joined to its topology by PCI address.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NodeMig {
    /// The MIG-enabled GPUs, in address order.
    pub gpus: Vec<MigGpuLayout>,
}

/// One MIG-enabled GPU.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MigGpuLayout {
    /// The GPU's PCI address in the topology.
    pub bdf: Bdf,
    /// Its model's profile table.
    pub model: &'static Model,
    /// Its GPU instances, by start; for a dynamic-MIG GPU every placement it can take,
    /// in publishing order (`crate::publish::mig::dynamic`).
    pub instances: Vec<MigInstance>,
    /// Dynamic MIG: `instances` are placements to create at prepare, not instances
    /// that exist; the whole GPU is not offered (in MIG mode CUDA sees no device on it).
    pub dynamic: bool,
}

/// One GPU instance, as published.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MigInstance {
    /// Profile name on the GPU's model (`1g.10gb`).
    pub profile: String,
    /// GPU-instance profile ID (`19`).
    pub profile_id: u32,
    /// GPU-instance ID, when known (`nvidia-smi mig -lgi`).
    pub gi: Option<u32>,
    /// Compute-instance ID, when the instance has exactly one compute instance.
    pub ci: Option<u32>,
    /// First memory slice.
    pub start: u8,
    /// Memory slices taken.
    pub size: u8,
    /// SM slices taken.
    pub sm_slices: u8,
    /// `MIG-…`, when the instance has exactly one MIG device.
    pub uuid: Option<String>,
    /// Its own device nodes, the `/dev/nvidia-caps/nvidia-cap<N>` of its GPU instance
    /// and compute instance (the parent's nodes aside), when the host's
    /// `mig-minors` table gave them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub device_nodes: Vec<String>,
}

impl MigInstance {
    /// An instance of `shape` on `model` at `start` (no IDs, no UUID: a planned
    /// geometry).
    pub fn planned(model: &Model, shape: Shape, start: u8) -> MigInstance {
        MigInstance {
            profile: model.profile_name(shape).to_string(),
            profile_id: shape.gi_profile_id(),
            gi: None,
            ci: None,
            start,
            size: shape.memory_slices(),
            sm_slices: shape.sm_slices(),
            uuid: None,
            device_nodes: Vec::new(),
        }
    }

    /// The memory slices it covers.
    pub fn slices(&self) -> impl Iterator<Item = u8> + '_ {
        self.start..self.start.saturating_add(self.size).min(MEMORY_SLICES)
    }
}

/// Why a MIG state cannot be joined to a topology.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MigJoinError {
    /// A MIG GPU whose UUID no topology GPU has.
    #[error(
        "MIG state: GPU {index} ({uuid}) is not in the topology: expected one of its GPU UUIDs ({known})"
    )]
    UnknownUuid {
        /// nvidia-smi index.
        index: u32,
        /// The UUID.
        uuid: String,
        /// The topology's NVIDIA GPU UUIDs, comma-separated (`none` if it has none).
        known: String,
    },
    /// A MIG GPU without UUID whose index is past the topology's NVIDIA GPUs.
    #[error(
        "MIG state: GPU index {index} is not in the topology: expected an index below {count} (its NVIDIA GPUs in PCI address order)"
    )]
    UnknownIndex {
        /// nvidia-smi index.
        index: u32,
        /// NVIDIA GPUs in the topology.
        count: usize,
    },
    /// Two MIG GPUs resolve to one topology GPU.
    #[error("MIG state: GPUs {first} and {second} are both the topology's GPU {bdf}")]
    Twice {
        /// The first index.
        first: u32,
        /// The second index.
        second: u32,
        /// The GPU.
        bdf: Bdf,
    },
    /// A GPU whose model has no MIG profile table here.
    #[error(
        "MIG state: GPU {bdf} ({name}) has MIG instances but no known MIG profile table: expected one of {known}"
    )]
    NoModel {
        /// The GPU.
        bdf: Bdf,
        /// Its product name, or `unknown model`.
        name: String,
        /// The known models.
        known: String,
    },
    /// The MIG state's model and the topology's disagree.
    #[error(
        "MIG state: GPU {bdf} is {mig} in the MIG state but {topology} in the topology: expected the same model"
    )]
    ModelMismatch {
        /// The GPU.
        bdf: Bdf,
        /// The MIG state's model.
        mig: String,
        /// The topology's model.
        topology: String,
    },
    /// A layout for a GPU address the topology does not have (a layout joined to another
    /// topology).
    #[error("MIG layout: GPU {bdf} is not in the topology")]
    NotInTopology {
        /// The GPU.
        bdf: Bdf,
    },
    /// Dynamic MIG on a node without a GPU it can publish so.
    #[error(
        "--mig-dynamic: no NVIDIA GPU of the node has a known MIG profile table (the node has {models}): expected one of {known}"
    )]
    NoDynamicGpu {
        /// The node's NVIDIA GPU models, or `no NVIDIA GPU`.
        models: String,
        /// The known models.
        known: String,
    },
    /// Instances that break the placement rules, or a profile the model lacks.
    #[error("MIG state: GPU {bdf}: {error}")]
    Geometry {
        /// The GPU.
        bdf: Bdf,
        /// The rule broken.
        #[source]
        error: topoalign_mig::GeometryError,
    },
}

/// The topology's NVIDIA GPUs, in PCI address order (nvidia-smi's index order).
fn nvidia_gpus(topo: &Topology) -> Vec<(Bdf, usize)> {
    let mut v: Vec<(Bdf, usize)> = topo
        .gpus
        .iter()
        .enumerate()
        .filter(|(_, g)| g.vendor == GpuVendor::Nvidia)
        .map(|(i, _)| (topo.gpu_bdf(i), i))
        .collect();
    v.sort();
    v
}

impl NodeMig {
    /// Joins `state` to `topo`'s GPUs (see the module docs). GPUs of the state without
    /// GPU instances are not MIG-enabled and are left out.
    pub fn join(topo: &Topology, state: &MigState) -> Result<NodeMig, MigJoinError> {
        let nvidia = nvidia_gpus(topo);
        let mut taken: Vec<(Bdf, u32)> = Vec::new();
        let mut gpus = Vec::new();
        for g in &state.gpus {
            let at = match &g.uuid {
                Some(uuid) => nvidia
                    .iter()
                    .find(|(_, i)| topo.gpus[*i].uuid.as_deref() == Some(uuid.as_str()))
                    .copied()
                    .ok_or_else(|| {
                        let known: Vec<&str> = nvidia
                            .iter()
                            .filter_map(|(_, i)| topo.gpus[*i].uuid.as_deref())
                            .collect();
                        MigJoinError::UnknownUuid {
                            index: g.index,
                            uuid: uuid.clone(),
                            known: if known.is_empty() {
                                "none".into()
                            } else {
                                known.join(", ")
                            },
                        }
                    })?,
                None => usize::try_from(g.index)
                    .ok()
                    .and_then(|i| nvidia.get(i))
                    .copied()
                    .ok_or(MigJoinError::UnknownIndex {
                        index: g.index,
                        count: nvidia.len(),
                    })?,
            };
            let (bdf, ti) = at;
            if let Some((_, first)) = taken.iter().find(|(b, _)| *b == bdf) {
                return Err(MigJoinError::Twice {
                    first: *first,
                    second: g.index,
                    bdf,
                });
            }
            taken.push((bdf, g.index));
            if g.instances.is_empty() {
                continue;
            }
            let topo_model = topo.gpus[ti].model.as_deref();
            let from_topo = topo_model.and_then(model_for_name);
            let model = match (g.model, from_topo) {
                (Some(m), Some(t)) if m.name != t.name => {
                    return Err(MigJoinError::ModelMismatch {
                        bdf,
                        mig: m.name.to_string(),
                        topology: t.name.to_string(),
                    });
                }
                (Some(m), _) | (None, Some(m)) => m,
                (None, None) => {
                    return Err(MigJoinError::NoModel {
                        bdf,
                        name: g
                            .name
                            .as_deref()
                            .or(topo_model)
                            .unwrap_or("unknown model")
                            .to_string(),
                        known: topoalign_mig::known_models(),
                    });
                }
            };
            let instances = g
                .instances
                .iter()
                .map(|i| MigInstance {
                    profile: i.profile.clone(),
                    profile_id: i.profile_id,
                    gi: Some(i.id),
                    ci: match i.compute_instances.as_slice() {
                        [only] => Some(only.id),
                        _ => None,
                    },
                    start: i.start,
                    size: i.size,
                    sm_slices: model.shape(&i.profile).map_or(0, Shape::sm_slices),
                    uuid: match i.mig_devices.as_slice() {
                        [only] => Some(only.uuid.clone()),
                        _ => None,
                    },
                    device_nodes: Vec::new(),
                })
                .collect();
            gpus.push(MigGpuLayout::new(bdf, ti, model, instances)?);
        }
        gpus.sort_by_key(|g| g.bdf);
        Ok(NodeMig { gpus })
    }

    /// The layout of the GPU at `bdf`, when it is MIG-enabled.
    pub fn gpu(&self, bdf: Bdf) -> Option<&MigGpuLayout> {
        self.gpus.iter().find(|g| g.bdf == bdf)
    }

    /// True when no GPU is MIG-enabled.
    pub fn is_empty(&self) -> bool {
        self.gpus.iter().all(|g| g.instances.is_empty())
    }
}

impl MigGpuLayout {
    /// A GPU's layout, checked against its model: every profile is the model's, with
    /// its profile ID and size, and the placements keep the rules. `index` names the GPU
    /// in errors.
    pub fn new(
        bdf: Bdf,
        index: usize,
        model: &'static Model,
        mut instances: Vec<MigInstance>,
    ) -> Result<MigGpuLayout, MigJoinError> {
        let placements: Vec<Placement> = instances
            .iter()
            .map(|i| Placement {
                profile: i.profile.clone(),
                start: i.start,
            })
            .collect();
        validate(model, index, &placements)
            .map_err(|error| MigJoinError::Geometry { bdf, error })?;
        for i in &mut instances {
            // validate() accepted the profile, so the model has its shape.
            if let Some(shape) = model.shape(&i.profile) {
                i.profile_id = shape.gi_profile_id();
                i.size = shape.memory_slices();
                i.sm_slices = shape.sm_slices();
            }
        }
        instances.sort_by_key(|i| (i.start, i.gi));
        Ok(MigGpuLayout {
            bdf,
            model,
            instances,
            dynamic: false,
        })
    }
}

/// A published MIG instance.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MigEntry {
    /// Device name: `gpu-0000-1b-00-0-mig-1g10gb-19-0`.
    pub name: String,
    /// Index of its parent into [`crate::publish::Inventory::gpus`].
    pub gpu: usize,
    /// The instance.
    pub instance: MigInstance,
}

/// A MIG instance with one function of a physical NIC its parent pairs with.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MigPairEntry {
    /// Device name: `pair-0000-1b-00-0-mig-1g10gb-19-0-0000-18-00-0`.
    pub name: String,
    /// Index into [`crate::publish::Inventory::migs`].
    pub mig: usize,
    /// Index of its parent's pair into [`crate::publish::Inventory::pairs`] (its NIC and class).
    pub pair: usize,
}
