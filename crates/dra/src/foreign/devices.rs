//! Devices of DRA drivers topoalign does not own, read as their drivers publish them.
//!
//! Every attribute read here was read from the driver's source at the version named:
//!
//! | driver | source | what is read |
//! |---|---|---|
//! | `gpu.nvidia.com` | kubernetes-sigs/dra-driver-nvidia-gpu `v0.5.0-dev` (main at `9593204`, 2026-08-07; `cmd/gpu-kubelet-plugin/deviceinfo.go`, `mig.go`) | `type` (`gpu`, `mig`, `vfio`), `uuid`, `productName`; standard `pciBusID`, `pcieRoot`, `numaNode` (scalar, or a one-element list with `DRAListTypeAttributes`; absent for `-1`); MIG devices and the `gpu-vfio-N` twin carry their GPU's address. Older releases (v0.4, 25.x) publish no NUMA node and `pcieBusID` of their own |
//! | `gpu.amd.com` | ROCm/k8s-gpu-dra-driver (`docs/driver-attributes.md` at `06dbe58`, `cmd/gpu-kubeletplugin/deviceinfo.go` at `c2b31bd`) | `type` (`amdgpu`, `amdgpu-partition`, `vfio`), `pciAddr`, `parentPciAddr`, bare `numaNode` (the driver's own domain), `productName`, `uuid`; standard `pciBusID` (a partition and the `vfio` twin carry the GPU's), `pcieRoot` |
//! | `dra.net` | kubernetes-sigs/dranet `v1.4.0` and main at `f258477` (`pkg/apis/attributes.go`, `pkg/inventory/db.go`) | `pciAddress`, `numaNode` (the compat key every driver reads), `rdma`, `rdmaDevice`, `ifName`, `pciDevice`; standard `pcieRoot`, and on main the standard `numaNode` (scalar or list, `WithListNUMAAttributes`). IB-only is `rdmaDevice` without `ifName` (older builds wrote `ibOnly`) |
//! | `sriovnetwork.k8snetworkplumbingwg.io` | k8snetworkplumbingwg/dra-driver-sriov main at `cd9404f` (`pkg/consts/consts.go`, `pkg/devicestate/discovery.go`) | `pciAddress`, `pfPciAddress`, `PFName`, `vfID`, `linkType`, `rdmaCapable`; standard `pciBusID`, `pcieRoot`; NUMA only as the compat `dra.net/numaNode`, `-1` kept when unknown |
//! | `dra.cpu` | kubernetes-sigs/dra-driver-cpu `v0.2.0` and main at `de98098` (`pkg/device/attributes.go`, `builder.go`) | CPUs, neither GPU nor NIC: `dra.cpu/*`, the compat `dra.net/numaNode`, on main the standard `numaNode` and `pcieRoot` as a string list |
//!
//! A NUMA node is read from the standard `resource.kubernetes.io/numaNode`, then the
//! driver's own `numaNode` (`numa`), then the compat `dra.net/numaNode` that dranet,
//! the SR-IOV driver and the CPU driver write whatever their own domain; negative values
//! (the kernel's `-1`) are no NUMA node. A list-typed attribute counts by its first
//! element (KEP-6072: the physical node first).

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::resource::v1::{Device, DeviceAttribute, ResourceSlice};
use serde::Serialize;
use topoalign_topology::Bdf;

use crate::alloc::cel::lookup;
use crate::attr;
use crate::attr::NUMA_NODE_COMPAT;

/// NVIDIA's DRA GPU driver.
pub const NVIDIA_GPU_DRIVER: &str = "gpu.nvidia.com";
/// AMD's DRA GPU driver.
pub const AMD_GPU_DRIVER: &str = "gpu.amd.com";
/// dranet.
pub const DRANET_DRIVER: &str = "dra.net";
/// The SR-IOV network DRA driver.
pub const SRIOV_DRIVER: &str = "sriovnetwork.k8snetworkplumbingwg.io";

/// One device of a foreign driver on the node.
#[derive(Debug, Clone)]
pub struct ForeignDevice {
    /// Driver.
    pub driver: String,
    /// Device.
    pub device: Device,
}

/// What a device of a foreign driver is to GPU–NIC pairing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum DeviceRole {
    /// A GPU (or a MIG slice, a partition, a passthrough twin of one).
    Gpu,
    /// A network device (an RDMA function, a netdev, an SR-IOV VF).
    Nic,
}

/// Which view of a physical GPU a GPU device is: a GPU may be published several times
/// (NVIDIA's MIG devices and `gpu-vfio-N`, AMD's partitions and `vfio` twin), always
/// with the GPU's own PCI address, so two devices of one address are one GPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum GpuForm {
    /// The whole GPU (`type` `gpu`, `amdgpu`).
    Whole,
    /// A MIG instance (`mig`, `migdyn`).
    Mig,
    /// A compute partition (`amdgpu-partition`).
    Partition,
    /// The GPU for VFIO passthrough (`vfio`).
    Passthrough,
}

/// Driver-domain attributes that make a device a NIC: dranet's `rdmaDevice`, `rdma`,
/// `ifName`, `ibOnly`; the SR-IOV driver's `rdmaCapable`, `PFName`, `pfPciAddress`,
/// `linkType`, `vfID`.
pub(crate) const NIC_MARKS: [&str; 9] = [
    "rdmaDevice",
    "rdma",
    "ifName",
    "ibOnly",
    "rdmaCapable",
    "PFName",
    "pfPciAddress",
    "linkType",
    "vfID",
];
/// Driver-domain attributes that make a device a GPU when it is no NIC (NVIDIA's and
/// AMD's: `productName`, `uuid`).
pub(crate) const GPU_MARKS: [&str; 2] = ["productName", "uuid"];
/// Driver-domain `type` values of GPU devices (NVIDIA: `gpu`, `mig`, `migdyn`, `vfio`;
/// AMD: `amdgpu`, `amdgpu-partition`, `vfio`).
const GPU_TYPES: [&str; 6] = ["gpu", "mig", "migdyn", "vfio", "amdgpu", "amdgpu-partition"];

/// The drivers' own names for a device's PCI address (dranet and the SR-IOV driver:
/// `pciAddress`; NVIDIA's GPU driver before v0.5: `pcieBusID`; AMD: `pciAddr`, a
/// partition's `parentPciAddr`), read after the standard `resource.kubernetes.io/pciBusID`.
pub(crate) const OWN_PCI_ADDRESS: [&str; 5] = [
    "pciAddress",
    "pcieBusID",
    "pciBusID",
    "pciAddr",
    "parentPciAddr",
];
/// The drivers' own names for a device's NUMA node (dranet, AMD: `numaNode`; NVIDIA
/// before v0.5: `numa`), read after the standard `resource.kubernetes.io/numaNode` and
/// before the compat [`NUMA_NODE_COMPAT`].
pub(crate) const OWN_NUMA: [&str; 2] = ["numaNode", "numa"];

/// A scalar attribute as text; a list by its first element.
fn text(a: &DeviceAttribute) -> Option<String> {
    a.string
        .clone()
        .or_else(|| a.int.map(|i| i.to_string()))
        .or_else(|| a.bool.map(|b| b.to_string()))
        .or_else(|| a.version.clone())
        .or_else(|| a.strings.as_ref()?.first().cloned())
        .or_else(|| a.ints.as_ref()?.first().map(i64::to_string))
        .or_else(|| a.bools.as_ref()?.first().map(bool::to_string))
}

/// An attribute as a whole number: an int (a list's first), or a decimal string.
fn number(a: &DeviceAttribute) -> Option<i64> {
    a.int
        .or_else(|| a.ints.as_ref()?.first().copied())
        .or_else(|| a.string.as_deref()?.trim().parse().ok())
}

impl ForeignDevice {
    /// The attribute `qualified` (`domain/name`; the driver's own may be written bare).
    pub(crate) fn attr(&self, qualified: &str) -> Option<&DeviceAttribute> {
        let (d, n) = qualified.split_once('/')?;
        lookup(self.device.attributes.as_ref()?, &self.driver, d, n)
    }

    /// The driver-domain attribute `name`.
    fn own(&self, name: &str) -> Option<&DeviceAttribute> {
        self.attr(&format!("{}/{name}", self.driver))
    }

    /// An attribute as text (a list by its first element).
    pub(crate) fn string(&self, qualified: &str) -> Option<String> {
        self.attr(qualified).and_then(text)
    }

    /// The PCI address: the standard `pciBusID`, else the driver's own
    /// (`OWN_PCI_ADDRESS`). A MIG instance, a partition and a passthrough twin have
    /// their GPU's.
    pub fn bdf(&self) -> Option<Bdf> {
        std::iter::once(attr::PCI_BUS_ID.to_string())
            .chain(
                OWN_PCI_ADDRESS
                    .iter()
                    .map(|a| format!("{}/{a}", self.driver)),
            )
            .find_map(|a| self.string(&a))
            .and_then(|s| s.trim().parse().ok())
    }

    /// The NUMA node and the key it was read from: the standard attribute, the
    /// driver's own (`OWN_NUMA`), the compat [`NUMA_NODE_COMPAT`]; the first key present
    /// decides, and a negative value there (the kernel's `-1`) is no NUMA node.
    pub fn numa_with_key(&self) -> Option<(u32, String)> {
        let keys = std::iter::once(attr::NUMA_NODE_STD.to_string())
            .chain(OWN_NUMA.iter().map(|a| format!("{}/{a}", self.driver)))
            .chain(std::iter::once(NUMA_NODE_COMPAT.to_string()));
        let (key, a) = keys
            .filter_map(|k| self.attr(&k).map(|a| (k, a)))
            .find(|(_, a)| number(a).is_some())?;
        let n = u32::try_from(number(a)?).ok()?;
        Some((n, key))
    }

    /// The NUMA node (see [`ForeignDevice::numa_with_key`]).
    pub fn numa(&self) -> Option<u32> {
        self.numa_with_key().map(|(n, _)| n)
    }

    /// The standard `pcieRoot` (`pci0000:3a`; a list by its first element).
    pub fn pcie_root(&self) -> Option<String> {
        self.string(attr::PCIE_ROOT)
    }

    /// Whether the device is a GPU or a NIC, from its driver's own attributes
    /// (`NIC_MARKS` first, then a GPU `type` or `GPU_MARKS`); `None` for anything
    /// else (a CPU, a channel, an IMEX daemon …).
    pub fn role(&self) -> Option<DeviceRole> {
        if NIC_MARKS.iter().any(|n| self.own(n).is_some()) {
            return Some(DeviceRole::Nic);
        }
        let typed = self.own("type").and_then(|a| a.string.as_deref());
        if typed.is_some_and(|t| GPU_TYPES.contains(&t))
            || (typed.is_none() && GPU_MARKS.iter().any(|n| self.own(n).is_some()))
        {
            return Some(DeviceRole::Gpu);
        }
        None
    }

    /// What view of its GPU a GPU device is (`None` for a device that is no GPU).
    pub fn gpu_form(&self) -> Option<GpuForm> {
        if self.role() != Some(DeviceRole::Gpu) {
            return None;
        }
        Some(match self.own("type").and_then(|a| a.string.as_deref()) {
            Some("mig" | "migdyn") => GpuForm::Mig,
            Some("amdgpu-partition") => GpuForm::Partition,
            Some("vfio") => GpuForm::Passthrough,
            _ => GpuForm::Whole,
        })
    }

    /// Whether a NIC does RDMA: dranet's `rdma` (or an `rdmaDevice`, or `ibOnly`), the
    /// SR-IOV driver's `rdmaCapable`; `None` when the driver does not say.
    pub fn rdma(&self) -> Option<bool> {
        let flag = |n: &str| self.own(n).and_then(|a| a.bool);
        if self.own("rdmaDevice").is_some() || flag("ibOnly") == Some(true) {
            return Some(true);
        }
        flag("rdma").or_else(|| flag("rdmaCapable"))
    }

    /// The NIC's RDMA device name (`mlx5_0`) when published.
    pub fn rdma_device(&self) -> Option<String> {
        self.own(attr::RDMA_DEVICE).and_then(text)
    }

    /// A short name for a NIC: its RDMA device, else its interface (`ifName`,
    /// `interfaceName`), else the device's name.
    pub fn nic_label(&self) -> String {
        self.rdma_device()
            .or_else(|| self.own("ifName").and_then(text))
            .or_else(|| self.own("interfaceName").and_then(text))
            .unwrap_or_else(|| self.device.name.clone())
    }
}

/// The devices of `driver` on `node` (highest pool generation only).
pub(crate) fn devices_of(slices: &[ResourceSlice], node: &str, driver: &str) -> Vec<ForeignDevice> {
    pooled_devices_of(slices, node, driver)
        .into_iter()
        .map(|(_, d)| d)
        .collect()
}

/// The devices of every driver that publishes slices for `node`, drivers in
/// name order.
pub fn node_devices(slices: &[ResourceSlice], node: &str) -> Vec<(String, ForeignDevice)> {
    let drivers: BTreeSet<&str> = slices
        .iter()
        .filter(|s| s.spec.node_name.as_deref() == Some(node))
        .map(|s| s.spec.driver.as_str())
        .collect();
    drivers
        .into_iter()
        .flat_map(|driver| pooled_devices_of(slices, node, driver))
        .collect()
}

/// [`devices_of`], each device with the name of its pool (a device's identity in an
/// allocation is driver, pool and name).
pub(crate) fn pooled_devices_of(
    slices: &[ResourceSlice],
    node: &str,
    driver: &str,
) -> Vec<(String, ForeignDevice)> {
    let mut best: BTreeMap<String, i64> = BTreeMap::new();
    for s in slices {
        if s.spec.driver == driver && s.spec.node_name.as_deref() == Some(node) {
            let g = best.entry(s.spec.pool.name.clone()).or_insert(i64::MIN);
            *g = (*g).max(s.spec.pool.generation);
        }
    }
    slices
        .iter()
        .filter(|s| {
            s.spec.driver == driver
                && s.spec.node_name.as_deref() == Some(node)
                && best.get(&s.spec.pool.name) == Some(&s.spec.pool.generation)
        })
        .flat_map(|s| {
            s.spec
                .devices
                .iter()
                .flatten()
                .map(|d| (s.spec.pool.name.clone(), d))
        })
        .map(|(pool, d)| {
            (
                pool,
                ForeignDevice {
                    driver: driver.to_string(),
                    device: d.clone(),
                },
            )
        })
        .collect()
}

/// The node's GPUs and NICs of `gpu_driver` and `nic_driver`: GPUs once per physical
/// GPU (the whole GPU before its MIG instances, partitions and passthrough twin, which
/// share its address), and every NIC.
pub(crate) fn gpus_and_nics(
    slices: &[ResourceSlice],
    node: &str,
    gpu_driver: &str,
    nic_driver: &str,
) -> (Vec<ForeignDevice>, Vec<ForeignDevice>) {
    let role = |driver: &str, r: DeviceRole| -> Vec<ForeignDevice> {
        devices_of(slices, node, driver)
            .into_iter()
            .filter(|d| d.role() == Some(r))
            .collect()
    };
    (
        physical_gpus(role(gpu_driver, DeviceRole::Gpu)),
        role(nic_driver, DeviceRole::Nic),
    )
}

/// One device per physical GPU: by address, the whole GPU first; devices without an
/// address are kept as they are.
pub(crate) fn physical_gpus(gpus: Vec<ForeignDevice>) -> Vec<ForeignDevice> {
    let mut first: BTreeMap<Bdf, (Option<GpuForm>, usize)> = BTreeMap::new();
    for (i, d) in gpus.iter().enumerate() {
        if let Some(b) = d.bdf() {
            let e = first.entry(b).or_insert((d.gpu_form(), i));
            if d.gpu_form() < e.0 {
                *e = (d.gpu_form(), i);
            }
        }
    }
    let keep: BTreeSet<usize> = first.values().map(|(_, i)| *i).collect();
    (gpus.into_iter().enumerate())
        .filter(|(i, d)| d.bdf().is_none() || keep.contains(i))
        .map(|(_, d)| d)
        .collect()
}

/// The driver a DeviceClass named `class` selects: a class among `classes` whose CEL
/// says `device.driver == "…"`, else the driver behind a class name users know
/// (`gpu.nvidia.com`, `gpu.amd.com`, `dranet.net`).
#[cfg(feature = "clap")]
pub(crate) fn driver_for(
    class: &str,
    classes: &[k8s_openapi::api::resource::v1::DeviceClass],
) -> Option<String> {
    let named = classes
        .iter()
        .find(|c| c.metadata.name.as_deref() == Some(class));
    let exprs = named
        .and_then(|c| c.spec.as_ref()?.selectors.as_ref())
        .into_iter()
        .flatten()
        .filter_map(|s| s.cel.as_ref().map(|c| c.expression.clone()));
    for e in exprs {
        let e: String = e.split_whitespace().collect();
        for quote in ['"', '\''] {
            let head = format!("device.driver=={quote}");
            if let Some(rest) = e.split(&head).nth(1)
                && let Some(end) = rest.find(quote)
            {
                return Some(rest[..end].to_string());
            }
        }
    }
    match class {
        NVIDIA_GPU_DRIVER | AMD_GPU_DRIVER => Some(class.to_string()),
        "dranet.net" | "dranet" => Some(DRANET_DRIVER.to_string()),
        _ => None,
    }
}

/// A CEL selector keeping the RDMA functions of a NIC driver that says which do RDMA
/// (dranet's `rdma`, the SR-IOV driver's `rdmaCapable`), guarded so that a device
/// without the attribute is passed over rather than an evaluation error.
pub fn rdma_selector(nic_driver: &str) -> Option<String> {
    let flag = match nic_driver {
        DRANET_DRIVER => "rdma",
        SRIOV_DRIVER => "rdmaCapable",
        _ => return None,
    };
    let map = format!("device.attributes[\"{nic_driver}\"]");
    Some(format!("\"{flag}\" in {map} && {map}[\"{flag}\"] == true"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    pub(crate) fn dev(driver: &str, name: &str, attrs: serde_json::Value) -> ForeignDevice {
        ForeignDevice {
            driver: driver.into(),
            device: serde_json::from_value(json!({"name": name, "attributes": attrs})).unwrap(),
        }
    }

    #[test]
    fn nvidia_v05_gpus_mig_and_vfio_twins_are_one_gpu() {
        let root = json!({"string": "pci0000:15"});
        let gpu = dev(
            NVIDIA_GPU_DRIVER,
            "gpu-0",
            json!({"type": {"string": "gpu"}, "uuid": {"string": "GPU-1"},
                   "resource.kubernetes.io/pciBusID": {"string": "0000:18:00.0"},
                   "resource.kubernetes.io/pcieRoot": root,
                   "resource.kubernetes.io/numaNode": {"int": 0}}),
        );
        let mig = dev(
            NVIDIA_GPU_DRIVER,
            "gpu-0-mig-1g10gb-19-0",
            json!({"type": {"string": "mig"}, "parentUUID": {"string": "GPU-1"},
                   "resource.kubernetes.io/pciBusID": {"string": "0000:18:00.0"},
                   "resource.kubernetes.io/numaNode": {"ints": [0, 1]}}),
        );
        let twin = dev(
            NVIDIA_GPU_DRIVER,
            "gpu-vfio-0",
            json!({"type": {"string": "vfio"}, "resource.kubernetes.io/pciBusID": {"string": "0000:18:00.0"}}),
        );
        let channel = dev(
            "compute-domain.nvidia.com",
            "channel-0",
            json!({"type": {"string": "channel"}, "id": {"int": 0}}),
        );
        assert_eq!(gpu.gpu_form(), Some(GpuForm::Whole));
        assert_eq!(mig.gpu_form(), Some(GpuForm::Mig));
        assert_eq!(twin.gpu_form(), Some(GpuForm::Passthrough));
        assert_eq!(channel.role(), None);
        assert!(gpu.bdf() == mig.bdf() && mig.bdf() == twin.bdf());
        assert_eq!(gpu.numa_with_key(), Some((0, attr::NUMA_NODE_STD.into())));
        assert_eq!(mig.numa(), Some(0), "a list counts by its first element");
        assert_eq!(gpu.pcie_root().as_deref(), Some("pci0000:15"));
    }

    #[test]
    fn amd_partitions_and_the_vfio_twin() {
        let whole = dev(
            AMD_GPU_DRIVER,
            "gpu-0-128",
            json!({"type": {"string": "amdgpu"}, "pciAddr": {"string": "0000:0a:00.0"},
                   "numaNode": {"int": 1}, "productName": {"string": "Instinct_MI300X"}}),
        );
        let part = dev(
            AMD_GPU_DRIVER,
            "gpu-1-129",
            json!({"type": {"string": "amdgpu-partition"}, "parentPciAddr": {"string": "0000:0a:00.0"},
                   "numaNode": {"int": 1}}),
        );
        let twin = dev(
            AMD_GPU_DRIVER,
            "gpu-vfio-0",
            json!({"type": {"string": "vfio"}, "pciAddr": {"string": "0000:0a:00.0"}, "isVF": {"bool": false}}),
        );
        assert_eq!(
            (whole.gpu_form(), part.gpu_form(), twin.gpu_form()),
            (
                Some(GpuForm::Whole),
                Some(GpuForm::Partition),
                Some(GpuForm::Passthrough)
            )
        );
        assert!(whole.bdf().is_some() && whole.bdf() == part.bdf() && part.bdf() == twin.bdf());
        assert_eq!(
            whole.numa_with_key(),
            Some((1, "gpu.amd.com/numaNode".into()))
        );
    }

    #[test]
    fn sriov_vfs_and_dranet_nics_read_the_compat_numa_key() {
        let vf = dev(
            SRIOV_DRIVER,
            "0000-3b-00-2",
            json!({"sriovnetwork.k8snetworkplumbingwg.io/pciAddress": {"string": "0000:3b:00.2"},
                   "sriovnetwork.k8snetworkplumbingwg.io/rdmaCapable": {"bool": true},
                   "sriovnetwork.k8snetworkplumbingwg.io/pfPciAddress": {"string": "0000:3b:00.0"},
                   "resource.kubernetes.io/pciBusID": {"string": "0000:3b:00.2"},
                   "resource.kubernetes.io/pcieRoot": {"string": "pci0000:3a"},
                   "dra.net/numaNode": {"int": 1}}),
        );
        assert_eq!(vf.role(), Some(DeviceRole::Nic));
        assert_eq!(vf.rdma(), Some(true));
        assert_eq!(vf.numa_with_key(), Some((1, NUMA_NODE_COMPAT.into())));
        let unknown = dev(
            SRIOV_DRIVER,
            "0000-3b-00-3",
            json!({"sriovnetwork.k8snetworkplumbingwg.io/rdmaCapable": {"bool": false},
                   "dra.net/numaNode": {"int": -1}}),
        );
        assert_eq!((unknown.numa(), unknown.rdma()), (None, Some(false)));
        let eth = dev(
            DRANET_DRIVER,
            "pci-7870-00-00-0",
            json!({"dra.net/ifName": {"string": "eth0"}, "dra.net/rdma": {"bool": false}}),
        );
        assert_eq!(
            (eth.role(), eth.rdma()),
            (Some(DeviceRole::Nic), Some(false))
        );
        assert_eq!(eth.nic_label(), "eth0");
        let ib = dev(
            DRANET_DRIVER,
            "pci-0101-00-00-0",
            json!({"dra.net/rdmaDevice": {"string": "mlx5_0"}, "dra.net/numaNode": {"int": 0},
                   "resource.kubernetes.io/numaNode": {"ints": [0, 1]}}),
        );
        assert_eq!(ib.numa_with_key(), Some((0, attr::NUMA_NODE_STD.into())));
        assert_eq!((ib.rdma(), ib.nic_label().as_str()), (Some(true), "mlx5_0"));
    }

    #[test]
    fn cpus_are_neither_gpus_nor_nics() {
        let cpu = dev(
            crate::claim::CPU_DRIVER,
            "cpudev003",
            json!({"dra.cpu/numaNodeID": {"int": 0}, "dra.cpu/cpuID": {"int": 3},
                   "dra.net/numaNode": {"int": 0},
                   "resource.kubernetes.io/pcieRoot": {"strings": ["pci0000:00", "pci0000:16"]}}),
        );
        assert_eq!(cpu.role(), None);
        assert_eq!(cpu.numa(), Some(0));
        assert_eq!(cpu.pcie_root().as_deref(), Some("pci0000:00"));
    }
}
