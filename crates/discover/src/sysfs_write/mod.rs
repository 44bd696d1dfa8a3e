//! Materialises a [`Topology`] as a real sysfs/procfs/dev tree, laid out as Linux lays it
//! out (`sys/devices/pciDDDD:BB/<root port>/<switch ports>/<device>`, relative symlinks
//! from `sys/bus/pci/devices` and the class directories, KFD topology, NVIDIA
//! `information` files, `/dev` nodes as plain files, and for NVIDIA GPUs the saved
//! `nvidia-smi` outputs of [`crate::sysfs::nvml`] that carry NVLink and memory sizes). The
//! walker in [`crate::sysfs`] reads it back, every fact included; `topoalign verify` tests
//! run against it.
//!
//! The tree is written into a temporary sibling directory and renamed into place, so a
//! failure never leaves a half-written tree at the target.

mod classes;
mod pci;
mod system;
mod tree;

use std::path::{Path, PathBuf};

use topoalign_topology::{FabricKind, GpuVendor, Topology};

use crate::error::DiscoverError;
use tree::Tree;

/// Writes `topo` as a sysfs tree rooted at `dir`. `dir` must not exist or be empty.
pub fn write_tree(topo: &Topology, dir: &Path) -> Result<(), DiscoverError> {
    topo.validate()?;
    check_target(dir)?;
    let parent = match dir.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let base = dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "tree".to_string());
    let tmp = parent.join(format!(".{base}.partial-{}", std::process::id()));
    if tmp.exists() {
        std::fs::remove_dir_all(&tmp).map_err(|e| io_err(&tmp, e))?;
    }
    let result = write_into(topo, &tmp).and_then(|()| {
        // rename(2) replaces an empty directory atomically.
        std::fs::rename(&tmp, dir).map_err(|e| io_err(dir, e))
    });
    if result.is_err() {
        let _ = std::fs::remove_dir_all(&tmp);
    }
    result?;
    if let Ok(d) = std::fs::File::open(&parent) {
        let _ = d.sync_all();
    }
    Ok(())
}

/// The part of a topology that Linux sysfs itself exposes: `topo` without its NVLink
/// links and without the memory sizes of NVIDIA GPUs (NVLink and NVIDIA memory come from
/// NVML, not sysfs), canonicalized. A tree written by [`write_tree`] also carries the
/// saved NVML outputs, so discovering it gives back all of `topo`; this is what is left
/// without them.
pub fn sysfs_view(topo: &Topology) -> Topology {
    let mut view = topo.clone();
    view.gpu_links.retain(|l| l.kind != FabricKind::Nvlink);
    for gpu in &mut view.gpus {
        if gpu.vendor == GpuVendor::Nvidia {
            gpu.memory_mib = None;
        }
    }
    if view.gpus.iter().any(|g| g.vendor == GpuVendor::Nvidia) {
        view.fabric = topoalign_topology::FabricKnowledge::Unknown;
    }
    view.canonicalize();
    view
}

/// Refuses an existing non-empty target (or a target that is not a directory).
fn check_target(dir: &Path) -> Result<(), DiscoverError> {
    match std::fs::read_dir(dir) {
        Ok(mut entries) => {
            if entries.next().is_some() {
                return Err(DiscoverError::Io {
                    path: dir.to_path_buf(),
                    source: std::io::Error::new(
                        std::io::ErrorKind::AlreadyExists,
                        "directory is not empty; a sysfs tree is written only into a new or empty directory",
                    ),
                });
            }
            Ok(())
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(io_err(dir, e)),
    }
}

/// Writes every part of the tree under `root`.
fn write_into(topo: &Topology, root: &Path) -> Result<(), DiscoverError> {
    let tree = Tree::new(root)?;
    let dirs = pci::device_dirs(topo);
    system::write_host(&tree, topo)?;
    pci::write_functions(&tree, topo, &dirs)?;
    classes::write_nics(&tree, topo, &dirs)?;
    classes::write_gpus(&tree, topo, &dirs)?;
    system::write_kfd(&tree, topo)?;
    system::write_nvidia(&tree, topo)?;
    write_nvml_outputs(&tree, topo)?;
    Ok(())
}

/// Saves what NVML would tell about the NVIDIA GPUs ([`crate::sysfs::nvml`]): the
/// `nvidia-smi topo -m` matrix (NVLink) and the memory sizes, so that the tree carries
/// every fact of the topology.
fn write_nvml_outputs(tree: &Tree, topo: &Topology) -> Result<(), DiscoverError> {
    use crate::sysfs::nvml;
    if !topo.gpus.iter().any(|g| g.vendor == GpuVendor::Nvidia) {
        return Ok(());
    }
    let matrix = topoalign_topology::PairMatrix::build(topo, Default::default());
    let text = topoalign_render::render_matrix(&matrix, topoalign_render::MatrixStyle::Tabs);
    tree.file(Path::new(nvml::TOPO_FILE), &text)?;
    if let Some(csv) = nvml::memory_csv(topo) {
        tree.file(Path::new(nvml::MEMORY_FILE), &csv)?;
    }
    Ok(())
}

/// An I/O error naming its path.
fn io_err(path: &Path, source: std::io::Error) -> DiscoverError {
    DiscoverError::Io {
        path: path.to_path_buf(),
        source,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use topoalign_profiles as profiles;

    #[test]
    fn sysfs_view_drops_only_what_nvml_knows() {
        let dgx = profiles::get("dgx-h100").unwrap();
        assert!(dgx.gpu_links.iter().any(|l| l.kind == FabricKind::Nvlink));
        assert!(dgx.gpus.iter().all(|g| g.memory_mib.is_some()));
        let view = sysfs_view(&dgx);
        assert!(view.gpu_links.is_empty());
        assert!(view.gpus.iter().all(|g| g.memory_mib.is_none()));
        assert_eq!(view.gpus.len(), dgx.gpus.len());
        assert_eq!(view.nics, dgx.nics);

        // AMD xGMI links and AMD memory sizes are in sysfs (KFD): kept.
        let mi300x = profiles::get("mi300x-8").unwrap();
        let view = sysfs_view(&mi300x);
        assert_eq!(view.gpu_links.len(), 28);
        assert!(view.gpus.iter().all(|g| g.memory_mib.is_some()));
        let mut canonical = mi300x.clone();
        canonical.canonicalize();
        assert_eq!(view, canonical);
    }
}
