//! CDI specs (Container Device Interface) for a prepared claim: content only; the
//! kubelet plugin writes the file. The vendors' own specs are in [`crate::prepare::vendor`].

use serde::{Deserialize, Serialize};

use std::collections::BTreeMap;

use topoalign_topology::Bdf;

use crate::prepare::allocation::{PreparedDevice, PreparedGpu};

/// The CDI spec version written (supported by containerd ≥ 1.7 and CRI-O ≥ 1.28).
pub(crate) const CDI_VERSION: &str = "0.6.0";
/// The CDI kind of every device this driver exposes (`vendor/class`).
pub(crate) const CDI_KIND: &str = "topoalign.dev/device";

/// A CDI spec file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CdiSpec {
    /// `cdiVersion`.
    pub cdi_version: String,
    /// `kind` (`vendor/class`).
    pub kind: String,
    /// Devices.
    pub devices: Vec<CdiDevice>,
    /// Edits applied when any device of the spec is injected.
    #[serde(default, skip_serializing_if = "ContainerEdits::is_empty")]
    pub container_edits: ContainerEdits,
}

/// One CDI device.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CdiDevice {
    /// Name, unique in the kind.
    pub name: String,
    /// Its edits.
    pub container_edits: ContainerEdits,
}

/// Container edits (the subset this driver uses).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ContainerEdits {
    /// `NAME=value` entries.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub env: Vec<String>,
    /// Device nodes.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub device_nodes: Vec<DeviceNode>,
    /// Network interfaces the runtime moves into the container's network namespace (CDI
    /// spec 1.1.0; see `crate::prepare::netdev`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub net_devices: Vec<NetDevice>,
}

impl ContainerEdits {
    /// No edits.
    pub fn is_empty(&self) -> bool {
        self.env.is_empty() && self.device_nodes.is_empty() && self.net_devices.is_empty()
    }

    fn add_node(&mut self, path: &str) {
        if !self.device_nodes.iter().any(|d| d.path == path) {
            self.device_nodes.push(DeviceNode {
                path: path.to_string(),
                permissions: Some("rw".into()),
            });
        }
    }
}

/// A device node; the runtime reads type, major and minor from the host path.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DeviceNode {
    /// Path in the container (the same on the host).
    pub path: String,
    /// cgroup permissions (`rw`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub permissions: Option<String>,
}

/// A CDI `netDevices` entry (spec 1.1.0): the host interface the runtime moves into the
/// container's network namespace, and its name there.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NetDevice {
    /// The interface's name in the runtime's (host's) network namespace.
    pub host_interface_name: String,
    /// Its name in the container.
    pub name: String,
}

/// Nodes every user of a kind of device shares; they go to the spec-level edits.
const SHARED_NODES: [&str; 5] = [
    "/dev/nvidiactl",
    "/dev/nvidia-uvm",
    "/dev/nvidia-uvm-tools",
    "/dev/kfd",
    "/dev/infiniband/rdma_cm",
];

/// The CDI device name of an allocated device in a claim: `<claim uid>-<device>`.
pub(crate) fn cdi_device_name(claim_uid: &str, device: &str) -> String {
    format!("{claim_uid}-{device}")
}

/// The fully qualified CDI id the plugin returns to the kubelet:
/// `topoalign.dev/device=<claim uid>-<device>`.
pub fn cdi_device_id(claim_uid: &str, device: &str) -> String {
    format!("{CDI_KIND}={}", cdi_device_name(claim_uid, device))
}

/// The spec's file name in the CDI directory: `topoalign.dev-claim_<uid>.json`.
pub fn cdi_file_name(claim_uid: &str) -> String {
    format!("topoalign.dev-claim_{claim_uid}.json")
}

/// The names of the NCCL variables written: `NCCL_IB_HCA` lists the chosen RDMA
/// devices with their port, exact-match (`=mlx5_0:1,mlx5_3:1`), so that `mlx5_1` does
/// not also select `mlx5_10`; `TOPOALIGN_GPU_NIC_MAP` maps each GPU of a pair to its
/// RDMA device (`0000:11:00.0=mlx5_0,…`).
pub const ENV_NCCL_IB_HCA: &str = "NCCL_IB_HCA";
/// See [`ENV_NCCL_IB_HCA`].
pub const ENV_GPU_NIC_MAP: &str = "TOPOALIGN_GPU_NIC_MAP";
/// UCX's list of network devices (`mlx5_0:1,mlx5_3:1`), written instead of
/// [`ENV_NCCL_IB_HCA`] on a claim with a MIG instance (NCCL does not run on MIG).
pub(crate) const ENV_UCX_NET_DEVICES: &str = "UCX_NET_DEVICES";
/// What the NVIDIA runtime hook (legacy mode) reads to choose GPUs; see [`compose_cdi`].
pub const ENV_NVIDIA_VISIBLE_DEVICES: &str = "NVIDIA_VISIBLE_DEVICES";

/// What composing a claim's CDI needs besides its devices.
#[derive(Debug, Clone, Copy)]
pub struct CdiPlan<'a> {
    /// The vendor CDI ids of the claim's GPUs that the vendor's spec covers, by address
    /// ([`crate::prepare::vendor::vendor_gpu_ids`]): those GPUs' nodes and driver files come
    /// from the vendor's device, not from this driver's.
    pub vendor_ids: &'a BTreeMap<Bdf, String>,
    /// The vendor CDI ids of the claim's MIG instances that the vendor's spec names, by
    /// allocated device name ([`crate::prepare::vendor::vendor_mig_ids`]): those instances'
    /// nodes and driver files come from the vendor's device.
    pub vendor_mig_ids: &'a BTreeMap<String, String>,
    /// The node has NVIDIA GPUs: every claim sets `NVIDIA_VISIBLE_DEVICES`, so that a
    /// legacy NVIDIA runtime hook (which reads it from CUDA images, often `all`) adds no
    /// GPU the claim does not hold.
    pub nvidia_node: bool,
}

/// A claim's CDI: this driver's spec (none when no device needs an edit of its own) and
/// the CDI ids of every prepared device, in order: the vendor's device of its GPU, if
/// any, then this driver's device, if it has one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ComposedCdi {
    /// The spec to write.
    pub spec: Option<CdiSpec>,
    /// The CDI ids per prepared device (same order as the devices).
    pub ids: Vec<Vec<String>>,
}

/// The value of `NVIDIA_VISIBLE_DEVICES` for a claim: `void` where the vendor's CDI
/// devices (or no NVIDIA GPU) are given; without a vendor spec, the UUIDs of the claim's
/// GPUs so that a legacy runtime hook mounts the driver for exactly them (`void` if a
/// UUID is unknown).
fn nvidia_visible(devices: &[PreparedDevice], plan: &CdiPlan<'_>) -> String {
    let uncovered: Vec<&PreparedGpu> = devices
        .iter()
        .filter_map(|d| d.gpu.as_ref())
        .filter(|g| g.vendor == "nvidia" && !plan.vendor_ids.contains_key(&g.bdf))
        .collect();
    // A MIG instance by its `MIG-…` UUID (the hook's form for an instance).
    let uuids: Option<Vec<&str>> = uncovered
        .iter()
        .map(|g| g.uuid.as_deref())
        .chain(
            devices
                .iter()
                .filter(|d| !plan.vendor_mig_ids.contains_key(&d.device))
                .filter_map(|d| d.mig.as_ref())
                .map(|m| m.instance.uuid.as_deref()),
        )
        .collect();
    match uuids {
        Some(u) if !u.is_empty() => u.join(","),
        _ => "void".into(),
    }
}

/// Composes a claim's CDI: one device of this driver per allocated device with exactly
/// its own device nodes (a GPU's only where no vendor device covers it); the shared
/// control nodes, the pairing environment and `NVIDIA_VISIBLE_DEVICES` at spec level. A
/// device without nodes of its own carries the claim's environment instead (the CDI
/// library refuses a device without edits); one without any edit is left out.
pub fn compose_cdi(claim_uid: &str, devices: &[PreparedDevice], plan: &CdiPlan<'_>) -> ComposedCdi {
    let mut shared = ContainerEdits::default();
    let mut hcas: Vec<String> = Vec::new();
    let mut map: Vec<String> = Vec::new();
    let mut own: Vec<ContainerEdits> = Vec::with_capacity(devices.len());
    for d in devices {
        let mut edits = ContainerEdits::default();
        let mut nodes: Vec<&str> = Vec::new();
        if let Some(g) = &d.gpu
            && !plan.vendor_ids.contains_key(&g.bdf)
        {
            nodes.extend(g.device_nodes.iter().map(String::as_str));
        }
        // A MIG instance: the vendor's device of the instance, else its parent's nodes
        // and its own `/dev/nvidia-caps` access nodes (the vendor's whole-GPU device
        // would give the whole GPU).
        if let Some(m) = &d.mig
            && !plan.vendor_mig_ids.contains_key(&d.device)
        {
            nodes.extend(m.parent.device_nodes.iter().map(String::as_str));
            nodes.extend(m.instance.device_nodes.iter().map(String::as_str));
        }
        if let Some(f) = &d.nic_function {
            nodes.extend(f.device_nodes.iter().map(String::as_str));
            if let Some(rdma) = &f.rdma {
                let hca = match f.port {
                    Some(p) => format!("{rdma}:{p}"),
                    None => rdma.clone(),
                };
                if !hcas.contains(&hca) {
                    hcas.push(hca);
                }
                if let Some(g) = &d.gpu {
                    map.push(format!("{}={rdma}", g.bdf));
                }
            }
        }
        for n in nodes {
            if SHARED_NODES.contains(&n) {
                shared.add_node(n);
            } else {
                edits.add_node(n);
            }
        }
        own.push(edits);
    }
    // NCCL does not run on MIG (REFERENCE §11): a claim with a MIG instance names its
    // NICs for UCX instead.
    let mig_claim = devices.iter().any(|d| d.mig.is_some());
    if !hcas.is_empty() && mig_claim {
        shared
            .env
            .push(format!("{ENV_UCX_NET_DEVICES}={}", hcas.join(",")));
    } else if !hcas.is_empty() {
        shared.env.push(format!(
            "{ENV_NCCL_IB_HCA}={}",
            format_args!("={}", hcas.join(","))
        ));
    }
    if !map.is_empty() {
        shared
            .env
            .push(format!("{ENV_GPU_NIC_MAP}={}", map.join(",")));
    }
    let nvidia_claim = devices.iter().any(|d| {
        d.gpu.as_ref().is_some_and(|g| g.vendor == "nvidia")
            || d.mig.as_ref().is_some_and(|m| m.parent.vendor == "nvidia")
    });
    if plan.nvidia_node || nvidia_claim {
        shared.env.push(format!(
            "{ENV_NVIDIA_VISIBLE_DEVICES}={}",
            nvidia_visible(devices, plan)
        ));
    }
    let mut out = Vec::new();
    let mut ids = Vec::with_capacity(devices.len());
    for (d, mut edits) in devices.iter().zip(own) {
        let mut these: Vec<String> = d
            .gpu
            .as_ref()
            .and_then(|g| plan.vendor_ids.get(&g.bdf))
            .or_else(|| plan.vendor_mig_ids.get(&d.device))
            .cloned()
            .into_iter()
            .collect();
        if edits.device_nodes.is_empty() {
            edits.env = shared.env.clone();
        }
        if !edits.is_empty() {
            these.push(cdi_device_id(claim_uid, &d.device));
            out.push(CdiDevice {
                name: cdi_device_name(claim_uid, &d.device),
                container_edits: edits,
            });
        }
        ids.push(these);
    }
    let spec = (!out.is_empty()).then(|| CdiSpec {
        cdi_version: CDI_VERSION.to_string(),
        kind: CDI_KIND.to_string(),
        devices: out,
        container_edits: shared,
    });
    ComposedCdi { spec, ids }
}
