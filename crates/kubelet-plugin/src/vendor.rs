//! The GPU vendors' CDI specs on this node: read from the runtime's CDI directories (the
//! decisions are in [`topoalign_dra::cdi_vendor`]), and whether an NVIDIA node lacks one.

use std::path::{Path, PathBuf};

use topoalign_dra::prepare::cdi_file_name;
use topoalign_dra::prepare::{AMD_KIND, NVIDIA_GENERATE, NVIDIA_KIND};
use topoalign_dra::{
    prepare::{PreparedGpu, VendorCdiError, VendorSpec, parse_vendor_spec},
    publish::Inventory,
};
use topoalign_topology::GpuVendor;

/// What one look at the CDI directories found.
#[derive(Debug, Clone, Default)]
pub struct VendorScan {
    /// Valid `nvidia.com/gpu` and `amd.com/gpu` specs.
    pub specs: Vec<VendorSpec>,
    /// Files that name a vendor kind (or could not be read) but are not valid specs,
    /// with the kind they name (`None`: unreadable, could be either).
    pub malformed: Vec<(Option<&'static str>, VendorCdiError)>,
}

impl VendorScan {
    /// Reads every `.json` / `.yaml` file of `dirs` (lowest priority first), skipping
    /// this driver's own claim specs. A missing directory is empty.
    pub fn read(dirs: &[PathBuf]) -> Self {
        let probe = cdi_file_name("");
        let own_prefix = probe.strip_suffix(".json").unwrap_or(&probe);
        let mut out = VendorScan::default();
        for (priority, dir) in dirs.iter().enumerate() {
            let entries = match std::fs::read_dir(dir) {
                Ok(e) => e,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                Err(e) => {
                    tracing::warn!(dir = %dir.display(), error = %e, "cannot list a CDI spec directory");
                    continue;
                }
            };
            let mut paths: Vec<PathBuf> = entries
                .flatten()
                .map(|e| e.path())
                .filter(|p| {
                    p.extension().is_some_and(|e| e == "json" || e == "yaml")
                        && !p
                            .file_name()
                            .is_some_and(|n| n.to_string_lossy().starts_with(own_prefix))
                        && !p.is_dir()
                })
                .collect();
            paths.sort();
            for path in paths {
                out.read_file(&path, priority);
            }
        }
        out
    }

    fn read_file(&mut self, path: &Path, priority: usize) {
        let text = match std::fs::read_to_string(path) {
            Ok(t) => t,
            Err(e) => {
                self.malformed.push((
                    None,
                    VendorCdiError::Malformed {
                        path: path.to_path_buf(),
                        what: format!("cannot be read: {e}"),
                    },
                ));
                return;
            }
        };
        match parse_vendor_spec(path, priority, &text) {
            Ok(Some(spec)) => self.specs.push(spec),
            Ok(None) => {}
            Err(e) => {
                let kind = if text.contains(NVIDIA_KIND) {
                    Some(NVIDIA_KIND)
                } else if text.contains(AMD_KIND) {
                    Some(AMD_KIND)
                } else {
                    None
                };
                self.malformed.push((kind, e));
            }
        }
    }

    /// Whether a valid spec of `kind` was found.
    pub fn has(&self, kind: &str) -> bool {
        self.specs.iter().any(|s| s.kind == kind)
    }

    /// The first malformed file that concerns one of these GPUs (a file naming their
    /// vendor's kind, or an unreadable one).
    pub fn malformed_for(&self, gpus: &[&PreparedGpu]) -> Option<&VendorCdiError> {
        let wants = |kind: &str| {
            gpus.iter().any(|g| match kind {
                NVIDIA_KIND => g.vendor == "nvidia",
                _ => g.vendor == "amd",
            })
        };
        self.malformed
            .iter()
            .find(|(kind, _)| match kind {
                Some(k) => wants(k),
                None => wants(NVIDIA_KIND) || wants(AMD_KIND),
            })
            .map(|(_, e)| e)
    }
}

/// Whether the node's GPUs have their vendor's CDI spec.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct VendorCdiStatus {
    /// The node has NVIDIA GPUs.
    pub nvidia_gpus: bool,
    /// A valid `nvidia.com/gpu` spec was found.
    pub nvidia_spec: bool,
    /// The node has AMD GPUs.
    pub amd_gpus: bool,
    /// A valid `amd.com/gpu` spec was found (optional: ROCm needs only device nodes).
    pub amd_spec: bool,
}

impl VendorCdiStatus {
    /// The status of `inventory`'s node given a scan.
    pub fn of(inventory: &Inventory, scan: &VendorScan) -> Self {
        let has = |v: GpuVendor| inventory.gpus.iter().any(|g| g.vendor == v);
        Self {
            nvidia_gpus: has(GpuVendor::Nvidia),
            nvidia_spec: scan.has(NVIDIA_KIND),
            amd_gpus: has(GpuVendor::Amd),
            amd_spec: scan.has(AMD_KIND),
        }
    }

    /// An NVIDIA node without the NVIDIA Container Toolkit's spec: CUDA finds no driver
    /// in the pods (nothing mounts the user-space driver).
    pub fn nvidia_missing(&self) -> bool {
        self.nvidia_gpus && !self.nvidia_spec
    }

    /// Logs a change of [`VendorCdiStatus::nvidia_missing`] (so the warning comes once,
    /// not at every prepare): `previous` is `None` at startup.
    pub fn log_change(&self, previous: Option<&VendorCdiStatus>, dirs: &[PathBuf]) {
        let was = previous.map(VendorCdiStatus::nvidia_missing);
        let dirs = dirs
            .iter()
            .map(|d| d.display().to_string())
            .collect::<Vec<_>>()
            .join(", ");
        match (was, self.nvidia_missing()) {
            (None | Some(false), true) => tracing::warn!(
                cdi_spec_dirs = %dirs,
                command = NVIDIA_GENERATE,
                "this node has NVIDIA GPUs but no nvidia.com/gpu CDI spec: pods get the device nodes only and CUDA finds no driver; generate the spec with `{NVIDIA_GENERATE}`"
            ),
            (Some(true), false) => {
                tracing::info!(cdi_spec_dirs = %dirs, "found the nvidia.com/gpu CDI spec")
            }
            _ => {}
        }
    }
}
