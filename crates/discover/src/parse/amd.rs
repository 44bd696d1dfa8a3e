//! `amd-smi topology` and `rocm-smi --showtopo` output, auto-detected.
//!
//! `amd-smi topology` prints tables headed `ACCESS TABLE:`, `WEIGHT TABLE:`,
//! `HOPS TABLE:`, `LINK TYPE TABLE:` (`SELF`, `XGMI`, `PCIE`) and `NUMA BW TABLE:`, each
//! a matrix whose rows and columns are GPU PCI addresses (`0000:0c:00.0`). It has no NUMA
//! column. `rocm-smi --showtopo` prints banner-headed sections (`=== Weight between two
//! GPUs ===`, `Hops …`, `Link Type …`, `Numa Nodes`) over `GPU0…` labels and ends with
//! `GPU[0] : (Topology) Numa Node: 0` lines. Unknown tables are skipped.
//!
//! The topology: one GPU per row (at its address when the tool prints one, else a
//! synthetic address, see [`super::synth`]), an xGMI [`GpuLink`] (count 1, with the
//! weight and hops) for every `XGMI` pair, and NUMA nodes from `rocm-smi`'s Numa Node
//! lines. Neither tool prints the PCI tree: each GPU is placed on its own synthetic host
//! bridge and root port (so PCIe-only pairs are `NODE` within a NUMA node and `SYS`
//! across). Without NUMA lines (amd-smi), GPUs joined by a `PCIE` link with at most 2 hops
//! (through one CPU) are put on one NUMA node, and distinct groups get synthetic ids.

use std::collections::BTreeMap;
use std::path::Path;

use topoalign_topology::pci::{class, vendor};
use topoalign_topology::{Bdf, CpuSet, FabricKind, Gpu, GpuLink, GpuVendor, PciKind};

use super::synth::{SynthTree, gpu_bdf};
use super::{excerpt, malformed, strip_ansi};
use crate::error::DiscoverError;
use crate::source::Discovery;

/// Which tool wrote the text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AmdFormat {
    /// `amd-smi topology`.
    AmdSmi,
    /// `rocm-smi --showtopo`.
    RocmSmi,
}

/// Tells the two formats apart; `None` when the text is neither.
pub fn detect(text: &str) -> Option<AmdFormat> {
    let mut rocm = false;
    for raw in text.lines() {
        let line = strip_ansi(raw);
        let t = line.trim();
        if amd_table_title(t).is_some() {
            return Some(AmdFormat::AmdSmi);
        }
        if t.contains("between two GPUs") || t.contains("(Topology) Numa") {
            rocm = true;
        }
    }
    rocm.then_some(AmdFormat::RocmSmi)
}

/// `WEIGHT TABLE:` → `WEIGHT`.
fn amd_table_title(t: &str) -> Option<&str> {
    let title = t.strip_suffix("TABLE:")?.trim();
    (!title.is_empty()
        && title
            .chars()
            .all(|c| c.is_ascii_uppercase() || c == ' ' || c == '-' || c == '_'))
    .then_some(title)
}

/// A `rocm-smi` banner (`==== Weight between two GPUs ====`) → its title.
fn rocm_banner(t: &str) -> Option<&str> {
    if !t.starts_with('=') {
        return None;
    }
    let title = t.trim_matches('=').trim();
    Some(title)
}

/// Which matrix a section holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Weight,
    Hops,
    LinkType,
    Other,
}

fn kind_of(title: &str) -> Kind {
    let t = title.to_ascii_uppercase();
    if t.starts_with("WEIGHT") {
        Kind::Weight
    } else if t.starts_with("HOPS") {
        Kind::Hops
    } else if t.starts_with("LINK TYPE") {
        Kind::LinkType
    } else {
        Kind::Other
    }
}

/// One matrix: its column labels and rows, with line numbers.
#[derive(Debug, Default)]
struct Matrix {
    title: String,
    title_line: usize,
    columns: Vec<String>,
    rows: Vec<(usize, String, Vec<String>)>,
}

/// Parses `amd-smi topology` or `rocm-smi --showtopo` output into a topology.
pub fn parse_amd_smi(text: &str, path: &Path, name: &str) -> Result<Discovery, DiscoverError> {
    let format = detect(text).ok_or_else(|| {
        malformed(
            path,
            0,
            "neither `amd-smi topology` (`WEIGHT TABLE:` …) nor `rocm-smi --showtopo` (`Weight between two GPUs` …) output",
        )
    })?;
    let lines: Vec<String> = text
        .split('\n')
        .map(|l| strip_ansi(l.trim_end_matches('\r')))
        .collect();
    let mut matrices: Vec<Matrix> = Vec::new();
    let mut numa_lines: Vec<(usize, usize, Option<u32>)> = Vec::new();
    let mut current: Option<Matrix> = None;
    for (i, raw) in lines.iter().enumerate() {
        let line_no = i + 1;
        let t = raw.trim();
        let title = match format {
            AmdFormat::AmdSmi => amd_table_title(t),
            AmdFormat::RocmSmi => rocm_banner(t),
        };
        if let Some(title) = title {
            if let Some(m) = current.take() {
                matrices.push(m);
            }
            let is_matrix = match format {
                AmdFormat::AmdSmi => true,
                AmdFormat::RocmSmi => title.contains("between two GPUs"),
            };
            if is_matrix {
                current = Some(Matrix {
                    title: title.to_string(),
                    title_line: line_no,
                    ..Matrix::default()
                });
            }
            continue;
        }
        if format == AmdFormat::RocmSmi && t.starts_with("GPU[") {
            if let Some(entry) = parse_numa_line(t, line_no, path)? {
                numa_lines.push(entry);
            }
            continue;
        }
        let Some(m) = current.as_mut() else { continue };
        let tokens: Vec<String> = t.split_whitespace().map(str::to_string).collect();
        if tokens.is_empty() {
            continue;
        }
        if m.columns.is_empty() {
            m.columns = tokens;
            continue;
        }
        let (label, cells) = (tokens[0].clone(), tokens[1..].to_vec());
        if cells.len() != m.columns.len() {
            return Err(malformed(
                path,
                line_no,
                format!(
                    "{} row {} has {} cells, the header has {} columns",
                    m.title,
                    excerpt(&label),
                    cells.len(),
                    m.columns.len()
                ),
            ));
        }
        m.rows.push((line_no, label, cells));
    }
    if let Some(m) = current.take() {
        matrices.push(m);
    }
    build(format, &matrices, &numa_lines, path, name)
}

/// `GPU[3]\t: (Topology) Numa Node: 1` → (line, GPU 3, Some(1)); other `GPU[..]` lines
/// (such as `Numa Affinity`) → None.
fn parse_numa_line(
    t: &str,
    line_no: usize,
    path: &Path,
) -> Result<Option<(usize, usize, Option<u32>)>, DiscoverError> {
    let Some((head, rest)) = t.split_once(':') else {
        return Ok(None);
    };
    let rest = rest.trim();
    let Some(value) = rest.strip_prefix("(Topology) Numa Node:") else {
        return Ok(None);
    };
    let gpu = head
        .trim()
        .strip_prefix("GPU[")
        .and_then(|s| s.strip_suffix(']'))
        .and_then(|s| s.parse::<usize>().ok())
        .ok_or_else(|| {
            malformed(
                path,
                line_no,
                format!("expected `GPU[N]`, found `{}`", excerpt(head)),
            )
        })?;
    let value = value.trim();
    let numa = match value.parse::<i64>() {
        Ok(v) if v < 0 => None,
        Ok(v) => Some(u32::try_from(v).map_err(|_| {
            malformed(
                path,
                line_no,
                format!("NUMA node `{value}` is out of range"),
            )
        })?),
        Err(_) => {
            return Err(malformed(
                path,
                line_no,
                format!("NUMA node `{}` is not a number", excerpt(value)),
            ));
        }
    };
    Ok(Some((line_no, gpu, numa)))
}

/// Per GPU pair: weight, hops, link type.
#[derive(Debug, Clone, Default)]
struct Pair {
    weight: Option<u32>,
    hops: Option<u32>,
    link: Option<String>,
}

fn build(
    format: AmdFormat,
    matrices: &[Matrix],
    numa_lines: &[(usize, usize, Option<u32>)],
    path: &Path,
    name: &str,
) -> Result<Discovery, DiscoverError> {
    let useful: Vec<&Matrix> = matrices
        .iter()
        .filter(|m| kind_of(&m.title) != Kind::Other)
        .collect();
    let reference = useful
        .first()
        .ok_or_else(|| malformed(path, 0, "no WEIGHT, HOPS or LINK TYPE table found"))?;
    let labels = reference.columns.clone();
    let n = labels.len();
    let mut warnings = Vec::new();
    let mut pairs = vec![Pair::default(); n * n];
    for m in matrices {
        let kind = kind_of(&m.title);
        if m.columns != labels {
            return Err(malformed(
                path,
                m.title_line,
                format!(
                    "{} has columns {} but {} has {}",
                    m.title,
                    m.columns.join(" "),
                    reference.title,
                    labels.join(" ")
                ),
            ));
        }
        if m.rows.len() != n {
            return Err(malformed(
                path,
                m.rows.last().map_or(m.title_line, |r| r.0),
                format!(
                    "{} has {} rows, expected {n} (one per GPU)",
                    m.title,
                    m.rows.len()
                ),
            ));
        }
        if kind == Kind::Other {
            continue;
        }
        for (r, (line_no, label, cells)) in m.rows.iter().enumerate() {
            if *label != labels[r] {
                return Err(malformed(
                    path,
                    *line_no,
                    format!(
                        "{}: expected the row of {}, found `{}`",
                        m.title,
                        labels[r],
                        excerpt(label)
                    ),
                ));
            }
            for (c, cell) in cells.iter().enumerate() {
                let p = &mut pairs[r * n + c];
                let num = |s: &str| -> Result<Option<u32>, DiscoverError> {
                    if s.eq_ignore_ascii_case("N/A") {
                        return Ok(None);
                    }
                    s.parse::<u32>().map(Some).map_err(|_| {
                        malformed(
                            path,
                            *line_no,
                            format!(
                                "{} row {label}, column {}: `{}` is not a number",
                                m.title,
                                labels[c],
                                excerpt(s)
                            ),
                        )
                    })
                };
                match kind {
                    Kind::Weight => p.weight = num(cell)?,
                    Kind::Hops => p.hops = num(cell)?,
                    Kind::LinkType => p.link = Some(cell.to_ascii_uppercase()),
                    Kind::Other => {}
                }
            }
        }
    }
    let has_link_table = matrices.iter().any(|m| kind_of(&m.title) == Kind::LinkType);
    if !has_link_table {
        warnings.push("no LINK TYPE table: xGMI links are unknown".to_string());
    }

    // NUMA per GPU.
    let mut numa: Vec<Option<u32>> = vec![None; n];
    match format {
        AmdFormat::RocmSmi => {
            for &(line_no, gpu, node) in numa_lines {
                if gpu >= n {
                    return Err(malformed(
                        path,
                        line_no,
                        format!("GPU[{gpu}] is not in the tables, which list {n} GPUs"),
                    ));
                }
                numa[gpu] = node;
            }
            if numa_lines.is_empty() {
                warnings.push("no `Numa Nodes` section: GPU NUMA nodes are unknown".to_string());
            }
        }
        AmdFormat::AmdSmi => {
            // Group by PCIe pairs through one CPU (hops <= 2).
            let mut group: Vec<usize> = (0..n).collect();
            for a in 0..n {
                for b in a + 1..n {
                    let p = &pairs[a * n + b];
                    if p.link.as_deref() == Some("PCIE") && p.hops.is_some_and(|h| h <= 2) {
                        let (ga, gb) = (group[a], group[b]);
                        for x in group.iter_mut() {
                            if *x == gb {
                                *x = ga;
                            }
                        }
                    }
                }
            }
            let mut ids: BTreeMap<usize, u32> = BTreeMap::new();
            for &grp in &group {
                let next = ids.len() as u32;
                ids.entry(grp).or_insert(next);
            }
            if ids.len() > 1 {
                for (i, grp) in group.iter().enumerate() {
                    numa[i] = ids.get(grp).copied();
                }
                warnings.push(
                    "amd-smi topology has no NUMA column: NUMA groups were inferred from PCIe hops and given synthetic ids"
                        .to_string(),
                );
            } else {
                warnings.push(
                    "amd-smi topology has no NUMA column: GPU NUMA nodes are unknown".to_string(),
                );
            }
        }
    }

    let mut tree = SynthTree::new(name);
    let too_big = |m: String| malformed(path, reference.title_line, m);
    let mut ids: Vec<u32> = numa.iter().flatten().copied().collect();
    ids.sort_unstable();
    ids.dedup();
    for id in ids {
        tree.builder
            .numa_node(id, CpuSet::new(), None, Vec::new(), None);
    }
    let mut seen = std::collections::HashSet::new();
    for (i, label) in labels.iter().enumerate() {
        let bdf = match label.parse::<Bdf>() {
            Ok(b) if label.contains(':') => b,
            _ => gpu_bdf(i).ok_or_else(|| too_big("more than 256 GPUs".to_string()))?,
        };
        if !seen.insert(bdf) {
            return Err(malformed(
                path,
                reference.title_line,
                format!("GPU {label} appears twice"),
            ));
        }
        let hb = tree.host_bridge().map_err(too_big)?;
        let rp = tree
            .bridge(hb, PciKind::RootPort, numa[i])
            .map_err(too_big)?;
        let p = tree
            .builder
            .endpoint(rp, bdf, vendor::AMD, 0, class::DISPLAY_3D, numa[i], None);
        tree.builder.gpu(Gpu::on(p, GpuVendor::Amd));
    }
    for a in 0..n {
        for b in a + 1..n {
            let p = &pairs[a * n + b];
            if p.link.as_deref() == Some("XGMI") {
                tree.builder.link_record(GpuLink {
                    a,
                    b,
                    kind: FabricKind::Xgmi,
                    count: 1,
                    weight: p.weight,
                    hops: p.hops,
                });
            }
        }
    }
    let topology = tree.builder.build()?;
    Ok(Discovery { topology, warnings })
}
