//! Class directories: `infiniband`, `infiniband_verbs`, `infiniband_mad`, `net` and
//! `drm`, each entry a directory below its PCI function linked from `sys/class/<class>`,
//! with a `device` link back; plus the matching `/dev` nodes as plain files.

use std::path::{Path, PathBuf};

use topoalign_topology::{GpuVendor, Topology};

use super::tree::Tree;
use crate::error::DiscoverError;
use crate::sysfs::gpu::DRM_CLASS;
use crate::sysfs::nic::{IB_CLASS, MAD_CLASS, NET_CLASS, VERBS_CLASS};

/// Creates `<dev dir>/<class>/<name>` with a `device` link to the function, links it
/// from `sys/class/<class>/<name>`, and returns its path.
fn class_entry(
    tree: &Tree,
    dev_dir: &Path,
    class_dir: &str,
    name: &str,
) -> Result<PathBuf, DiscoverError> {
    let sub = Path::new(class_dir)
        .file_name()
        .map(PathBuf::from)
        .unwrap_or_default();
    let entry = dev_dir.join(sub).join(name);
    tree.dir(&entry)?;
    tree.link(&entry.join("device"), dev_dir)?;
    tree.link(&Path::new(class_dir).join(name), &entry)?;
    Ok(entry)
}

/// The speed name the kernel appends to an IB rate (`400 Gb/sec (4X NDR)`).
fn rate_text(gbps: u32) -> String {
    let per_lane = gbps / 4;
    let name = match per_lane {
        10 => " QDR",
        25 => " EDR",
        50 => " HDR",
        100 => " NDR",
        200 => " XDR",
        _ => "",
    };
    format!("{gbps} Gb/sec (4X{name})")
}

/// Writes RDMA devices, verbs/MAD nodes, netdevs and their `/dev` nodes.
pub(super) fn write_nics(
    tree: &Tree,
    topo: &Topology,
    dirs: &[PathBuf],
) -> Result<(), DiscoverError> {
    let mut any_rdma = false;
    for nic in &topo.nics {
        let dev_dir = &dirs[nic.pci];
        if let Some(rdma) = &nic.rdma {
            any_rdma = true;
            let e = class_entry(tree, dev_dir, IB_CLASS, rdma)?;
            for port in &nic.ports {
                let pd = e.join("ports").join(port.number.to_string());
                tree.file(&pd.join("link_layer"), port.link_layer.as_sysfs())?;
                if let Some(r) = port.rate_gbps {
                    tree.file(&pd.join("rate"), &rate_text(r))?;
                }
                if let Some(umad) = &port.umad {
                    let m = class_entry(tree, dev_dir, MAD_CLASS, umad)?;
                    tree.file(&m.join("ibdev"), rdma)?;
                    tree.file(&m.join("port"), &port.number.to_string())?;
                    tree.file(&Path::new("dev/infiniband").join(umad), "")?;
                }
            }
            if let Some(uverbs) = &nic.uverbs {
                let v = class_entry(tree, dev_dir, VERBS_CLASS, uverbs)?;
                tree.file(&v.join("ibdev"), rdma)?;
                tree.file(&Path::new("dev/infiniband").join(uverbs), "")?;
            }
        }
        if let Some(ifname) = &nic.netdev {
            let e = class_entry(tree, dev_dir, NET_CLASS, ifname)?;
            let speed = nic.speed_mbps.map_or("-1".to_string(), |s| s.to_string());
            tree.file(&e.join("speed"), &speed)?;
        }
    }
    if any_rdma {
        tree.file(Path::new("dev/infiniband/rdma_cm"), "")?;
    }
    // The loopback interface, as on every host: a virtual netdev with no device link.
    let lo = Path::new("sys/devices/virtual/net/lo");
    tree.file(&lo.join("mtu"), "65536")?;
    tree.link(&Path::new(NET_CLASS).join("lo"), lo)?;
    Ok(())
}

/// Writes DRM card/render nodes, amdgpu's identity files and the GPU `/dev` nodes.
pub(super) fn write_gpus(
    tree: &Tree,
    topo: &Topology,
    dirs: &[PathBuf],
) -> Result<(), DiscoverError> {
    for g in &topo.gpus {
        let dev_dir = &dirs[g.pci];
        if let Some(m) = g.card_minor {
            let name = format!("card{m}");
            class_entry(tree, dev_dir, DRM_CLASS, &name)?;
            tree.file(&Path::new("dev/dri").join(&name), "")?;
        }
        if let Some(m) = g.render_minor {
            let name = format!("renderD{m}");
            class_entry(tree, dev_dir, DRM_CLASS, &name)?;
            tree.file(&Path::new("dev/dri").join(&name), "")?;
        }
        if g.vendor == GpuVendor::Amd {
            if let Some(model) = &g.model {
                tree.file(&dev_dir.join("product_name"), model)?;
            }
            if let Some(mib) = g.memory_mib {
                tree.file(
                    &dev_dir.join("mem_info_vram_total"),
                    &(mib * 1024 * 1024).to_string(),
                )?;
            }
            tree.file(Path::new("dev/kfd"), "")?;
        }
        if let Some(m) = g.nvidia_minor {
            tree.file(&Path::new("dev").join(format!("nvidia{m}")), "")?;
            tree.file(Path::new("dev/nvidiactl"), "")?;
        }
    }
    Ok(())
}
