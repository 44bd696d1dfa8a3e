//! Which GPUs and NICs this process can use: device nodes under the dev root
//! (`dri/renderDN`, `nvidiaN`, `infiniband/uverbsN`) and the environment, mapped onto
//! the topology through sysfs.

use std::collections::BTreeSet;
use std::path::Path;

use topoalign_discover::sysfs::fsread::{device_bdf, list_dir, numbered, read_trimmed};
use topoalign_topology::{GpuVendor, Topology};

use crate::env::{EnvSelection, GpuRef, GpuSelector};
use crate::error::VerifyError;

/// Indices into the topology's GPUs and NICs that are visible, plus what was odd.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Visible {
    /// GPU indices, ascending.
    pub gpus: Vec<usize>,
    /// NIC indices, ascending.
    pub nics: Vec<usize>,
    /// Nodes or addresses that could not be mapped.
    pub warnings: Vec<String>,
}

/// Works out the visible devices.
pub(crate) fn visible(
    topo: &Topology,
    sysfs_root: &Path,
    dev_root: &Path,
    env: &EnvSelection,
) -> Result<Visible, VerifyError> {
    let mut out = Visible {
        warnings: env.warnings.clone(),
        ..Visible::default()
    };
    let mut gpus = BTreeSet::new();
    let mut nics = BTreeSet::new();

    for name in list_dir(&dev_root.join("dri")) {
        let Some(minor) = numbered(&name, "renderD") else {
            continue;
        };
        let link = Path::new("sys/class/drm").join(&name).join("device");
        match device_bdf(sysfs_root, &link)?.and_then(|b| topo.gpu_index(b)) {
            Some(g) => {
                gpus.insert(g);
            }
            None => out.warnings.push(format!(
                "{}: no GPU found through {} (render minor {minor})",
                dev_root.join("dri").join(&name).display(),
                sysfs_root.join(&link).display()
            )),
        }
    }
    for name in list_dir(dev_root) {
        let Some(minor) = numbered(&name, "nvidia") else {
            continue;
        };
        match topo.gpus.iter().position(|g| g.nvidia_minor == Some(minor)) {
            Some(g) => {
                gpus.insert(g);
            }
            None => out.warnings.push(format!(
                "{}: no GPU in /proc/driver/nvidia/gpus has Device Minor {minor}",
                dev_root.join(&name).display()
            )),
        }
    }

    let nvidia: Vec<usize> = (0..topo.gpus.len())
        .filter(|&g| topo.gpus[g].vendor == GpuVendor::Nvidia)
        .collect();
    if let Some(sel) = &env.nvidia_visible {
        let picked = pick(
            topo,
            sel,
            &nvidia,
            "NVIDIA_VISIBLE_DEVICES",
            &mut out.warnings,
        );
        gpus.extend(picked);
    }
    if let Some(sel) = &env.cuda_visible {
        // CUDA indices count the GPUs the process already sees (all of the host's when
        // none were found otherwise).
        let seen: Vec<usize> = gpus
            .iter()
            .copied()
            .filter(|g| nvidia.contains(g))
            .collect();
        let base = if seen.is_empty() {
            nvidia.clone()
        } else {
            seen
        };
        let picked = pick(topo, sel, &base, "CUDA_VISIBLE_DEVICES", &mut out.warnings);
        gpus.retain(|g| !nvidia.contains(g));
        gpus.extend(picked);
    }

    for (var, bdf) in &env.pci_devices {
        match topo.nic_index(*bdf) {
            Some(n) => {
                nics.insert(n);
            }
            None => out
                .warnings
                .push(format!("{var}: {bdf} is not a NIC in sysfs; ignored")),
        }
    }
    for name in list_dir(&dev_root.join("infiniband")) {
        if numbered(&name, "uverbs").is_none() {
            continue;
        }
        let ibdev_file = sysfs_root
            .join("sys/class/infiniband_verbs")
            .join(&name)
            .join("ibdev");
        let Some(ibdev) = read_trimmed(&ibdev_file).filter(|s| !s.is_empty()) else {
            out.warnings.push(format!(
                "{}: cannot map it to an RDMA device ({} is missing or empty)",
                dev_root.join("infiniband").join(&name).display(),
                ibdev_file.display()
            ));
            continue;
        };
        let link = Path::new("sys/class/infiniband")
            .join(&ibdev)
            .join("device");
        match device_bdf(sysfs_root, &link)?.and_then(|b| topo.nic_index(b)) {
            Some(n) => {
                nics.insert(n);
            }
            None => out.warnings.push(format!(
                "{}: RDMA device {ibdev} has no NIC behind {}",
                dev_root.join("infiniband").join(&name).display(),
                sysfs_root.join(&link).display()
            )),
        }
    }
    out.gpus = gpus.into_iter().collect();
    out.nics = nics.into_iter().collect();
    Ok(out)
}

/// The GPUs a selector names, indices counting within `base`.
fn pick(
    topo: &Topology,
    sel: &GpuSelector,
    base: &[usize],
    var: &str,
    warnings: &mut Vec<String>,
) -> Vec<usize> {
    match sel {
        GpuSelector::All => base.to_vec(),
        GpuSelector::Nothing => Vec::new(),
        GpuSelector::List(refs) => refs
            .iter()
            .filter_map(|r| {
                let found = match r {
                    GpuRef::Index(i) => base.get(*i).copied(),
                    GpuRef::Uuid(u) => topo
                        .gpus
                        .iter()
                        .position(|g| g.uuid.as_deref() == Some(u.as_str())),
                };
                if found.is_none() {
                    warnings.push(format!("{var}: {r:?} matches no GPU; ignored"));
                }
                found
            })
            .collect(),
    }
}
