//! NVLink is not in sysfs (NVML knows it): this merges the `NV#` cells of a saved
//! `nvidia-smi topo -m` into a topology discovered from sysfs.

use std::path::Path;

use topoalign_topology::{FabricKind, GpuLink, PairClass};

use super::{malformed, nvsmi::parse_nvidia_smi, read_text};
use crate::discovery::Discovery;
use crate::error::DiscoverError;

/// Reads `path` (an `nvidia-smi topo -m` output) and replaces the NVLink links of
/// `discovery` with its `NV#` cells. GPUs are matched by order: nvidia-smi numbers GPUs in
/// PCI bus order, which is the order of `Topology::gpus`. A GPU count that differs is an
/// error; a NUMA affinity that differs from sysfs, or a `GPU NUMA ID` sysfs did not know,
/// is reported (and the ID taken) in the warnings.
pub fn apply_nvlink_file(discovery: &mut Discovery, path: &Path) -> Result<(), DiscoverError> {
    let text = read_text(path)?;
    apply_nvlink_text(discovery, &text, path)
}

/// [`apply_nvlink_file`] on text already read; `path` is only used in messages.
pub fn apply_nvlink_text(
    discovery: &mut Discovery,
    text: &str,
    path: &Path,
) -> Result<(), DiscoverError> {
    let parsed = parse_nvidia_smi(text, path)?;
    let topo = &mut discovery.topology;
    let g = topo.gpus.len();
    if parsed.gpus.len() != g {
        let what = if parsed.gpus.len() > g {
            format!(
                "names {} which the discovered tree lacks",
                parsed.gpus[g..].join(", ")
            )
        } else {
            format!(
                "lacks GPU{} to GPU{} of the discovered tree",
                parsed.gpus.len(),
                g - 1
            )
        };
        return Err(malformed(
            path,
            parsed.header_line,
            format!(
                "this nvidia-smi output lists {} GPU(s) and the discovered tree has {g}: it {what} (saved on another machine?); GPUs are matched by index, so the counts must agree",
                parsed.gpus.len()
            ),
        ));
    }
    let mut warnings = Vec::new();
    {
        let c = topo.classifier();
        for i in 0..g {
            let sysfs_numa = c.numa_of(topo.gpus[i].pci);
            if let (Some(smi), Some(sys)) = (parsed.numa_affinity[i], sysfs_numa)
                && smi != sys
            {
                warnings.push(format!(
                    "{}: nvidia-smi says NUMA affinity {smi}, sysfs says {sys} ({}); keeping sysfs",
                    parsed.gpus[i],
                    topo.gpu_bdf(i)
                ));
            }
        }
    }
    for (i, gpu) in topo.gpus.iter_mut().enumerate() {
        if gpu.memory_numa_node.is_none()
            && let Some(id) = parsed.gpu_numa_id[i]
        {
            gpu.memory_numa_node = Some(id);
        }
    }
    topo.gpu_links.retain(|l| l.kind != FabricKind::Nvlink);
    for a in 0..g {
        for b in a + 1..g {
            if let PairClass::NvLink(count) = parsed.cell(a, b) {
                topo.gpu_links.push(GpuLink {
                    a,
                    b,
                    kind: FabricKind::Nvlink,
                    count,
                    weight: None,
                    hops: None,
                });
            }
        }
    }
    topo.fabric = topoalign_topology::FabricKnowledge::Known;
    topo.canonicalize();
    discovery.warnings.extend(parsed.warnings);
    discovery.warnings.extend(warnings);
    Ok(())
}
