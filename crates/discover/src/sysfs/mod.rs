//! The sysfs walker: builds a [`Topology`](topoalign_topology::Topology) from what Linux exposes under a root directory
//! (`/` on a live host, a copied or generated tree in tests).
//!
//! Read: `/sys/bus/pci/devices/*` (resolved into `/sys/devices/pciDDDD:BB/…` chains),
//! NUMA nodes and CPU packages, RDMA/net class directories, DRM nodes, the AMD KFD
//! topology and the NVIDIA driver's `/proc/driver/nvidia/gpus`. Only GPUs, NICs and the
//! bridges above them are kept. Odd or missing files become warnings; a root that is not a
//! sysfs tree (no `sys/bus/pci/devices`) and a tree that cannot be walked (a symlink loop)
//! are errors.
//!
//! The GPU fabric: AMD xGMI comes from the KFD io_links; NVIDIA NVLink is not in sysfs, so
//! it is read from saved `nvidia-smi` output inside the tree when present ([`nvml`](crate::sysfs::nvml)) and is
//! otherwise
//! [`FabricKnowledge::Unknown`](topoalign_topology::FabricKnowledge::Unknown) — never "none". Nothing here runs a program.

/// Public as a namespace of the config-space layout it reads (the tree writer builds the same).
pub mod config;
/// Public as a sub-API: confined sysfs reads, used by `verify` and the neighbour readers.
pub mod fsread;
/// Public as a namespace of the GPU paths it reads (DRM class, NVIDIA's `/proc`), which the tree writer writes.
pub mod gpu;
/// Public as a namespace of the KFD topology paths and link types it reads, which the tree writer writes.
pub mod kfd;
/// Public as a sub-API: the RDMA device readers, used by the InfiniBand neighbour reader.
pub mod nic;
/// Public as a namespace of the NUMA and CPU paths it reads, which the tree writer writes.
pub mod numa;
/// Public as a sub-API: the MIG capability table, read by the kubelet plugin and node-facts.
pub mod nvcaps;
/// Public as a sub-API: what NVML adds to sysfs (NVLink, memory), used by the sources.
pub mod nvml;
/// Public as a sub-API: the NVIDIA driver's per-GPU `/proc` files, tested on their own.
pub mod nvproc;
/// Public as a namespace of the PCI bus paths it walks, which the tree writer writes.
pub mod pci;

use std::path::Path;

use topoalign_topology::{FabricKind, FabricKnowledge, Gpu, GpuLink, GpuVendor, Nic, Topology};

use crate::discovery::Discovery;
use crate::error::DiscoverError;

/// Walks sysfs/procfs under `root` and returns the topology it describes.
pub fn discover(root: &Path) -> Result<Discovery, DiscoverError> {
    if !root.is_dir() {
        return Err(DiscoverError::Io {
            path: root.to_path_buf(),
            source: std::io::Error::new(std::io::ErrorKind::NotFound, "not a directory"),
        });
    }
    if !root.join(pci::BUS_DEVICES).is_dir() {
        return Err(DiscoverError::NotSysfs {
            root: root.to_path_buf(),
        });
    }
    let mut warnings = Vec::new();
    let name = numa::hostname(root, &mut warnings);
    let numa_nodes = numa::scan(root, &mut warnings);
    let scan = pci::scan(root, &mut warnings)?;
    let drm = gpu::drm_minors(root)?;
    let nvidia = gpu::nvidia_infos(root, &mut warnings);
    let kfd = kfd::scan(root, &mut warnings);
    let mut nic_info = nic::scan(root, &mut warnings)?;

    let mut gpus = Vec::with_capacity(scan.gpus.len());
    for &p in &scan.gpus {
        let dev = &scan.pci[p];
        let mut g = Gpu::on(p, GpuVendor::from_pci(dev.vendor));
        gpu::fill(
            &mut g,
            root,
            &scan.dirs[p],
            drm.get(&dev.bdf),
            nvidia.get(&dev.bdf),
        );
        g.kfd_node = kfd.node_of.get(&dev.bdf).copied();
        gpus.push(g);
    }
    nvproc::check_minors(root, &mut gpus, &scan.pci, &nvidia, &mut warnings);

    let mut nics = Vec::with_capacity(scan.nics.len());
    for &p in &scan.nics {
        let bdf = scan.pci[p].bdf;
        let mut n = Nic::on(p);
        if let Some(info) = nic_info.remove(&bdf) {
            nic::apply(&mut n, info);
        }
        n.sriov = nic::sriov_of(root, &scan.dirs[p], bdf, &mut warnings)?;
        nics.push(n);
    }

    let mut gpu_links = Vec::new();
    for l in &kfd.xgmi {
        let a = gpus.iter().position(|g| g.kfd_node == Some(l.from));
        let b = gpus.iter().position(|g| g.kfd_node == Some(l.to));
        if let (Some(a), Some(b)) = (a, b) {
            gpu_links.push(GpuLink {
                a: a.min(b),
                b: a.max(b),
                kind: FabricKind::Xgmi,
                count: 1,
                weight: l.weight,
                hops: Some(1),
            });
        }
    }

    let mut topology = Topology {
        name,
        numa: numa_nodes,
        host_bridges: scan.host_bridges,
        pci: scan.pci,
        gpus,
        nics,
        gpu_links,
        fabric: FabricKnowledge::Known,
    };
    topology.canonicalize();
    topology.validate()?;
    let mut discovery = Discovery { topology, warnings };
    let nvlink_saved = nvml::apply_saved(root, &mut discovery);
    let t = &mut discovery.topology;
    let nvidia_unseen = !nvlink_saved && t.gpus.iter().any(|g| g.vendor == GpuVendor::Nvidia);
    let amd_unseen = t
        .gpus
        .iter()
        .any(|g| g.vendor == GpuVendor::Amd && g.kfd_node.is_none());
    if nvidia_unseen || amd_unseen {
        t.fabric = FabricKnowledge::Unknown;
    }
    Ok(discovery)
}
