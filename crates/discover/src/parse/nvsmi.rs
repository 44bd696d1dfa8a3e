//! The `nvidia-smi topo -m` table, parsed into [`NvidiaSmiTopo`].
//!
//! Accepted layouts (all seen from real drivers):
//! - tab-separated (what the tool writes: the self cell is ` X `, the wide `NUMA Affinity`
//!   heading is padded with a second tab) or space-aligned (copied from a terminal);
//! - NIC columns named `NIC0…` with a `NIC Legend:` section (`  NIC0: mlx5_0`), or, from
//!   older drivers, named by the RDMA device itself (`mlx5_0`);
//! - with or without the `NUMA Affinity` and `GPU NUMA ID` columns (`N/A` on x86);
//! - ANSI escape sequences anywhere (the header is underlined on a terminal);
//! - the `Legend:` block of old drivers ("PCIe switches") and new ones ("PCIe bridges"),
//!   and the `SOC` class of very old drivers (read as `SYS`).
//!
//! Lines before the header (a shell prompt, the command, a Markdown fence) and after the
//! rows (the legend, a closing fence, a prompt) are ignored.

use std::collections::HashMap;
use std::path::Path;

use topoalign_topology::{CpuSet, PairClass, PcieClass};

use super::{excerpt, malformed};
use crate::error::DiscoverError;

/// A NIC column of the table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NvsmiNic {
    /// The column heading (`NIC0`, or `mlx5_0` from older drivers).
    pub label: String,
    /// The RDMA device name: from the NIC legend, or the heading itself on old drivers.
    pub name: Option<String>,
}

/// A parsed `nvidia-smi topo -m` table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NvidiaSmiTopo {
    /// GPU labels in order (`GPU0`, `GPU1`, …; the index is nvidia-smi's = PCI bus order).
    pub gpus: Vec<String>,
    /// NIC columns in order.
    pub nics: Vec<NvsmiNic>,
    /// Row-major cells over GPUs then NICs, `(gpus + nics)²` of them.
    pub cells: Vec<PairClass>,
    /// Per GPU: `CPU Affinity` (`None` for `N/A` or a missing column).
    pub cpu_affinity: Vec<Option<CpuSet>>,
    /// Per GPU: `NUMA Affinity` (`None` for `N/A` or a missing column).
    pub numa_affinity: Vec<Option<u32>>,
    /// Per GPU: `GPU NUMA ID` (`None` for `N/A` or a missing column).
    pub gpu_numa_id: Vec<Option<u32>>,
    /// True when the legend used the old drivers' wording ("PCIe switches").
    pub old_legend: bool,
    /// 1-based line of the header row.
    pub header_line: usize,
    /// 1-based line of each device's row (GPUs then NICs).
    pub row_lines: Vec<usize>,
    /// Odd things that were worked around.
    pub warnings: Vec<String>,
}

impl NvidiaSmiTopo {
    /// Number of devices (GPUs plus NICs).
    pub fn len(&self) -> usize {
        self.gpus.len() + self.nics.len()
    }

    /// True when the table lists no device.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The label of device `i` (GPUs then NICs).
    pub fn label(&self, i: usize) -> &str {
        if i < self.gpus.len() {
            &self.gpus[i]
        } else {
            self.nics
                .get(i - self.gpus.len())
                .map_or("?", |n| n.label.as_str())
        }
    }

    /// The cell at (row, column) over GPUs then NICs.
    pub fn cell(&self, row: usize, col: usize) -> PairClass {
        self.cells[row * self.len() + col]
    }
}

/// The trailing per-GPU columns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Extra {
    CpuAffinity,
    NumaAffinity,
    GpuNumaId,
}

impl Extra {
    fn heading(self) -> &'static str {
        match self {
            Extra::CpuAffinity => "CPU Affinity",
            Extra::NumaAffinity => "NUMA Affinity",
            Extra::GpuNumaId => "GPU NUMA ID",
        }
    }
}

/// Parses `nvidia-smi topo -m` output. `path` is only used in error messages.
pub fn parse_nvidia_smi(text: &str, path: &Path) -> Result<NvidiaSmiTopo, DiscoverError> {
    let lines = super::paste::lines(text);
    let header_idx = lines
        .iter()
        .position(|l| is_header(l))
        .ok_or_else(|| {
            malformed(
                path,
                0,
                "no `nvidia-smi topo -m` header found: expected a line of column headings starting with GPU0",
            )
        })?;
    let header_line = header_idx + 1;
    let (labels, extras) = parse_header(&lines[header_idx], header_line, path)?;
    let gpu_count = labels.iter().take_while(|l| is_gpu_label(l)).count();
    let n = labels.len();

    let mut cells = vec![PairClass::Same; n * n];
    let mut row_lines = Vec::with_capacity(n);
    let mut cpu_affinity = Vec::with_capacity(gpu_count);
    let mut numa_affinity = Vec::with_capacity(gpu_count);
    let mut gpu_numa_id = Vec::with_capacity(gpu_count);
    let mut idx = header_idx + 1;
    for (r, label) in labels.iter().enumerate() {
        let line_no = idx + 1;
        let line = lines.get(idx).map(String::as_str).unwrap_or("");
        let tokens: Vec<&str> = line.split_whitespace().collect();
        if tokens.is_empty() || tokens[0].ends_with(':') {
            return Err(malformed(
                path,
                line_no,
                format!(
                    "the table ends after {r} of {n} rows; expected the row of {label} (a truncated paste?)"
                ),
            ));
        }
        if tokens[0] != label {
            return Err(malformed(
                path,
                line_no,
                format!(
                    "expected the row of {label}, found `{}`",
                    excerpt(tokens[0])
                ),
            ));
        }
        let fields = &tokens[1..];
        let is_gpu = r < gpu_count;
        let want_extra = if is_gpu { extras.len() } else { 0 };
        let ok_len =
            fields.len() == n + want_extra || (!is_gpu && fields.len() == n + extras.len());
        if !ok_len {
            let msg = if fields.len() < n {
                format!(
                    "row {label} has {} cells, header has {n} columns: the lines look wrapped (for example at 80 columns) or cut; paste the output unwrapped",
                    fields.len()
                )
            } else if is_gpu && fields.len() < n + want_extra {
                let missing: Vec<&str> = extras[fields.len() - n..]
                    .iter()
                    .map(|e| e.heading())
                    .collect();
                format!(
                    "row {label} has {n} cells but is missing {}",
                    missing.join(", ")
                )
            } else {
                format!(
                    "row {label} has {} fields, expected {n} cells{}",
                    fields.len(),
                    if want_extra > 0 {
                        format!(" and {want_extra} affinity columns")
                    } else {
                        String::new()
                    }
                )
            };
            return Err(malformed(path, line_no, msg));
        }
        for (c, text) in fields[..n].iter().enumerate() {
            let cell = parse_cell(text).ok_or_else(|| {
                malformed(
                    path,
                    line_no,
                    format!(
                        "cell `{}` in row {label}, column {}: expected X, NV#, XGMI, PIX, PXB, PHB, NODE or SYS",
                        excerpt(text),
                        labels[c]
                    ),
                )
            })?;
            if (c == r) != (cell == PairClass::Same) {
                return Err(malformed(
                    path,
                    line_no,
                    if c == r {
                        format!("row {label}: the diagonal cell is `{text}`, expected X")
                    } else {
                        format!(
                            "row {label}, column {}: X is only valid on the diagonal",
                            labels[c]
                        )
                    },
                ));
            }
            cells[r * n + c] = cell;
        }
        if is_gpu {
            let mut cpu = None;
            let mut numa = None;
            let mut gid = None;
            for (e, text) in extras.iter().zip(&fields[n..]) {
                let bad = |why: String| {
                    malformed(
                        path,
                        line_no,
                        format!("row {label}, {}: {why}", e.heading()),
                    )
                };
                match e {
                    Extra::CpuAffinity => {
                        cpu = if is_na(text) {
                            None
                        } else {
                            Some(text.parse::<CpuSet>().map_err(|err| bad(err.to_string()))?)
                        }
                    }
                    Extra::NumaAffinity => numa = parse_opt_u32(text).map_err(bad)?,
                    Extra::GpuNumaId => gid = parse_opt_u32(text).map_err(bad)?,
                }
            }
            cpu_affinity.push(cpu);
            numa_affinity.push(numa);
            gpu_numa_id.push(gid);
        }
        row_lines.push(line_no);
        idx += 1;
    }

    for r in 0..n {
        for c in r + 1..n {
            let (a, b) = (cells[r * n + c], cells[c * n + r]);
            if a != b {
                return Err(malformed(
                    path,
                    row_lines[r],
                    format!(
                        "{}/{} is {a} but {}/{} (line {}) is {b}; the matrix must be symmetric",
                        labels[r], labels[c], labels[c], labels[r], row_lines[c]
                    ),
                ));
            }
        }
    }

    let legend = parse_legends(&lines[idx..]);
    let mut warnings = Vec::new();
    let nics = labels[gpu_count..]
        .iter()
        .map(|l| {
            let name = if is_nic_index_label(l) {
                let found = legend.nic_names.get(l).cloned();
                if found.is_none() {
                    warnings.push(format!(
                        "{l} has no entry in the NIC Legend; its name is unknown"
                    ));
                }
                found
            } else {
                Some(l.clone())
            };
            NvsmiNic {
                label: l.clone(),
                name,
            }
        })
        .collect();
    for l in legend.nic_names.keys() {
        if !labels[gpu_count..].contains(l) {
            warnings.push(format!(
                "the NIC Legend names {l}, which is not a column of the table"
            ));
        }
    }
    Ok(NvidiaSmiTopo {
        gpus: labels[..gpu_count].to_vec(),
        nics,
        cells,
        cpu_affinity,
        numa_affinity,
        gpu_numa_id,
        old_legend: legend.old_wording,
        header_line,
        row_lines,
        warnings,
    })
}

/// The header: a line whose first heading is `GPU0` and whose second is not a cell
/// (`GPU0  X …` is the first row, not the header).
fn is_header(line: &str) -> bool {
    let mut t = line.split_whitespace();
    t.next() == Some("GPU0") && t.next().is_some_and(|s| s != "X")
}

fn is_gpu_label(s: &str) -> bool {
    s.strip_prefix("GPU")
        .is_some_and(|d| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit()))
}

fn is_nic_index_label(s: &str) -> bool {
    s.strip_prefix("NIC")
        .is_some_and(|d| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit()))
}

fn is_na(s: &str) -> bool {
    s.eq_ignore_ascii_case("N/A")
}

fn parse_opt_u32(s: &str) -> Result<Option<u32>, String> {
    if is_na(s) {
        return Ok(None);
    }
    s.parse::<u32>()
        .map(Some)
        .map_err(|_| format!("`{}` is not a NUMA node number or N/A", excerpt(s)))
}

/// A cell: the model's classes plus `SOC`, old drivers' name for the socket-crossing
/// class that later drivers call `SYS`.
fn parse_cell(s: &str) -> Option<PairClass> {
    if s.eq_ignore_ascii_case("SOC") {
        return Some(PairClass::Pcie(PcieClass::Sys));
    }
    s.parse().ok()
}

/// Splits the header into device labels and the trailing per-GPU columns.
fn parse_header(
    line: &str,
    line_no: usize,
    path: &Path,
) -> Result<(Vec<String>, Vec<Extra>), DiscoverError> {
    let tokens: Vec<&str> = line.split_whitespace().collect();
    let mut labels: Vec<String> = Vec::new();
    let mut extras = Vec::new();
    let mut i = 0;
    while i < tokens.len() {
        let rest = &tokens[i..];
        let (extra, width) = match rest {
            ["CPU", "Affinity", ..] => (Some(Extra::CpuAffinity), 2),
            ["NUMA", "Affinity", ..] => (Some(Extra::NumaAffinity), 2),
            ["GPU", "NUMA", "ID", ..] => (Some(Extra::GpuNumaId), 3),
            _ => (None, 1),
        };
        if let Some(e) = extra {
            if extras.contains(&e) {
                return Err(malformed(
                    path,
                    line_no,
                    format!("heading `{}` appears twice", e.heading()),
                ));
            }
            extras.push(e);
        } else {
            let t = tokens[i];
            if !extras.is_empty() {
                return Err(malformed(
                    path,
                    line_no,
                    format!(
                        "unexpected heading `{}` after the affinity columns",
                        excerpt(t)
                    ),
                ));
            }
            if is_gpu_label(t) {
                let expected = format!("GPU{}", labels.len());
                if t != expected {
                    return Err(malformed(
                        path,
                        line_no,
                        format!(
                            "heading `{t}` out of order: expected {expected} (GPU columns come first, in index order)"
                        ),
                    ));
                }
            }
            if labels.iter().any(|l| l == t) {
                return Err(malformed(
                    path,
                    line_no,
                    format!("heading `{}` appears twice", excerpt(t)),
                ));
            }
            labels.push(t.to_string());
        }
        i += width;
    }
    Ok((labels, extras))
}

/// What the sections after the table say.
#[derive(Debug, Default)]
struct Legends {
    nic_names: HashMap<String, String>,
    old_wording: bool,
}

fn parse_legends(lines: &[String]) -> Legends {
    let mut out = Legends::default();
    let mut in_nic_legend = false;
    for line in lines {
        let t = line.trim();
        if t.eq_ignore_ascii_case("NIC Legend:") {
            in_nic_legend = true;
            continue;
        }
        if t.eq_ignore_ascii_case("Legend:") {
            in_nic_legend = false;
            continue;
        }
        if in_nic_legend {
            if let Some((label, name)) = t.split_once(':') {
                let (label, name) = (label.trim(), name.trim());
                if is_nic_index_label(label)
                    && !name.is_empty()
                    && !name.contains(char::is_whitespace)
                {
                    out.nic_names.insert(label.to_string(), name.to_string());
                }
            }
        } else if t.contains('=') && t.contains("PCIe switch") {
            out.old_wording = true;
        }
    }
    out
}
