//! The pair matrix in the layout of `nvidia-smi topo -m`.
//!
//! The tool writes tab-separated text: a header row that starts with an empty field,
//! then `GPU0…`, `NIC0…`, `CPU Affinity`, `NUMA Affinity`, `GPU NUMA ID`; the self cell is
//! ` X ` (padded with spaces); a GPU row ends with its CPU affinity, NUMA affinity, an
//! empty field (the tool pads the wide `NUMA Affinity` heading with a second tab) and its
//! GPU NUMA ID (`N/A` when unknown); a NIC row carries only cells followed by the empty
//! affinity fields. After a blank line come `Legend:` and, when NICs are listed,
//! `NIC Legend:` with `  NIC0: mlx5_0` lines. [`MatrixStyle::Aligned`] prints the same
//! table with space-padded columns for reading in a terminal.

use topoalign_topology::MatrixDeviceKind;
use topoalign_topology::{PairClass, PairMatrix};

use crate::mig::MigRow;

/// How columns are separated.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum MatrixStyle {
    /// Tab-separated, byte for byte the way `nvidia-smi topo -m` writes it.
    #[default]
    Tabs,
    /// Columns padded with spaces so that they line up whatever the cell widths.
    Aligned,
}

/// The legend lines of current NVIDIA drivers, in the tool's order (the key padded to
/// four characters).
const LEGEND: [(&str, &str); 7] = [
    ("X", "Self"),
    (
        "SYS",
        "Connection traversing PCIe as well as the SMP interconnect between NUMA nodes (e.g., QPI/UPI)",
    ),
    (
        "NODE",
        "Connection traversing PCIe as well as the interconnect between PCIe Host Bridges within a NUMA node",
    ),
    (
        "PHB",
        "Connection traversing PCIe as well as a PCIe Host Bridge (typically the CPU)",
    ),
    (
        "PXB",
        "Connection traversing multiple PCIe bridges (without traversing the PCIe Host Bridge)",
    ),
    ("PIX", "Connection traversing at most a single PCIe bridge"),
    ("NV#", "Connection traversing a bonded set of # NVLinks"),
];

/// The extra legend line printed when the matrix has AMD Infinity Fabric cells, which
/// nvidia-smi never shows (topoalign prints the matrix for any vendor).
const XGMI_LEGEND: (&str, &str) = (
    "XGMI",
    "Connection traversing AMD Infinity Fabric (xGMI) links between GPUs",
);

/// Appended to a cell that is `SYS` only because a NUMA node is unknown (the pair runs
/// between host bridges; with the nodes unknown it may be `NODE`). nvidia-smi never prints
/// it: the tool always knows the nodes.
pub(crate) const UNKNOWN_NUMA_MARK: char = '*';

/// The legend line explaining [`UNKNOWN_NUMA_MARK`].
const UNKNOWN_NUMA_LEGEND: (&str, &str) = (
    "SYS*",
    "Connection between PCIe Host Bridges whose NUMA nodes are unknown: NODE or SYS, counted as SYS",
);

/// The logical table: header then one row per device, with the self cell as `X`.
struct Grid {
    header: Vec<String>,
    rows: Vec<Row>,
}

/// One device row: its label, its cells, and the three trailing affinity fields (empty
/// strings for NICs).
#[derive(Clone)]
struct Row {
    label: String,
    cells: Vec<String>,
    cpu_affinity: String,
    numa_affinity: String,
    gpu_numa_id: String,
}

fn grid(m: &PairMatrix) -> Grid {
    let n = m.devices.len();
    let mut header = vec![String::new()];
    header.extend(m.devices.iter().map(|d| d.label.clone()));
    header.extend(
        ["CPU Affinity", "NUMA Affinity", "GPU NUMA ID"]
            .iter()
            .map(|s| s.to_string()),
    );
    let rows = m
        .devices
        .iter()
        .enumerate()
        .map(|(r, d)| {
            let cells = (0..n)
                .map(|c| {
                    let text = m
                        .cells
                        .get(r * n + c)
                        .map_or_else(|| "?".to_string(), cell_text);
                    if m.cell_numa_unknown(r, c) {
                        format!("{text}{UNKNOWN_NUMA_MARK}")
                    } else {
                        text
                    }
                })
                .collect();
            let is_gpu = matches!(d.device, MatrixDeviceKind::Gpu(_));
            let na = || "N/A".to_string();
            let (cpu_affinity, numa_affinity, gpu_numa_id) = if is_gpu {
                (
                    d.cpu_affinity
                        .as_ref()
                        .filter(|c| !c.is_empty())
                        .map_or_else(na, |c| c.to_string()),
                    d.numa_affinity.map_or_else(na, |v| v.to_string()),
                    d.gpu_numa_id.map_or_else(na, |v| v.to_string()),
                )
            } else {
                (String::new(), String::new(), String::new())
            };
            Row {
                label: d.label.clone(),
                cells,
                cpu_affinity,
                numa_affinity,
                gpu_numa_id,
            }
        })
        .collect();
    Grid { header, rows }
}

fn cell_text(c: &PairClass) -> String {
    c.to_string()
}

/// Renders the matrix, its legend and its NIC legend.
pub fn render(m: &PairMatrix, style: MatrixStyle) -> String {
    render_with_mig(m, style, &[])
}

/// Renders the matrix with one row per MIG instance after the device rows (`MIG0`, …:
/// its parent's cells and affinities, the parent's own column `X`, since an instance has
/// its parent's PCIe path) and a `MIG Legend:` naming each instance. With no rows the
/// text is [`render`]'s.
pub fn render_with_mig(m: &PairMatrix, style: MatrixStyle, mig: &[MigRow]) -> String {
    let mut g = grid(m);
    for r in mig {
        let Some(parent) = g.rows.get(r.parent) else {
            continue;
        };
        let row = Row {
            label: r.label.clone(),
            ..parent.clone()
        };
        g.rows.push(row);
    }
    let mut out = match style {
        MatrixStyle::Tabs => tabs(&g),
        MatrixStyle::Aligned => aligned(&g),
    };
    out.push_str(&legend(m));
    if !mig.is_empty() {
        out.push_str("\nMIG Legend:\n\n");
        for r in mig {
            let mut ids = Vec::new();
            if let Some(gi) = r.gi {
                ids.push(format!("GI {gi}"));
            }
            if let Some(ci) = r.ci {
                ids.push(format!("CI {ci}"));
            }
            if let Some(u) = &r.uuid {
                ids.push(u.clone());
            }
            let ids = match ids.is_empty() {
                true => String::new(),
                false => format!(" ({})", ids.join(", ")),
            };
            out.push_str(&format!(
                "  {}: GPU{} {} @{}{ids}\n",
                r.label, r.parent, r.profile, r.start
            ));
        }
    }
    out
}

fn tabs(g: &Grid) -> String {
    let mut out = g.header.join("\t");
    out.push('\n');
    for r in &g.rows {
        let mut fields = vec![r.label.clone()];
        fields.extend(r.cells.iter().map(|c| {
            if c == "X" {
                " X ".to_string()
            } else {
                c.clone()
            }
        }));
        fields.push(r.cpu_affinity.clone());
        fields.push(r.numa_affinity.clone());
        fields.push(String::new());
        fields.push(r.gpu_numa_id.clone());
        out.push_str(&fields.join("\t"));
        out.push('\n');
    }
    out
}

fn aligned(g: &Grid) -> String {
    let lines: Vec<Vec<String>> = std::iter::once(g.header.clone())
        .chain(g.rows.iter().map(|r| {
            let mut f = vec![r.label.clone()];
            f.extend(r.cells.iter().cloned());
            f.push(r.cpu_affinity.clone());
            f.push(r.numa_affinity.clone());
            f.push(r.gpu_numa_id.clone());
            f
        }))
        .collect();
    let cols = g.header.len();
    let widths: Vec<usize> = (0..cols)
        .map(|c| {
            lines
                .iter()
                .filter_map(|l| l.get(c))
                .map(|s| s.chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut out = String::new();
    for l in &lines {
        let mut line = String::new();
        for (c, field) in l.iter().enumerate() {
            let w = widths.get(c).copied().unwrap_or(0);
            line.push_str(field);
            let pad = w.saturating_sub(field.chars().count()) + 2;
            line.extend(std::iter::repeat_n(' ', pad));
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

fn legend(m: &PairMatrix) -> String {
    let mut out = String::from("\nLegend:\n\n");
    let mut entries: Vec<(&str, &str)> = LEGEND.to_vec();
    if m.cells.iter().any(|c| matches!(c, PairClass::Xgmi(_))) {
        entries.push(XGMI_LEGEND);
    }
    if m.numa_unknown.contains(&true) {
        entries.push(UNKNOWN_NUMA_LEGEND);
    }
    for (key, text) in entries {
        out.push_str(&format!("  {key:<4} = {text}\n"));
    }
    let nics: Vec<_> = m
        .devices
        .iter()
        .filter(|d| matches!(d.device, MatrixDeviceKind::Nic(_)))
        .collect();
    if !nics.is_empty() {
        out.push_str("\nNIC Legend:\n\n");
        for d in nics {
            let name = d.name.as_deref().unwrap_or(&d.bdf);
            out.push_str(&format!("  {}: {name}\n", d.label));
        }
    }
    out
}

/// One row of a matrix read back from text: its label and its cells, in column order.
/// Used by tests.
#[cfg(test)]
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ParsedRow {
    /// `GPU0`, `NIC1`, ...
    pub label: String,
    /// The cells (`X`, `NV18`, `SYS`, ...) under the device columns, trimmed.
    pub cells: Vec<String>,
}

/// Reads the device rows back out of [`MatrixStyle::Tabs`] text: the header names the
/// device columns; each row up to the blank line before `Legend:` yields its cells.
/// Returns the column labels and the rows.
#[cfg(test)]
pub(crate) fn parse_tabs(text: &str) -> (Vec<String>, Vec<ParsedRow>) {
    let mut lines = text.lines();
    let columns: Vec<String> = lines
        .next()
        .unwrap_or("")
        .split('\t')
        .skip(1)
        .map(|s| s.trim().to_string())
        .take_while(|s| s.starts_with("GPU") || s.starts_with("NIC"))
        .collect();
    let rows = lines
        .take_while(|l| !l.trim().is_empty())
        .map(|l| {
            let mut f = l.split('\t');
            let label = f.next().unwrap_or("").trim().to_string();
            let cells = f
                .take(columns.len())
                .map(|s| s.trim().to_string())
                .collect();
            ParsedRow { label, cells }
        })
        .collect();
    (columns, rows)
}

#[cfg(test)]
mod tests {
    use super::*;
    use topoalign_topology::MatrixOptions;

    fn gb300() -> PairMatrix {
        let t = topoalign_profiles::get("gb300-4").unwrap();
        PairMatrix::build(&t, MatrixOptions::default())
    }

    #[test]
    fn tab_layout_matches_nvidia_smi_byte_for_byte() {
        let text = render(&gb300(), MatrixStyle::Tabs);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(
            lines[0],
            "\tGPU0\tGPU1\tGPU2\tGPU3\tNIC0\tNIC1\tNIC2\tNIC3\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID"
        );
        assert_eq!(
            lines[1],
            "GPU0\t X \tNV18\tNV18\tNV18\tNODE\tNODE\tSYS\tSYS\t0-63\t0\t\tN/A"
        );
        assert_eq!(
            lines[8],
            "NIC3\tSYS\tSYS\tNODE\tNODE\tSYS\tSYS\tNODE\t X \t\t\t\t"
        );
        assert_eq!(lines[9], "");
        assert_eq!(lines[10], "Legend:");
        assert!(text.contains("  NV#  = Connection traversing a bonded set of # NVLinks\n"));
        assert!(text.contains("  SYS  = Connection traversing PCIe as well as the SMP"));
        assert!(text.ends_with(
            "\nNIC Legend:\n\n  NIC0: mlx5_0\n  NIC1: mlx5_1\n  NIC2: mlx5_2\n  NIC3: mlx5_3\n"
        ));
        assert!(!text.contains("XGMI"), "no xGMI line on an NVIDIA machine");
    }

    #[test]
    fn parse_tabs_reads_back_what_render_wrote() {
        let m = gb300();
        let (cols, rows) = parse_tabs(&render(&m, MatrixStyle::Tabs));
        assert_eq!(cols.len(), m.devices.len());
        for (r, row) in rows.iter().enumerate() {
            assert_eq!(row.label, m.devices[r].label);
            for (c, cell) in row.cells.iter().enumerate() {
                assert_eq!(cell, &m.cell(r, c).to_string());
            }
        }
    }

    #[test]
    fn aligned_columns_line_up() {
        let text = render(&gb300(), MatrixStyle::Aligned);
        let lines: Vec<&str> = text.lines().take(9).collect();
        assert!(!text.lines().take(9).any(|l| l.contains('\t')));
        let col = lines[0].find("NIC0").unwrap();
        for l in &lines[1..] {
            let cell = &l[col..col + 4];
            assert!(
                ["NODE", "SYS ", "X   "].contains(&cell),
                "misaligned cell {cell:?} in {l:?}"
            );
        }
        let cpu = lines[0].find("CPU Affinity").unwrap();
        assert_eq!(&lines[1][cpu..cpu + 4], "0-63");
    }

    #[test]
    fn amd_matrix_gets_an_xgmi_legend_line() {
        let t = topoalign_profiles::get("mi300x-8").unwrap();
        let m = PairMatrix::build(&t, MatrixOptions::default());
        let text = render(&m, MatrixStyle::Tabs);
        assert!(
            text.lines()
                .nth(1)
                .unwrap()
                .starts_with("GPU0\t X \tXGMI\t")
        );
        assert!(text.contains("\n  XGMI = Connection traversing AMD Infinity Fabric"));
        // VFs are opt-in: only the 8 PFs are listed by default.
        assert!(text.contains("  NIC7: ") && !text.contains("  NIC8: "));
        let with_vfs = PairMatrix::build(
            &t,
            MatrixOptions {
                include_vfs: true,
                include_non_rdma: false,
            },
        );
        assert!(render(&with_vfs, MatrixStyle::Tabs).contains("  NIC8: "));
    }

    #[test]
    fn unknown_numa_cells_are_marked_and_explained() {
        let mut t = topoalign_profiles::get("pcie-2socket").unwrap();
        // Forget every NUMA fact: the host-bridge pairs can no longer be told apart.
        t.numa.clear();
        for d in &mut t.pci {
            d.numa_node = None;
        }
        let m = PairMatrix::build(&t, MatrixOptions::default());
        let text = render(&m, MatrixStyle::Tabs);
        assert!(text.contains("SYS*"), "{text}");
        assert!(
            text.contains("  SYS* = Connection between PCIe Host Bridges"),
            "{text}"
        );
        let gpu0: Vec<&str> = text.lines().nth(1).unwrap().split('\t').collect();
        assert!(
            !gpu0.contains(&"NODE"),
            "no NODE without known nodes: {text}"
        );
        let n = m.devices.len();
        assert_eq!(gpu0[n + 2], "N/A", "NUMA Affinity is N/A, not 0: {text}");
        // With the nodes known nothing is marked.
        let known = topoalign_profiles::get("pcie-2socket").unwrap();
        let text = render(
            &PairMatrix::build(&known, MatrixOptions::default()),
            MatrixStyle::Tabs,
        );
        assert!(!text.contains('*'), "{text}");
    }

    #[test]
    fn mig_rows_repeat_their_parents_row_and_get_a_legend() {
        let t = topoalign_profiles::get("dgx-a100-mig").unwrap();
        let m = PairMatrix::build(&t, topoalign_topology::MatrixOptions::default());
        let rows = crate::mig::tests::a100_overlay().matrix_rows(&t, &m);
        let text = render_with_mig(&m, MatrixStyle::Tabs, &rows);
        let lines: Vec<&str> = text.lines().collect();
        let gpu1 = lines.iter().find(|l| l.starts_with("GPU1\t")).unwrap();
        let mig3 = lines.iter().find(|l| l.starts_with("MIG3\t")).unwrap();
        assert_eq!(gpu1["GPU1".len()..], mig3["MIG3".len()..]);
        assert!(
            text.contains("\nMIG Legend:\n\n  MIG0: GPU0 1g.5gb @0 (GI 1, CI 0)\n"),
            "{text}"
        );
        assert_eq!(
            render_with_mig(&m, MatrixStyle::Aligned, &[]),
            render(&m, MatrixStyle::Aligned)
        );
    }
}
