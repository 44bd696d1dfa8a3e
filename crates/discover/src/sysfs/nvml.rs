//! What sysfs lacks on NVIDIA hosts (NVLink links and GPU memory sizes come from NVML),
//! read from saved tool output inside the tree. `topoalign profile write` saves them there
//! so that a written tree carries every fact of its profile, and an administrator can do
//! the same on a host (for example from a DaemonSet that has `nvidia-smi`):
//!
//! | file under the root | command that writes it |
//! |---|---|
//! | [`TOPO_FILE`](crate::sysfs::nvml::TOPO_FILE) | `nvidia-smi topo -m` |
//! | [`MEMORY_FILE`](crate::sysfs::nvml::MEMORY_FILE) | `nvidia-smi --query-gpu=pci.bus_id,memory.total --format=csv` |
//!
//! Both are optional. Like every other file of the tree, one that is unreadable or does
//! not match the tree (a GPU it names is missing) becomes a warning naming the file and
//! is not merged: the NVLink fabric then stays unknown rather than half-read.

use std::fmt::Write as _;
use std::path::Path;

use topoalign_topology::{Bdf, FabricKnowledge, GpuVendor, Topology};

use crate::discovery::Discovery;
use crate::error::DiscoverError;
use crate::parse::nvlink_merge::apply_nvlink_text;
use crate::parse::{excerpt, malformed, read_text};

/// Saved `nvidia-smi topo -m` output, relative to the root.
pub const TOPO_FILE: &str = "var/lib/topoalign/nvidia-smi-topo-m.txt";
/// Saved `nvidia-smi --query-gpu=pci.bus_id,memory.total --format=csv` output.
pub const MEMORY_FILE: &str = "var/lib/topoalign/nvidia-smi-query-gpu.csv";

/// Merges the saved files present under `root` into `discovery`; returns whether the
/// NVLink file was there (the fabric is then known).
pub fn apply_saved(root: &Path, discovery: &mut Discovery) -> bool {
    let mem = root.join(MEMORY_FILE);
    if mem.is_file() {
        let mut t = discovery.topology.clone();
        match read_text(&mem).and_then(|text| apply_memory_csv(&mut t, &text, &mem)) {
            Ok(()) => discovery.topology = t,
            Err(e) => discovery
                .warnings
                .push(format!("{e}; GPU memory sizes not merged")),
        }
    }
    let topo = root.join(TOPO_FILE);
    if !topo.is_file() {
        return false;
    }
    let mut merged = discovery.clone();
    match read_text(&topo).and_then(|text| apply_nvlink_text(&mut merged, &text, &topo)) {
        Ok(()) => {
            merged.topology.fabric = FabricKnowledge::Known;
            *discovery = merged;
            true
        }
        Err(e) => {
            discovery
                .warnings
                .push(format!("{e}; NVLink links not merged (unknown)"));
            false
        }
    }
}

/// Sets NVIDIA GPU memory sizes from `--query-gpu=pci.bus_id,memory.total --format=csv`.
pub fn apply_memory_csv(topo: &mut Topology, text: &str, path: &Path) -> Result<(), DiscoverError> {
    let mut lines = text
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty());
    let Some((_, header)) = lines.next() else {
        return Err(malformed(
            path,
            1,
            "empty: expected the header `pci.bus_id, memory.total [MiB]`",
        ));
    };
    if !header
        .trim_start_matches('\u{feff}')
        .trim()
        .starts_with("pci.bus_id, memory.total")
    {
        return Err(malformed(
            path,
            1,
            format!(
                "expected the header `pci.bus_id, memory.total [MiB]`, found `{}`",
                excerpt(header)
            ),
        ));
    }
    for (i, line) in lines {
        let line_no = i + 1;
        let (bus, mem) = line.split_once(',').ok_or_else(|| {
            malformed(
                path,
                line_no,
                format!("expected `<bus id>, <MiB> MiB`, found `{}`", excerpt(line)),
            )
        })?;
        let bdf: Bdf = bus
            .trim()
            .parse()
            .map_err(|e| malformed(path, line_no, format!("{e}")))?;
        let mib: u64 = mem
            .trim()
            .strip_suffix("MiB")
            .map(str::trim)
            .and_then(|m| m.parse().ok())
            .ok_or_else(|| {
                malformed(
                    path,
                    line_no,
                    format!("memory `{}` is not `<number> MiB`", excerpt(mem)),
                )
            })?;
        let g = topo.gpu_index(bdf).ok_or_else(|| {
            malformed(
                path,
                line_no,
                format!(
                    "GPU {bdf} is not in the sysfs tree: the file was saved on another machine?"
                ),
            )
        })?;
        topo.gpus[g].memory_mib = Some(mib);
    }
    Ok(())
}

/// The memory CSV for the NVIDIA GPUs of `topo` that have a known memory size (`None`
/// when there is nothing to write).
pub fn memory_csv(topo: &Topology) -> Option<String> {
    let mut out = String::from("pci.bus_id, memory.total [MiB]\n");
    let mut any = false;
    for g in topo.gpus.iter().filter(|g| g.vendor == GpuVendor::Nvidia) {
        if let Some(mib) = g.memory_mib {
            let b = topo.pci[g.pci].bdf;
            let _ = writeln!(
                out,
                "{:08X}:{:02X}:{:02X}.{}, {mib} MiB",
                b.domain, b.bus, b.device, b.function
            );
            any = true;
        }
    }
    any.then_some(out)
}
