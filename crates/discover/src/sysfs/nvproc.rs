//! The NVIDIA driver's `/proc/driver/nvidia/gpus/<BDF>/information` files: model, UUID
//! and the device number ("Device Minor", the N of `/dev/nvidiaN`), which sysfs does not
//! have. A container that discovers the host needs the host's `/proc/driver/nvidia`
//! mounted (the DaemonSet mounts it under `--sysfs-root`).
//!
//! The file is `Key: \t value` lines:
//!
//! ```text
//! Model:           NVIDIA H100 80GB HBM3
//! IRQ:             504
//! GPU UUID:        GPU-9a1d2f3e-0000-4000-8000-000000000001
//! Video BIOS:      96.00.99.00.01
//! Bus Type:        PCIe
//! DMA Size:        52 bits
//! DMA Mask:        0xfffffffffffff
//! Bus Location:    0000:1b:00.0
//! Device Minor:    0
//! GPU Excluded:    No
//! ```
//!
//! Nothing here is fatal: a field that does not parse is left unknown with a warning
//! naming the file and the field, and every NVIDIA GPU left without a device number gets
//! a warning naming the GPU and the file that should have given it ([`check_minors`](crate::sysfs::nvproc::check_minors)).

use std::collections::BTreeMap;
use std::path::Path;

use topoalign_topology::{Bdf, Gpu, GpuVendor, PciDevice};

use super::fsread::list_dir;
use crate::parse::excerpt;

/// Where the NVIDIA driver describes each GPU, relative to the root.
pub const NVIDIA_PROC: &str = "proc/driver/nvidia/gpus";

/// Device numbers above this are not NVIDIA minors (the driver uses 0–254; 255 is
/// `/dev/nvidiactl`).
const MAX_MINOR: u32 = 254;

/// What `/proc/driver/nvidia/gpus/<BDF>/information` says about one GPU.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct NvidiaInfo {
    /// `Model:`.
    pub model: Option<String>,
    /// `GPU UUID:`.
    pub uuid: Option<String>,
    /// `Device Minor:`.
    pub minor: Option<u32>,
}

/// One parsed `information` file.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct NvidiaInformation {
    /// `Bus Location:`.
    pub bus: Option<Bdf>,
    /// The GPU's facts.
    pub info: NvidiaInfo,
    /// Fields that were present but malformed, each naming the field, the value found
    /// and what was expected (without the file name, which the caller adds).
    pub problems: Vec<String>,
}

/// Parses an `information` file. Unknown keys are ignored; a known key with a value
/// that does not parse leaves that fact unknown and adds a problem.
pub fn parse_nvidia_information(text: &str) -> NvidiaInformation {
    let mut out = NvidiaInformation::default();
    let mut known_keys = 0usize;
    for line in text.lines() {
        let Some((key, value)) = line.split_once(':') else {
            continue;
        };
        let value = value.trim();
        let key = key.trim();
        let mut problem = |expected: &str| {
            out.problems.push(format!(
                "field `{key}`: `{}` is not {expected}",
                excerpt(value)
            ));
        };
        match key {
            "Model" => {
                known_keys += 1;
                if value.is_empty() {
                    problem("a model name (it is empty)");
                } else {
                    out.info.model = Some(value.to_string());
                }
            }
            "GPU UUID" => {
                known_keys += 1;
                if value.starts_with("GPU-")
                    && value.len() > 4
                    && !value.contains(char::is_whitespace)
                {
                    out.info.uuid = Some(value.to_string());
                } else {
                    problem("a GPU UUID (expected `GPU-` followed by the UUID)");
                }
            }
            "Device Minor" => {
                known_keys += 1;
                match value.parse::<u32>() {
                    Ok(m) if m <= MAX_MINOR => out.info.minor = Some(m),
                    _ => problem(&format!(
                        "a device number (expected an integer 0–{MAX_MINOR}, the N of /dev/nvidiaN)"
                    )),
                }
            }
            "Bus Location" => {
                known_keys += 1;
                match value.parse::<Bdf>() {
                    Ok(b) => out.bus = Some(b),
                    Err(_) => problem("a PCI address (expected DDDD:BB:DD.F)"),
                }
            }
            _ => {}
        }
    }
    if known_keys == 0 {
        out.problems.push(
            "none of the driver's fields (`Model:`, `GPU UUID:`, `Bus Location:`, `Device Minor:`) is there"
                .to_string(),
        );
    }
    out
}

/// Reads every NVIDIA `information` file under `root`, keyed by PCI address. Files that
/// cannot be read or placed, and malformed fields, become warnings naming the file.
pub fn nvidia_infos(root: &Path, warnings: &mut Vec<String>) -> BTreeMap<Bdf, NvidiaInfo> {
    let mut out = BTreeMap::new();
    let dir = root.join(NVIDIA_PROC);
    for name in list_dir(&dir) {
        let path = dir.join(&name).join("information");
        let text = match std::fs::read(&path) {
            Ok(bytes) => String::from_utf8_lossy(&bytes).into_owned(),
            Err(e) => {
                warnings.push(format!("{}: cannot be read: {e}", path.display()));
                continue;
            }
        };
        let parsed = parse_nvidia_information(&text);
        for p in &parsed.problems {
            warnings.push(format!("{}: {p}", path.display()));
        }
        let from_dir = name.parse::<Bdf>().ok();
        let bdf = match (parsed.bus, from_dir) {
            (Some(b), Some(d)) if b != d => {
                warnings.push(format!(
                    "{}: `Bus Location: {b}` differs from the directory name {d}; ignored",
                    path.display()
                ));
                continue;
            }
            (Some(b), _) | (None, Some(b)) => b,
            (None, None) => {
                warnings.push(format!(
                    "{}: no `Bus Location:` line and the directory is not a PCI address",
                    path.display()
                ));
                continue;
            }
        };
        out.insert(bdf, parsed.info);
    }
    out
}

/// Makes sure every NVIDIA GPU's device number is usable: a number claimed by two GPUs
/// is dropped from both (a container would otherwise get the wrong GPU's node), and each
/// NVIDIA GPU without a number gets a warning naming it and the file expected to give it.
pub fn check_minors(
    root: &Path,
    gpus: &mut [Gpu],
    pci: &[PciDevice],
    infos: &BTreeMap<Bdf, NvidiaInfo>,
    warnings: &mut Vec<String>,
) {
    let mut by_minor: BTreeMap<u32, Vec<usize>> = BTreeMap::new();
    for (i, g) in gpus.iter().enumerate() {
        if let Some(m) = g.nvidia_minor {
            by_minor.entry(m).or_default().push(i);
        }
    }
    for (m, holders) in by_minor.iter().filter(|(_, h)| h.len() > 1) {
        let names: Vec<String> = holders
            .iter()
            .map(|&i| pci[gpus[i].pci].bdf.to_string())
            .collect();
        warnings.push(format!(
            "NVIDIA GPUs {} all give `Device Minor: {m}` in {}: /dev/nvidia{m} cannot be all of them; their device numbers are dropped",
            names.join(", "),
            root.join(NVIDIA_PROC).display()
        ));
        for &i in holders {
            gpus[i].nvidia_minor = None;
        }
    }
    let proc_dir = root.join(NVIDIA_PROC);
    let dir_missing = !proc_dir.is_dir();
    for g in gpus
        .iter()
        .filter(|g| g.vendor == GpuVendor::Nvidia && g.nvidia_minor.is_none())
    {
        let bdf = pci[g.pci].bdf;
        let file = proc_dir.join(bdf.to_string()).join("information");
        let why = if dir_missing {
            format!(
                "{} does not exist (the NVIDIA driver is not loaded, or the host's /proc/driver/nvidia is not mounted under the sysfs root)",
                proc_dir.display()
            )
        } else if !infos.contains_key(&bdf) {
            format!("{} is missing or unusable", file.display())
        } else {
            format!("{} has no usable `Device Minor:` line", file.display())
        };
        warnings.push(format!(
            "NVIDIA GPU {bdf} has no device number (/dev/nvidiaN), so no container can be given its device node: expected `Device Minor:` in {}; {why}",
            file.display()
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_driver_information_file() {
        let text = "Model: \t\t NVIDIA H100 80GB HBM3\nIRQ:   \t\t 504\nGPU UUID: \t GPU-9a1d2f3e-0000-4000-8000-000000000001\nVideo BIOS: \t 96.00.99.00.01\nBus Type: \t PCIe\nDMA Size: \t 52 bits\nDMA Mask: \t 0xfffffffffffff\nBus Location: \t 0000:1b:00.0\nDevice Minor: \t 3\nGPU Excluded:\t No\n";
        let p = parse_nvidia_information(text);
        assert_eq!(p.bus.unwrap().to_string(), "0000:1b:00.0");
        assert_eq!(p.info.model.as_deref(), Some("NVIDIA H100 80GB HBM3"));
        assert_eq!(p.info.minor, Some(3));
        assert!(p.info.uuid.unwrap().starts_with("GPU-9a1d"));
        assert!(p.problems.is_empty(), "{:?}", p.problems);
    }

    #[test]
    fn garbage_is_a_problem_not_a_fact() {
        let p = parse_nvidia_information("garbage\n\0\0");
        assert!(p.bus.is_none() && p.info == NvidiaInfo::default());
        assert!(
            p.problems[0].contains("none of the driver's fields"),
            "{:?}",
            p.problems
        );
    }

    #[test]
    fn each_malformed_field_is_named() {
        let p = parse_nvidia_information(
            "Model: \nGPU UUID: 1234\nBus Location: 0000:zz:00.0\nDevice Minor: -1\n",
        );
        assert_eq!(p.info, NvidiaInfo::default());
        assert_eq!(p.bus, None);
        let all = p.problems.join("\n");
        for field in ["`Model`", "`GPU UUID`", "`Bus Location`", "`Device Minor`"] {
            assert!(all.contains(field), "{field} not named in {all}");
        }
        assert!(all.contains("`-1` is not a device number"), "{all}");
        let p = parse_nvidia_information("Device Minor: 255\n");
        assert_eq!(p.info.minor, None, "255 is nvidiactl, not a GPU");
    }
}
