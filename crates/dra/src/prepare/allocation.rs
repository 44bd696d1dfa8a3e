//! Checks the kubelet plugin runs at prepare time: every allocated device is this
//! node's, no GPU or NIC function is used twice (in the claim or by another prepared
//! claim), and a free function (PF or VF) is chosen for every NIC a device stands for.
//!
//! The scheduler honours externally written allocations without checking them, so
//! double allocations and unknown devices do reach the kubelet; this is the last gate.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use topoalign_topology::{Bdf, PcieClass};

use crate::alloc::AllocatedDevice;
use crate::publish::MigInstance;
use crate::publish::{DeviceKind, Inventory};
use crate::publish::{GpuEntry, NicFunction};
use crate::{AllocationError, DRIVER_NAME};

/// What other prepared claims hold on this node: GPUs and NIC functions, each with the
/// claim that holds it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Holdings {
    /// GPU address → holder (claim UID).
    pub gpus: BTreeMap<Bdf, String>,
    /// NIC function address → holder (claim UID).
    pub nic_functions: BTreeMap<Bdf, String>,
    /// Published device name → holder (claim UID): a device is allocated at most once.
    #[serde(default)]
    pub devices: BTreeMap<String, String>,
}

impl Holdings {
    /// Records what a prepared claim holds.
    pub fn add(&mut self, claim_uid: &str, devices: &[PreparedDevice]) {
        for d in devices {
            self.devices.insert(d.device.clone(), claim_uid.to_string());
            if let Some(g) = &d.gpu {
                self.gpus.insert(g.bdf, claim_uid.to_string());
            }
            if let Some(f) = &d.nic_function {
                self.nic_functions.insert(f.bdf, claim_uid.to_string());
            }
        }
    }

    /// Forgets everything a claim holds (unprepare).
    pub fn remove(&mut self, claim_uid: &str) {
        self.gpus.retain(|_, h| h != claim_uid);
        self.nic_functions.retain(|_, h| h != claim_uid);
        self.devices.retain(|_, h| h != claim_uid);
    }
}

/// A device of this driver, checked and resolved to hardware.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PreparedDevice {
    /// The request it satisfies (as in the allocation result).
    pub request: String,
    /// The published device name.
    pub device: String,
    /// Pair, GPU or NIC.
    pub kind: DeviceKind,
    /// The GPU it gives, if any.
    pub gpu: Option<PreparedGpu>,
    /// The physical NIC's device name, if any.
    pub nic: Option<String>,
    /// The NIC function chosen for it (PF or a VF), if any.
    pub nic_function: Option<NicFunction>,
    /// For pairs: the pair's class.
    pub class: Option<PcieClass>,
    /// The MIG instance it gives, if any (a MIG device or MIG pair).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mig: Option<PreparedMig>,
}

/// The MIG part of a prepared device.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PreparedMig {
    /// The instance.
    pub instance: MigInstance,
    /// Its parent GPU.
    pub parent: PreparedGpu,
}

/// The GPU part of a prepared device.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PreparedGpu {
    /// GPU device name.
    pub name: String,
    /// PCI address.
    pub bdf: Bdf,
    /// Vendor name (`nvidia`, `amd`, …).
    pub vendor: String,
    /// NVIDIA UUID when known.
    pub uuid: Option<String>,
    /// Character devices (control nodes included).
    pub device_nodes: Vec<String>,
}

impl From<&GpuEntry> for PreparedGpu {
    fn from(g: &GpuEntry) -> Self {
        PreparedGpu {
            name: g.name.clone(),
            bdf: g.bdf,
            vendor: g.vendor.to_string(),
            uuid: g.uuid.clone(),
            device_nodes: g.device_nodes.clone(),
        }
    }
}

/// Checks a claim's allocation results against this node's inventory and what other
/// claims hold, and chooses NIC functions. Results of other drivers are skipped. The
/// first free function of a NIC is taken, in order PF, VF0, VF1, … (deterministic, so a
/// repeated prepare of the same claim with the same holdings chooses the same).
pub fn prepare_allocation(
    inv: &Inventory,
    pool: &str,
    results: &[AllocatedDevice],
    held: &Holdings,
) -> Result<Vec<PreparedDevice>, AllocationError> {
    let mut gpus_here: BTreeMap<Bdf, String> = BTreeMap::new();
    // (GPU, memory slice) → the device taking it, in other claims and in this one: a
    // MIG instance takes its slices, a whole MIG-enabled GPU all of them.
    let mut slices_held: BTreeMap<(Bdf, u8), String> = BTreeMap::new();
    for (device, claim) in &held.devices {
        if let Some(dev) = inv.device(device) {
            for cell in mig_cells(&dev) {
                slices_held.insert(cell, format!("held by claim {claim}"));
            }
        }
    }
    let mut slices_here: BTreeMap<(Bdf, u8), String> = BTreeMap::new();
    let mut fns_here: BTreeMap<Bdf, String> = BTreeMap::new();
    let mut out = Vec::new();
    for (index, r) in results.iter().enumerate() {
        if r.driver != DRIVER_NAME {
            continue;
        }
        if r.device.is_empty() {
            return Err(AllocationError::Malformed {
                index,
                what: "empty device name".into(),
            });
        }
        if r.pool != pool {
            return Err(AllocationError::ForeignPool {
                device: r.device.clone(),
                pool: r.pool.clone(),
                expected: pool.to_string(),
            });
        }
        let Some(dev) = inv.device(&r.device) else {
            return Err(AllocationError::UnknownDevice {
                device: r.device.clone(),
                pool: pool.to_string(),
            });
        };
        let gpu = match dev.gpu() {
            Some(g) => {
                if let Some(other) = gpus_here.get(&g.bdf) {
                    return Err(AllocationError::GpuTaken {
                        device: r.device.clone(),
                        gpu: g.bdf.to_string(),
                        holder: format!("used by device {other:?} of this claim"),
                    });
                }
                if let Some(claim) = held.gpus.get(&g.bdf) {
                    return Err(AllocationError::GpuTaken {
                        device: r.device.clone(),
                        gpu: g.bdf.to_string(),
                        holder: format!("held by claim {claim}"),
                    });
                }
                gpus_here.insert(g.bdf, r.device.clone());
                Some(PreparedGpu::from(g))
            }
            None => None,
        };
        for cell in mig_cells(&dev) {
            let holder = match (slices_here.get(&cell), slices_held.get(&cell)) {
                (Some(other), _) => Some(format!("used by device {other:?} of this claim")),
                (None, Some(h)) => Some(h.clone()),
                (None, None) => None,
            };
            if let Some(holder) = holder {
                return Err(AllocationError::GpuTaken {
                    device: r.device.clone(),
                    gpu: format!("{} memory slice {}", cell.0, cell.1),
                    holder,
                });
            }
        }
        if let Some((_, g)) = dev.mig() {
            // A whole GPU held elsewhere takes every instance of it.
            if let Some(holder) = gpus_here
                .get(&g.bdf)
                .map(|d| format!("used by device {d:?} of this claim"))
                .or_else(|| held.gpus.get(&g.bdf).map(|c| format!("held by claim {c}")))
            {
                return Err(AllocationError::GpuTaken {
                    device: r.device.clone(),
                    gpu: g.bdf.to_string(),
                    holder,
                });
            }
        }
        for cell in mig_cells(&dev) {
            slices_here.insert(cell, r.device.clone());
        }
        // The device itself (a NIC whose other functions are free): once per claim.
        if let Some(claim) = held.devices.get(&r.device) {
            return Err(AllocationError::DeviceTaken {
                device: r.device.clone(),
                holder: claim.clone(),
            });
        }
        let nic_function = match dev.nic() {
            Some(n) => {
                let free = n.functions.iter().find(|f| {
                    !fns_here.contains_key(&f.bdf) && !held.nic_functions.contains_key(&f.bdf)
                });
                let Some(f) = free else {
                    let mut holders: Vec<String> = n
                        .functions
                        .iter()
                        .map(
                            |f| match (fns_here.get(&f.bdf), held.nic_functions.get(&f.bdf)) {
                                (Some(dev), _) => format!("device {dev:?} of this claim"),
                                (None, Some(claim)) => format!("claim {claim}"),
                                (None, None) => "?".into(),
                            },
                        )
                        .collect();
                    holders.dedup();
                    return Err(AllocationError::NicExhausted {
                        device: r.device.clone(),
                        nic: n.bdf.to_string(),
                        functions: n.functions.len(),
                        holders: holders.join(", "),
                    });
                };
                fns_here.insert(f.bdf, r.device.clone());
                Some(f.clone())
            }
            None => None,
        };
        let class = match dev {
            crate::publish::DeviceRef::Pair { pair, .. } => Some(pair.path.class),
            crate::publish::DeviceRef::MigPair { parent_pair, .. } => Some(parent_pair.path.class),
            _ => None,
        };
        out.push(PreparedDevice {
            request: r.request.clone(),
            device: r.device.clone(),
            kind: dev.kind(),
            gpu,
            nic: dev.nic().map(|n| n.name.clone()),
            nic_function,
            class,
            mig: dev.mig().map(|(m, g)| PreparedMig {
                instance: m.instance.clone(),
                parent: PreparedGpu::from(g),
            }),
        });
    }
    Ok(out)
}

/// The (GPU, memory slice) cells a device takes: its MIG instance's slices, or every
/// slice of a whole MIG-enabled GPU; none otherwise.
fn mig_cells(dev: &crate::publish::DeviceRef<'_>) -> Vec<(Bdf, u8)> {
    if let Some((m, g)) = dev.mig() {
        return m.instance.slices().map(|s| (g.bdf, s)).collect();
    }
    match dev.gpu() {
        Some(g) if g.mig_enabled => (0..crate::publish::mig::MEMORY_SLICES)
            .map(|s| (g.bdf, s))
            .collect(),
        _ => Vec::new(),
    }
}
