//! In-pod (or host) verification of GPU/NIC alignment from /dev, environment variables
//! and sysfs.
//!
//! Inside a pod, `/sys` shows the whole host but `/dev` holds only the device nodes the
//! pod was given, and the device plugins describe the rest in environment variables.
//! [`verify`] finds the visible GPUs (`/dev/dri/renderDN` → `/sys/class/drm/renderDN/device`,
//! `/dev/nvidiaN` → the NVIDIA driver's `Device Minor`, `NVIDIA_VISIBLE_DEVICES` and
//! `CUDA_VISIBLE_DEVICES`) and NICs (`PCIDEVICE_*` from the SR-IOV plugin,
//! `/dev/infiniband/uverbsN` → `ibdev` → `/sys/class/infiniband/<dev>/device`), maps them
//! onto the topology the sysfs walker finds, and reports each GPU's best NIC.

#[cfg(feature = "clap")]
mod args;
mod env;
mod error;
mod gate;
mod report;
mod visible;

use std::path::Path;

#[cfg(feature = "clap")]
pub use args::VerifyArgs;
pub use env::{EnvSelection, GpuRef, GpuSelector, parse_env};
pub use error::VerifyError;
pub use report::{BestNic, GpuEntry, NicEntry, Report};
pub use visible::Visible;

/// Walks sysfs under `sysfs_root`, looks at the device nodes under `dev_root` and at
/// `env` (the process environment), and reports what is visible and how it is aligned.
pub fn verify(
    sysfs_root: &Path,
    dev_root: &Path,
    env: impl IntoIterator<Item = (String, String)>,
) -> Result<Report, VerifyError> {
    match std::fs::metadata(dev_root) {
        Ok(m) if m.is_dir() => {}
        Ok(_) => {
            return Err(VerifyError::DevRoot {
                path: dev_root.to_path_buf(),
                why: "not a directory".into(),
            });
        }
        Err(e) => {
            return Err(VerifyError::DevRoot {
                path: dev_root.to_path_buf(),
                why: e.kind().to_string(),
            });
        }
    }
    let selection = parse_env(env)?;
    let discovery = topoalign_discover::sysfs::discover(sysfs_root)?;
    let topo = &discovery.topology;
    let vis = visible::visible(topo, sysfs_root, dev_root, &selection)?;
    let mut report = report::build(topo, vis);
    let mut warnings = discovery.warnings;
    warnings.append(&mut report.warnings);
    report.warnings = warnings;
    Ok(report)
}
