//! CDI specs (Container Device Interface) for a prepared claim: content only; the
//! kubelet plugin writes the file.

use serde::{Deserialize, Serialize};

use crate::prepare::PreparedDevice;

/// The CDI spec version written (supported by containerd ≥ 1.7 and CRI-O ≥ 1.28).
pub const CDI_VERSION: &str = "0.6.0";
/// The CDI kind of every device this driver exposes (`vendor/class`).
pub const CDI_KIND: &str = "topoalign.dev/device";

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
}

impl ContainerEdits {
    /// No edits.
    pub fn is_empty(&self) -> bool {
        self.env.is_empty() && self.device_nodes.is_empty()
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

/// Nodes every user of a kind of device shares; they go to the spec-level edits.
const SHARED_NODES: [&str; 5] = [
    "/dev/nvidiactl",
    "/dev/nvidia-uvm",
    "/dev/nvidia-uvm-tools",
    "/dev/kfd",
    "/dev/infiniband/rdma_cm",
];

/// The CDI device name of an allocated device in a claim: `<claim uid>-<device>`.
pub fn cdi_device_name(claim_uid: &str, device: &str) -> String {
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

/// The CDI spec of one claim: one CDI device per allocated device with exactly its
/// device nodes; the shared control nodes and the pairing environment at spec level.
pub fn cdi_spec(claim_uid: &str, devices: &[PreparedDevice]) -> CdiSpec {
    let mut shared = ContainerEdits::default();
    let mut hcas: Vec<String> = Vec::new();
    let mut map: Vec<String> = Vec::new();
    let mut out = Vec::new();
    for d in devices {
        let mut edits = ContainerEdits::default();
        let mut nodes: Vec<&str> = Vec::new();
        if let Some(g) = &d.gpu {
            nodes.extend(g.device_nodes.iter().map(String::as_str));
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
        out.push(CdiDevice {
            name: cdi_device_name(claim_uid, &d.device),
            container_edits: edits,
        });
    }
    if !hcas.is_empty() {
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
    CdiSpec {
        cdi_version: CDI_VERSION.to_string(),
        kind: CDI_KIND.to_string(),
        devices: out,
        container_edits: shared,
    }
}
