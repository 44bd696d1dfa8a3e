//! GPU details: DRM nodes (`/sys/class/drm/{cardN,renderDN}/device`), the NVIDIA driver's
//! `/proc/driver/nvidia/gpus/<BDF>/information` (read in [`nvproc`](crate::sysfs::nvproc)), and amdgpu's
//! `product_name` and `mem_info_vram_total` in the PCI device directory.

use std::collections::BTreeMap;
use std::path::Path;

use topoalign_topology::{Bdf, Gpu, GpuVendor};

use super::fsread::{device_bdf, list_dir, numbered, read_trimmed};
pub use super::nvproc::{
    NVIDIA_PROC, NvidiaInfo, NvidiaInformation, nvidia_infos, parse_nvidia_information,
};
use crate::error::DiscoverError;

/// `/sys/class/drm`.
pub const DRM_CLASS: &str = "sys/class/drm";

/// GPU models attached to a Grace CPU by NVLink-C2C.
const C2C_MODELS: [&str; 3] = ["GH200", "GB200", "GB300"];

/// The DRM minors of one PCI function.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct DrmMinors {
    /// N of `cardN`.
    pub card: Option<u32>,
    /// N of `renderDN`.
    pub render: Option<u32>,
}

/// DRM minors per PCI function.
pub fn drm_minors(root: &Path) -> Result<BTreeMap<Bdf, DrmMinors>, DiscoverError> {
    let mut out: BTreeMap<Bdf, DrmMinors> = BTreeMap::new();
    for name in list_dir(&root.join(DRM_CLASS)) {
        let (card, render) = (numbered(&name, "card"), numbered(&name, "renderD"));
        if card.is_none() && render.is_none() {
            continue; // connectors such as card0-DP-1, and `version`
        }
        let link = Path::new(DRM_CLASS).join(&name).join("device");
        if let Some(bdf) = device_bdf(root, &link)? {
            let e = out.entry(bdf).or_default();
            if card.is_some() {
                e.card = card;
            }
            if render.is_some() {
                e.render = render;
            }
        }
    }
    Ok(out)
}

/// Fills model, UUID, minors and memory of a GPU whose PCI directory is `dir`.
pub fn fill(
    gpu: &mut Gpu,
    root: &Path,
    dir: &Path,
    drm: Option<&DrmMinors>,
    nvidia: Option<&NvidiaInfo>,
) {
    if let Some(m) = drm {
        gpu.card_minor = m.card;
        gpu.render_minor = m.render;
    }
    if let Some(info) = nvidia {
        gpu.model = info.model.clone();
        gpu.uuid = info.uuid.clone();
        gpu.nvidia_minor = info.minor;
    }
    if gpu.vendor == GpuVendor::Amd {
        let abs = root.join(dir);
        if let Some(name) = read_trimmed(&abs.join("product_name")).filter(|n| !n.is_empty()) {
            gpu.model = Some(name);
        }
        gpu.memory_mib = read_trimmed(&abs.join("mem_info_vram_total"))
            .and_then(|b| b.parse::<u64>().ok())
            .map(|bytes| bytes / (1024 * 1024))
            .filter(|&m| m > 0);
    }
    gpu.c2c = gpu
        .model
        .as_deref()
        .is_some_and(|m| C2C_MODELS.iter().any(|c| m.contains(c)));
}
