//! AMD topology output as users paste it: `amd-smi topology` (text, with or without the
//! `Legend:` block, and `--json` in both layouts) and `rocm-smi --showtopo`,
//! `--showtopoweight`, `--showtopohops`, `--showtopotype` and `--showtoponuma`, alone or
//! several in one file. See [`text`] and [`json`] for the layouts.
//!
//! What the topology holds, and only that:
//! - one GPU per GPU the output lists, at its PCI address when the tool prints one (amd-smi)
//!   and otherwise at a synthetic address ([`super::synth`]) in the tool's order;
//! - an xGMI [`GpuLink`] (count 1, with the weight and hops) for every pair the link-type
//!   table calls `XGMI`. Without a link-type table the fabric is
//!   [`topoalign_topology::FabricKnowledge::Unknown`], never "none";
//! - the NUMA node of a GPU only where the input states it (`rocm-smi`'s `(Topology) Numa
//!   Node` lines, which may follow amd-smi tables in the same file: GPU `N` is the `N`-th
//!   address, the order both tools use since amd-smi numbers GPUs by address). Otherwise
//!   the node is unknown, with a warning that says how to supply it. Nothing is inferred
//!   from hops or weights.
//!
//! Neither tool prints the PCI tree: each GPU sits on its own synthetic host bridge and
//! root port, so a PCIe-only pair is `NODE` on one NUMA node, `SYS` across nodes, and `SYS`
//! marked uncertain when a node is unknown (see `topoalign_topology::class`).

mod json;
mod text;

use std::collections::BTreeSet;
use std::path::Path;

use topoalign_topology::pci::{class, vendor};
use topoalign_topology::{Bdf, CpuSet, FabricKind, Gpu, GpuLink, GpuVendor, PciKind};

use super::paste;
use super::synth::{SynthTree, gpu_bdf};
use super::{excerpt, malformed};
use crate::discovery::Discovery;
use crate::error::DiscoverError;

/// Which tools wrote the text (a paste can hold both).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AmdFormat {
    /// `amd-smi topology` text.
    AmdSmi,
    /// `amd-smi topology --json`.
    AmdSmiJson,
    /// `rocm-smi --showtopo*`.
    RocmSmi,
}

/// One table: its title, header labels and rows `(line, label, cells)`.
#[derive(Debug, Clone, Default)]
pub(crate) struct Grid {
    title: String,
    title_line: usize,
    header_line: usize,
    labels: Vec<String>,
    rows: Vec<(usize, String, Vec<String>)>,
}

impl Grid {
    fn titled(title: &str, line: usize) -> Self {
        Grid {
            title: title.to_string(),
            title_line: line,
            ..Grid::default()
        }
    }

    fn kind(&self) -> Kind {
        let t = self.title.to_ascii_uppercase();
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

    /// True when the labels are addresses (amd-smi), false for `GPU#` (rocm-smi).
    fn addressed(&self) -> bool {
        self.labels.iter().all(|l| text::gpu_index(l).is_none())
    }
}

/// Which matrix a table holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Weight,
    Hops,
    LinkType,
    Other,
}

/// One `GPU[N] : (Topology) Numa Node: M` line.
#[derive(Debug, Clone, Copy)]
pub(crate) struct NumaLine {
    line: usize,
    gpu: usize,
    node: Option<u32>,
}

/// Per GPU pair: weight, hops, link type, and the line each came from.
#[derive(Debug, Clone, Default)]
struct Pair {
    weight: Option<(u32, usize)>,
    hops: Option<(u32, usize)>,
    link: Option<(String, usize)>,
}

/// Which formats a text holds; empty when none is recognised.
pub fn detect(text: &str) -> Vec<AmdFormat> {
    let lines = paste::lines(text);
    let mut out = Vec::new();
    let path = Path::new("");
    if let Ok(scan) = text::scan(&lines, path) {
        if scan.grids.iter().any(Grid::addressed) {
            out.push(AmdFormat::AmdSmi);
        }
        if scan.grids.iter().any(|g| !g.addressed()) || !scan.numa.is_empty() {
            out.push(AmdFormat::RocmSmi);
        }
    }
    if out.is_empty() && json::locate(&lines).is_some() {
        out.push(AmdFormat::AmdSmiJson);
    }
    out
}

/// Parses amd-smi / rocm-smi output (any mix of the layouts above) into a topology.
pub fn parse_amd_smi(text: &str, path: &Path, name: &str) -> Result<Discovery, DiscoverError> {
    let lines = paste::lines(text);
    let scan = text::scan(&lines, path)?;
    let mut warnings = scan.warnings;
    let mut grids = scan.grids;
    let mut bdf_hint: Vec<Option<String>> = Vec::new();
    let mut tool = "rocm-smi";
    if grids.is_empty() && scan.numa.is_empty() {
        match json::locate(&lines) {
            Some(start) => {
                let j = json::parse(&lines, start, path)?;
                grids = j.grids;
                bdf_hint = j.bdfs;
                tool = "amd-smi --json";
            }
            None => {
                return Err(malformed(
                    path,
                    0,
                    "no amd-smi or rocm-smi topology found: expected `amd-smi topology` tables (`WEIGHT TABLE:` …), `amd-smi topology --json`, `rocm-smi --showtopo` sections (`=== Weight between two GPUs ===` …) or `rocm-smi --showtoponuma` lines (`GPU[0] : (Topology) Numa Node: 0`)",
                ));
            }
        }
    } else if grids.iter().any(Grid::addressed) {
        tool = "amd-smi topology";
    }

    // The GPU list: addresses from amd-smi tables (or JSON), else GPU indices.
    let addressed: Option<&Grid> = grids.iter().find(|g| g.addressed());
    let n = match (grids.first(), scan.numa.iter().map(|l| l.gpu).max()) {
        (Some(g), _) => g.labels.len(),
        (None, Some(max)) => max + 1,
        (None, None) => 0,
    };
    let mut labels: Vec<String> = match addressed {
        Some(g) => g.labels.clone(),
        None => (0..n).map(|i| format!("GPU{i}")).collect(),
    };
    if labels.is_empty() {
        return Err(malformed(path, 0, "the tables list no GPU"));
    }
    if bdf_hint.iter().all(Option::is_some) && bdf_hint.len() == n && addressed.is_none() {
        labels = bdf_hint.iter().flatten().cloned().collect();
    }
    let index_of = |g: &Grid, label: &str| -> Option<usize> {
        if g.addressed() {
            labels.iter().position(|l| l == label)
        } else {
            text::gpu_index(label).filter(|&i| i < n)
        }
    };

    let mut pairs = vec![Pair::default(); n * n];
    let mut seen_kinds = BTreeSet::new();
    for g in &grids {
        let kind = g.kind();
        if kind == Kind::Other {
            continue;
        }
        if g.labels.len() != n {
            return Err(malformed(
                path,
                g.header_line,
                format!(
                    "`{}` lists {} GPUs but `{}` lists {n}: the pasted outputs come from different machines or one is cut",
                    g.title,
                    g.labels.len(),
                    grids.first().map_or("", |f| f.title.as_str())
                ),
            ));
        }
        let cols: Vec<usize> = g
            .labels
            .iter()
            .map(|l| {
                index_of(g, l).ok_or_else(|| {
                    malformed(
                        path,
                        g.header_line,
                        format!(
                            "`{}`: column `{}` is not one of the GPUs {}",
                            g.title,
                            excerpt(l),
                            labels.join(" ")
                        ),
                    )
                })
            })
            .collect::<Result<_, _>>()?;
        if cols.iter().collect::<BTreeSet<_>>().len() != n {
            return Err(malformed(
                path,
                g.header_line,
                format!("`{}` names a GPU twice in its header", g.title),
            ));
        }
        seen_kinds.insert(kind as u8);
        let mut rows_seen = BTreeSet::new();
        for (line_no, label, cells) in &g.rows {
            let r = index_of(g, label)
                .filter(|r| rows_seen.insert(*r))
                .ok_or_else(|| {
                    malformed(
                        path,
                        *line_no,
                        format!(
                            "`{}`: row `{}` is not a GPU of the header or appears twice",
                            g.title,
                            excerpt(label)
                        ),
                    )
                })?;
            for (k, raw) in cells.iter().enumerate() {
                let c = cols[k];
                if r == c {
                    continue;
                }
                let p = &mut pairs[r * n + c];
                let here = *line_no;
                let num = |s: &str| -> Result<Option<u32>, DiscoverError> {
                    if s.eq_ignore_ascii_case("N/A") {
                        return Ok(None);
                    }
                    s.parse::<u32>().map(Some).map_err(|_| {
                        malformed(
                            path,
                            here,
                            format!(
                                "`{}` row {label}, column {}: `{}` is not a number",
                                g.title,
                                g.labels[k],
                                excerpt(s)
                            ),
                        )
                    })
                };
                match kind {
                    Kind::Weight => set(&mut p.weight, num(raw)?, here, &g.title, path)?,
                    Kind::Hops => set(&mut p.hops, num(raw)?, here, &g.title, path)?,
                    Kind::LinkType => {
                        let v = raw.to_ascii_uppercase();
                        let v = (v != "N/A").then_some(v);
                        set(&mut p.link, v, here, &g.title, path)?
                    }
                    Kind::Other => {}
                }
            }
        }
    }

    // NUMA, only as stated.
    let mut numa: Vec<Option<u32>> = vec![None; n];
    let mut stated = vec![None::<usize>; n];
    for l in &scan.numa {
        if l.gpu >= n {
            return Err(malformed(
                path,
                l.line,
                format!(
                    "GPU[{}] has a NUMA line but the tables list {n} GPUs (GPU0-{})",
                    l.gpu,
                    n - 1
                ),
            ));
        }
        if let Some(prev) = stated[l.gpu]
            && numa[l.gpu] != l.node
        {
            return Err(malformed(
                path,
                l.line,
                format!(
                    "GPU[{}] NUMA node {:?} contradicts line {prev}",
                    l.gpu, l.node
                ),
            ));
        }
        stated[l.gpu] = Some(l.line);
        numa[l.gpu] = l.node;
    }
    let how = "append `rocm-smi --showtoponuma` output to this file, or discover on the host itself (`--sysfs-root /`)";
    if scan.numa.is_empty() {
        warnings.push(format!(
            "GPU NUMA nodes are unknown: {tool} output does not state them; {how}"
        ));
    } else {
        let missing: Vec<String> = (0..n)
            .filter(|&i| numa[i].is_none())
            .map(|i| format!("GPU{i}"))
            .collect();
        if !missing.is_empty() {
            warnings.push(format!(
                "NUMA node unknown for {} (not stated, or -1); {how}",
                missing.join(", ")
            ));
        }
    }
    let fabric_known = seen_kinds.contains(&(Kind::LinkType as u8));
    if !fabric_known {
        warnings.push(
            "xGMI links are unknown: the output has no link-type table (`LINK TYPE TABLE` / `Link Type between two GPUs`); add `rocm-smi --showtopotype` or `amd-smi topology` output"
                .to_string(),
        );
    }

    build(&labels, &pairs, &numa, fabric_known, path, name)
        .map(|topology| Discovery { topology, warnings })
}

/// Records a pair value, refusing a second table that says otherwise.
fn set<T: PartialEq + std::fmt::Debug>(
    slot: &mut Option<(T, usize)>,
    value: Option<T>,
    line: usize,
    title: &str,
    path: &Path,
) -> Result<(), DiscoverError> {
    let Some(v) = value else { return Ok(()) };
    match slot {
        Some((old, at)) if *old != v => Err(malformed(
            path,
            line,
            format!(
                "`{title}` says {v:?} where line {at} says {old:?}: the paste mixes two machines"
            ),
        )),
        Some(_) => Ok(()),
        None => {
            *slot = Some((v, line));
            Ok(())
        }
    }
}

fn build(
    labels: &[String],
    pairs: &[Pair],
    numa: &[Option<u32>],
    fabric_known: bool,
    path: &Path,
    name: &str,
) -> Result<topoalign_topology::Topology, DiscoverError> {
    let n = labels.len();
    let mut tree = SynthTree::new(name);
    let too_big = |m: String| malformed(path, 0, m);
    let too_large = |source| DiscoverError::TooLarge {
        path: path.to_path_buf(),
        line: 0,
        source,
    };
    let ids: BTreeSet<u32> = numa.iter().flatten().copied().collect();
    for id in ids {
        tree.builder
            .numa_node(id, CpuSet::new(), None, Vec::new(), None);
    }
    let mut seen = BTreeSet::new();
    for (i, label) in labels.iter().enumerate() {
        let bdf = match label.parse::<Bdf>() {
            Ok(b) if label.contains(':') => b,
            _ => gpu_bdf(i).ok_or_else(|| too_big("more than 256 GPUs".to_string()))?,
        };
        if !seen.insert(bdf) {
            return Err(malformed(path, 0, format!("GPU {label} appears twice")));
        }
        let hb = tree.host_bridge().map_err(too_large)?;
        let rp = tree
            .bridge(hb, PciKind::RootPort, numa[i])
            .map_err(too_large)?;
        let p = tree
            .builder
            .endpoint(rp, bdf, vendor::AMD, 0, class::DISPLAY_3D, numa[i], None);
        tree.builder.gpu(Gpu::on(p, GpuVendor::Amd));
    }
    for a in 0..n {
        for b in a + 1..n {
            let (ab, ba) = (&pairs[a * n + b], &pairs[b * n + a]);
            let xgmi = |p: &Pair| p.link.as_ref().is_some_and(|(l, _)| l == "XGMI");
            if xgmi(ab) || xgmi(ba) {
                let pick = |x: Option<(u32, usize)>, y: Option<(u32, usize)>| x.or(y).map(|v| v.0);
                tree.builder.link_record(GpuLink {
                    a,
                    b,
                    kind: FabricKind::Xgmi,
                    count: 1,
                    weight: pick(ab.weight, ba.weight),
                    hops: pick(ab.hops, ba.hops),
                });
            }
        }
    }
    if !fabric_known {
        tree.builder.fabric_unknown();
    }
    Ok(tree.builder.build()?)
}
