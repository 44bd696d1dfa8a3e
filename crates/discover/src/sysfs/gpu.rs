//! GPU details: DRM nodes (`/sys/class/drm/{cardN,renderDN}/device`), the NVIDIA driver's
//! `/proc/driver/nvidia/gpus/<BDF>/information`, and amdgpu's `product_name` and
//! `mem_info_vram_total` in the PCI device directory.

use std::collections::BTreeMap;
use std::path::Path;

use topoalign_topology::{Bdf, Gpu, GpuVendor};

use super::fsread::{device_bdf, list_dir, numbered, read_trimmed};
use crate::error::DiscoverError;

/// `/sys/class/drm`.
pub const DRM_CLASS: &str = "sys/class/drm";
/// Where the NVIDIA driver describes each GPU.
pub const NVIDIA_PROC: &str = "proc/driver/nvidia/gpus";

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

/// What `/proc/driver/nvidia/gpus/<BDF>/information` says.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct NvidiaInfo {
    /// `Model:`.
    pub model: Option<String>,
    /// `GPU UUID:`.
    pub uuid: Option<String>,
    /// `Device Minor:`.
    pub minor: Option<u32>,
}

/// Parses an `information` file (`Key: \t value` lines).
pub fn parse_nvidia_information(text: &str) -> (Option<Bdf>, NvidiaInfo) {
    let mut info = NvidiaInfo::default();
    let mut bus = None;
    for line in text.lines() {
        let Some((key, value)) = line.split_once(':') else {
            continue;
        };
        let value = value.trim();
        match key.trim() {
            "Model" if !value.is_empty() => info.model = Some(value.to_string()),
            "GPU UUID" if !value.is_empty() => info.uuid = Some(value.to_string()),
            "Device Minor" => info.minor = value.parse().ok(),
            "Bus Location" => bus = value.parse().ok(),
            _ => {}
        }
    }
    (bus, info)
}

/// Reads every NVIDIA `information` file, keyed by PCI address.
pub fn nvidia_infos(root: &Path, warnings: &mut Vec<String>) -> BTreeMap<Bdf, NvidiaInfo> {
    let mut out = BTreeMap::new();
    let dir = root.join(NVIDIA_PROC);
    for name in list_dir(&dir) {
        let path = dir.join(&name).join("information");
        let Some(text) = read_trimmed(&path) else {
            warnings.push(format!("{}: missing or unreadable", path.display()));
            continue;
        };
        let (bus, info) = parse_nvidia_information(&text);
        match bus.or_else(|| name.parse().ok()) {
            Some(b) => {
                out.insert(b, info);
            }
            None => warnings.push(format!(
                "{}: no `Bus Location:` line and the directory is not a PCI address",
                path.display()
            )),
        }
    }
    out
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_driver_information_file() {
        let text = "Model: \t\t NVIDIA H100 80GB HBM3\nIRQ:   \t\t 504\nGPU UUID: \t GPU-9a1d2f3e-0000-4000-8000-000000000001\nVideo BIOS: \t 96.00.99.00.01\nBus Type: \t PCIe\nDMA Size: \t 52 bits\nBus Location: \t 0000:1b:00.0\nDevice Minor: \t 3\nGPU Excluded:\t No\n";
        let (bus, info) = parse_nvidia_information(text);
        assert_eq!(bus.unwrap().to_string(), "0000:1b:00.0");
        assert_eq!(info.model.as_deref(), Some("NVIDIA H100 80GB HBM3"));
        assert_eq!(info.minor, Some(3));
        assert!(info.uuid.unwrap().starts_with("GPU-9a1d"));
        let (bus, info) = parse_nvidia_information("garbage\n\0\0");
        assert!(bus.is_none() && info == NvidiaInfo::default());
    }
}
