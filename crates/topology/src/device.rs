//! GPUs, NICs and the GPU-to-GPU fabric (NVLink, xGMI).

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::ids::Bdf;
use crate::pci::vendor;

/// Who made a GPU, from its PCI vendor id.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum GpuVendor {
    /// 0x10de.
    Nvidia,
    /// 0x1002.
    Amd,
    /// 0x8086.
    Intel,
    /// Anything else.
    Other,
}

impl GpuVendor {
    /// Maps a PCI vendor id.
    pub fn from_pci(id: u16) -> Self {
        match id {
            vendor::NVIDIA => GpuVendor::Nvidia,
            vendor::AMD => GpuVendor::Amd,
            vendor::INTEL => GpuVendor::Intel,
            _ => GpuVendor::Other,
        }
    }
}

impl fmt::Display for GpuVendor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            GpuVendor::Nvidia => "nvidia",
            GpuVendor::Amd => "amd",
            GpuVendor::Intel => "intel",
            GpuVendor::Other => "other",
        })
    }
}

/// A GPU (any vendor): a PCI display controller or processing accelerator.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Gpu {
    /// Index of its PCI function in [`crate::Topology::pci`].
    pub pci: usize,
    /// Vendor, from the PCI vendor id.
    pub vendor: GpuVendor,
    /// Marketing model when known (`/proc/driver/nvidia/gpus/<BDF>/information` `Model:`,
    /// or a profile's description).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// Device memory in MiB when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_mib: Option<u64>,
    /// NVIDIA `GPU UUID:` when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uuid: Option<String>,
    /// NVIDIA `Device Minor:` (the N of `/dev/nvidiaN`; not the nvidia-smi index).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nvidia_minor: Option<u32>,
    /// DRM render node minor (the N of `/dev/dri/renderDN`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub render_minor: Option<u32>,
    /// DRM card minor (the N of `/dev/dri/cardN`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub card_minor: Option<u32>,
    /// The AMD KFD topology node id (`/sys/class/kfd/kfd/topology/nodes/N`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kfd_node: Option<u32>,
    /// The NUMA node holding the GPU's own memory on coherent systems (nvidia-smi's
    /// `GPU NUMA ID`, e.g. on Grace-Blackwell); `None` prints as `N/A`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_numa_node: Option<u32>,
    /// True when the GPU reaches its CPU over a chip-to-chip link (NVLink-C2C on
    /// Grace-Hopper/Grace-Blackwell): NCCL then sees GPU→NIC through the CPU as `P2C`.
    #[serde(default)]
    pub c2c: bool,
}

impl Gpu {
    /// The character devices a container needs for this GPU alone (the shared control
    /// nodes such as `/dev/nvidiactl` or `/dev/kfd` included).
    pub fn device_nodes(&self) -> Vec<String> {
        let mut nodes = Vec::new();
        if let Some(m) = self.nvidia_minor {
            nodes.push(format!("/dev/nvidia{m}"));
        }
        if self.vendor == GpuVendor::Nvidia {
            nodes.push("/dev/nvidiactl".to_string());
            nodes.push("/dev/nvidia-uvm".to_string());
            nodes.push("/dev/nvidia-uvm-tools".to_string());
        }
        if let Some(m) = self.card_minor {
            nodes.push(format!("/dev/dri/card{m}"));
        }
        if let Some(m) = self.render_minor {
            nodes.push(format!("/dev/dri/renderD{m}"));
        }
        if self.vendor == GpuVendor::Amd {
            nodes.push("/dev/kfd".to_string());
        }
        nodes
    }
}

/// The link layer of an RDMA port (`ports/N/link_layer`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum LinkLayer {
    /// Native InfiniBand.
    InfiniBand,
    /// RoCE over Ethernet.
    Ethernet,
}

impl LinkLayer {
    /// The exact word the kernel writes in `link_layer`.
    pub fn as_sysfs(&self) -> &'static str {
        match self {
            LinkLayer::InfiniBand => "InfiniBand",
            LinkLayer::Ethernet => "Ethernet",
        }
    }
}

impl fmt::Display for LinkLayer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_sysfs())
    }
}

/// One port of an RDMA device.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RdmaPort {
    /// Port number (1-based, as in `ports/1`).
    pub number: u32,
    /// `link_layer`.
    pub link_layer: LinkLayer,
    /// The `umadN` node for this port, when present.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub umad: Option<String>,
    /// Port rate in Gb/s (`rate`, e.g. `400 Gb/sec (4X NDR)`), when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate_gbps: Option<u32>,
}

/// SR-IOV role of a NIC function.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", tag = "role")]
pub enum Sriov {
    /// Not SR-IOV capable (or not reported).
    None,
    /// A physical function with `sriov_totalvfs` > 0.
    #[serde(rename_all = "camelCase")]
    Pf {
        /// `sriov_totalvfs`.
        total_vfs: u32,
        /// The enabled VFs (`virtfnN` links), in N order.
        vfs: Vec<Bdf>,
    },
    /// A virtual function (`physfn` link).
    #[serde(rename_all = "camelCase")]
    Vf {
        /// Its physical function.
        pf: Bdf,
        /// Its N in the PF's `virtfnN`.
        index: u32,
    },
}

/// A NIC function (PCI class `0x02xxxx`): PF or VF, Ethernet or InfiniBand.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Nic {
    /// Index of its PCI function in [`crate::Topology::pci`].
    pub pci: usize,
    /// Its network interface (`/sys/class/net/<if>`); `None` for IB-only devices.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub netdev: Option<String>,
    /// Its RDMA device (`/sys/class/infiniband/<dev>`), e.g. `mlx5_0`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rdma: Option<String>,
    /// The `uverbsN` node of the RDMA device.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uverbs: Option<String>,
    /// RDMA ports.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ports: Vec<RdmaPort>,
    /// PF/VF role.
    pub sriov: Sriov,
    /// Interface speed in Mb/s (`/sys/class/net/<if>/speed`), when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub speed_mbps: Option<u64>,
    /// True when the NIC is known to do RDMA although its RDMA device is not named: a
    /// topology file listed it by PCI identity alone (an NCCL static topology file's bare
    /// `<pci class="0x020700">` or `0x020000` entry, which NCCL's network transport
    /// matches by address; an AWS EFA). Set only while `rdma` is `None`; ask
    /// [`Nic::is_rdma`] rather than read this.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub rdma_unnamed: bool,
}

impl Nic {
    /// True when the NIC does RDMA: it has a named RDMA device, or its PCI identity says
    /// so ([`Nic::rdma_unnamed`]).
    pub fn is_rdma(&self) -> bool {
        self.rdma.is_some() || self.rdma_unnamed
    }

    /// An RDMA device without a netdev (e.g. GB300's ConnectX VFs in InfiniBand mode).
    pub fn ib_only(&self) -> bool {
        self.netdev.is_none() && self.rdma.is_some()
    }

    /// True for SR-IOV virtual functions.
    pub fn is_vf(&self) -> bool {
        matches!(self.sriov, Sriov::Vf { .. })
    }

    /// The link layer of the first port, when the NIC has RDMA ports.
    pub fn link_layer(&self) -> Option<LinkLayer> {
        self.ports.first().map(|p| p.link_layer)
    }

    /// The name people use for it: the RDMA device, else the netdev, else nothing.
    pub fn label(&self) -> Option<&str> {
        self.rdma.as_deref().or(self.netdev.as_deref())
    }

    /// The character devices a container needs to use this NIC's RDMA device
    /// (`/dev/infiniband/uverbsN`, the port's `umadN`, and the shared `rdma_cm`).
    pub fn device_nodes(&self) -> Vec<String> {
        let mut nodes = Vec::new();
        if let Some(u) = &self.uverbs {
            nodes.push(format!("/dev/infiniband/{u}"));
        }
        for p in &self.ports {
            if let Some(u) = &p.umad {
                nodes.push(format!("/dev/infiniband/{u}"));
            }
        }
        if self.rdma.is_some() {
            nodes.push("/dev/infiniband/rdma_cm".to_string());
        }
        nodes
    }
}

/// The kind of a direct GPU-to-GPU link.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FabricKind {
    /// NVIDIA NVLink (direct or through NVSwitch).
    Nvlink,
    /// AMD Infinity Fabric (xGMI), KFD io_link type 11.
    Xgmi,
}

/// Whether a topology's GPU-to-GPU links are the whole fabric or were not discovered.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FabricKnowledge {
    /// The source sees the fabric: `gpu_links` lists every link (possibly none).
    #[default]
    Known,
    /// The source cannot see the fabric (NVIDIA sysfs has no NVLink; a NUMA-only
    /// `rocm-smi` paste has no link table): links may exist that are not listed.
    Unknown,
}

impl FabricKnowledge {
    /// True for [`FabricKnowledge::Known`] (used to keep JSON unchanged when known).
    pub fn is_known(&self) -> bool {
        *self == FabricKnowledge::Known
    }
}

/// The three answers to "how are the GPUs joined?".
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FabricStatus {
    /// Known: no NVLink/xGMI, GPUs talk over PCIe.
    None,
    /// Known: the links in `gpu_links`.
    Links,
    /// Not discovered: links may exist.
    Unknown,
}

/// A direct link between two GPUs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GpuLink {
    /// Index into [`crate::Topology::gpus`] of one end (the lower index).
    pub a: usize,
    /// Index of the other end.
    pub b: usize,
    /// NVLink or xGMI.
    pub kind: FabricKind,
    /// Number of bonded links (the 18 of `NV18`); 1 for a single xGMI link.
    pub count: u32,
    /// KFD link weight (one xGMI hop weighs 15), when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub weight: Option<u32>,
    /// Hops between the two GPUs (1 for a direct link), when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hops: Option<u32>,
}
