//! Host-wide parts: host name, NUMA nodes and CPU packages, the AMD KFD topology and the
//! NVIDIA driver's per-GPU `information` files.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use topoalign_topology::{FabricKind, GpuVendor, Topology};

use super::tree::Tree;
use crate::error::DiscoverError;
use crate::sysfs::gpu::NVIDIA_PROC;
use crate::sysfs::kfd::{IOLINK_TYPE_PCIE, IOLINK_TYPE_XGMI, KFD_NODES};
use crate::sysfs::numa::{CPU_DIR, NODE_DIR};

/// Weight of a PCIe io_link in KFD (one PCIe segment).
const PCIE_LINK_WEIGHT: u32 = 20;
/// Weight of one xGMI hop when the model does not say.
const XGMI_LINK_WEIGHT: u32 = 15;

/// Host name, NUMA nodes (`cpulist`, `distance`, `meminfo`) and each CPU's package.
pub(super) fn write_host(tree: &Tree, topo: &Topology) -> Result<(), DiscoverError> {
    tree.file(Path::new("proc/sys/kernel/hostname"), &topo.name)?;
    let mut online = Vec::new();
    for node in &topo.numa {
        let d = Path::new(NODE_DIR).join(format!("node{}", node.id));
        tree.file(&d.join("cpulist"), &node.cpus.to_string())?;
        let row: Vec<String> = node.distances.iter().map(u32::to_string).collect();
        tree.file(&d.join("distance"), &row.join(" "))?;
        if let Some(kib) = node.memory_kib {
            let text = format!(
                "Node {id} MemTotal:       {kib} kB\nNode {id} MemFree:        {kib} kB\n",
                id = node.id
            );
            tree.file(&d.join("meminfo"), &text)?;
        }
        for &cpu in node.cpus.ids() {
            online.push(cpu);
            let t = Path::new(CPU_DIR).join(format!("cpu{cpu}/topology"));
            if let Some(s) = node.socket {
                tree.file(&t.join("physical_package_id"), &s.to_string())?;
            } else {
                tree.dir(&t)?;
            }
        }
    }
    let online = topoalign_topology::CpuSet::from_ids(online);
    tree.file(&Path::new(CPU_DIR).join("online"), &online.to_string())?;
    Ok(())
}

/// KFD topology: one CPU node per NUMA node with CPUs (ids not taken by a GPU), one
/// node per GPU that has a `kfd_node`, a PCIe io_link from each GPU to its CPU node and
/// an xGMI io_link per direction for every xGMI link.
pub(super) fn write_kfd(tree: &Tree, topo: &Topology) -> Result<(), DiscoverError> {
    if topo.gpus.iter().all(|g| g.kfd_node.is_none()) {
        return Ok(());
    }
    let gpu_ids: Vec<u32> = topo.gpus.iter().filter_map(|g| g.kfd_node).collect();
    let mut cpu_node_of_numa = Vec::new();
    let mut next = 0u32;
    for node in topo.numa.iter().filter(|n| !n.cpus.is_empty()) {
        while gpu_ids.contains(&next) {
            next += 1;
        }
        let props = format!(
            "cpu_cores_count {}\nsimd_count 0\nmem_banks_count 1\nio_links_count 0\ngpu_id 0\nlocation_id 0\ndomain 0\ndrm_render_minor 0\n",
            node.cpus.len()
        );
        let d = Path::new(KFD_NODES).join(next.to_string());
        tree.file(&d.join("properties"), &props)?;
        tree.file(&d.join("gpu_id"), "0")?;
        cpu_node_of_numa.push((node.id, next));
        next += 1;
    }
    let classifier = topo.classifier();
    for (gi, g) in topo.gpus.iter().enumerate() {
        let Some(id) = g.kfd_node else { continue };
        let bdf = topo.pci[g.pci].bdf;
        let loc =
            (u32::from(bdf.bus) << 8) | (u32::from(bdf.device) << 3) | u32::from(bdf.function);
        let mut links: Vec<(u64, u32, u32)> = Vec::new();
        let numa = classifier.numa_of(g.pci);
        if let Some(&(_, cpu)) = cpu_node_of_numa
            .iter()
            .find(|(n, _)| Some(*n) == numa)
            .or(cpu_node_of_numa.first())
        {
            links.push((IOLINK_TYPE_PCIE, cpu, PCIE_LINK_WEIGHT));
        }
        for l in topo.gpu_links.iter().filter(|l| l.kind == FabricKind::Xgmi) {
            let peer = if l.a == gi {
                l.b
            } else if l.b == gi {
                l.a
            } else {
                continue;
            };
            if let Some(peer_id) = topo.gpus.get(peer).and_then(|p| p.kfd_node) {
                links.push((
                    IOLINK_TYPE_XGMI,
                    peer_id,
                    l.weight.unwrap_or(XGMI_LINK_WEIGHT),
                ));
            }
        }
        let mut props = format!(
            "cpu_cores_count 0\nsimd_count 1216\nmem_banks_count 1\nio_links_count {}\ngpu_id {}\nlocation_id {loc}\ndomain {}\n",
            links.len(),
            40000 + id,
            bdf.domain
        );
        if let Some(r) = g.render_minor {
            let _ = writeln!(props, "drm_render_minor {r}");
        }
        let d: PathBuf = Path::new(KFD_NODES).join(id.to_string());
        tree.file(&d.join("properties"), &props)?;
        tree.file(&d.join("gpu_id"), &(40000 + id).to_string())?;
        for (k, (ty, to, weight)) in links.iter().enumerate() {
            let text = format!("type {ty}\nnode_from {id}\nnode_to {to}\nweight {weight}\n");
            tree.file(&d.join(format!("io_links/{k}/properties")), &text)?;
        }
    }
    Ok(())
}

/// `/proc/driver/nvidia/gpus/<BDF>/information` for every NVIDIA GPU, in the driver's
/// format (read back by [`crate::sysfs::nvproc`]); `Device Minor:` only when the GPU has
/// one, so a tree of a GPU without a device number reads back as one.
pub(super) fn write_nvidia(tree: &Tree, topo: &Topology) -> Result<(), DiscoverError> {
    for g in topo.gpus.iter().filter(|g| g.vendor == GpuVendor::Nvidia) {
        let bdf = topo.pci[g.pci].bdf;
        let mut text = String::new();
        if let Some(m) = &g.model {
            let _ = writeln!(text, "Model: \t\t {m}");
        }
        let _ = writeln!(text, "IRQ:   \t\t {}", 100 + u32::from(bdf.bus));
        if let Some(u) = &g.uuid {
            let _ = writeln!(text, "GPU UUID: \t {u}");
        }
        let _ = writeln!(text, "Video BIOS: \t 96.00.99.00.01");
        let _ = writeln!(text, "Bus Type: \t PCIe");
        let _ = writeln!(text, "DMA Size: \t 52 bits");
        let _ = writeln!(text, "DMA Mask: \t 0xfffffffffffff");
        let _ = writeln!(text, "Bus Location: \t {bdf}");
        if let Some(minor) = g.nvidia_minor {
            let _ = writeln!(text, "Device Minor: \t {minor}");
        }
        let _ = writeln!(text, "GPU Excluded:\t No");
        tree.file(
            &Path::new(NVIDIA_PROC)
                .join(bdf.to_string())
                .join("information"),
            &text,
        )?;
    }
    Ok(())
}
