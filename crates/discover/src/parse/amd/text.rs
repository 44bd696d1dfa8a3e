//! The text layouts: `amd-smi topology` tables and `rocm-smi` sections, read in one pass
//! so that a paste mixing them (`amd-smi topology` followed by `rocm-smi --showtoponuma`,
//! or several `rocm-smi` commands) is read whole.
//!
//! The rules, by format:
//! - `amd-smi topology`: a title line `WEIGHT TABLE:` (capitals, ending in `TABLE:`), a
//!   header of GPU addresses, then one row per GPU starting with its address.
//! - `rocm-smi --showtopo` / `--showtopoweight` / `--showtopohops` / `--showtopotype`: a
//!   banner `==== Weight between two GPUs ====`, a header `GPU0 GPU1 …`, one row per GPU.
//! - `rocm-smi --showtoponuma` (and the end of `--showtopo`): `GPU[0] : (Topology) Numa
//!   Node: 0` lines (older releases write `GPU 0 : …`).
//!
//! A table ends at the first line that is not one of its rows: a blank line, the next
//! title or banner, or anything else (the `Legend:` block of newer amd-smi, a WARNING
//! line, a Markdown fence, a shell prompt). Text outside tables is ignored. A title not
//! followed by a header, a row with the wrong number of cells, or a table with fewer rows
//! than columns is an error naming the line: those are truncated or wrapped pastes.

use std::path::Path;

use super::{Grid, Kind, NumaLine};
use crate::error::DiscoverError;
use crate::parse::paste::is_fence;
use crate::parse::{excerpt, malformed};

/// What the text holds.
#[derive(Debug, Default)]
pub(super) struct TextScan {
    /// Every table found, useful or not.
    pub grids: Vec<Grid>,
    /// Every `Numa Node` line.
    pub numa: Vec<NumaLine>,
    /// Shape problems in tables topoalign does not use (reported, not fatal).
    pub warnings: Vec<String>,
}

/// Scans the lines (already normalised by [`crate::parse::paste::lines`]).
pub(super) fn scan(lines: &[String], path: &Path) -> Result<TextScan, DiscoverError> {
    let mut out = TextScan::default();
    let mut open: Option<Grid> = None;
    for (i, raw) in lines.iter().enumerate() {
        let line_no = i + 1;
        let t = raw.trim();
        if let Some(title) = amd_table_title(t) {
            close(&mut open, &mut out, path)?;
            open = Some(Grid::titled(title, line_no));
            continue;
        }
        if let Some(title) = rocm_banner(t) {
            close(&mut open, &mut out, path)?;
            if title.to_ascii_lowercase().contains("between two gpus") {
                open = Some(Grid::titled(title, line_no));
            }
            continue;
        }
        if let Some(entry) = numa_line(t, line_no, path)? {
            close(&mut open, &mut out, path)?;
            out.numa.push(entry);
            continue;
        }
        let Some(g) = open.as_mut() else { continue };
        let tokens: Vec<&str> = t.split_whitespace().collect();
        if g.labels.is_empty() {
            // Waiting for the header: skip blank lines and decoration (a WARNING line
            // printed between the banner and the table), stop at a header.
            if !tokens.is_empty() && tokens.iter().all(|s| is_label(s)) {
                g.labels = tokens.iter().map(|s| s.to_string()).collect();
                g.header_line = line_no;
            }
            continue;
        }
        let is_row = tokens
            .first()
            .is_some_and(|first| g.labels.iter().any(|l| l == first));
        if !is_row || is_fence(t) {
            close(&mut open, &mut out, path)?;
            continue;
        }
        let cells: Vec<String> = tokens[1..].iter().map(|s| s.to_string()).collect();
        if cells.len() != g.labels.len() {
            let msg = format!(
                "{} row {} has {} cells but the header (line {}) has {} columns: the lines look wrapped (for example at 80 columns) or cut; paste the tool's output unwrapped",
                g.title,
                excerpt(tokens[0]),
                cells.len(),
                g.header_line,
                g.labels.len()
            );
            if g.kind() == Kind::Other {
                out.warnings.push(format!(
                    "{}:{line_no}: {msg}; table ignored",
                    path.display()
                ));
                open = None;
                continue;
            }
            return Err(malformed(path, line_no, msg));
        }
        g.rows.push((line_no, tokens[0].to_string(), cells));
    }
    close(&mut open, &mut out, path)?;
    Ok(out)
}

/// Ends the open table: checks that it has a header and one row per column.
fn close(open: &mut Option<Grid>, out: &mut TextScan, path: &Path) -> Result<(), DiscoverError> {
    let Some(g) = open.take() else {
        return Ok(());
    };
    let problem = if g.labels.is_empty() {
        Some((
            g.title_line,
            format!(
                "`{}` is not followed by a table (expected a header row of GPU labels such as `GPU0 GPU1` or `0000:0c:00.0 …`): the paste looks truncated, or its lines were wrapped",
                g.title
            ),
        ))
    } else if g.rows.len() != g.labels.len() {
        Some((
            g.rows.last().map_or(g.header_line, |r| r.0),
            format!(
                "`{}` (line {}) has {} row(s) for {} columns: the paste looks truncated, or its lines were wrapped (for example at 80 columns)",
                g.title,
                g.title_line,
                g.rows.len(),
                g.labels.len()
            ),
        ))
    } else {
        None
    };
    match problem {
        Some((line, msg)) if g.kind() == Kind::Other => {
            out.warnings
                .push(format!("{}:{line}: {msg}; table ignored", path.display()));
            Ok(())
        }
        Some((line, msg)) => Err(malformed(path, line, msg)),
        None => {
            out.grids.push(g);
            Ok(())
        }
    }
}

/// `WEIGHT TABLE:` → `WEIGHT TABLE`.
fn amd_table_title(t: &str) -> Option<&str> {
    let head = t.strip_suffix(':')?;
    let title = head.strip_suffix("TABLE")?.trim();
    (!title.is_empty()
        && title
            .chars()
            .all(|c| c.is_ascii_uppercase() || c == ' ' || c == '-' || c == '_'))
    .then_some(head)
}

/// A `rocm-smi` banner (`==== Weight between two GPUs ====`) → its title (possibly empty
/// for a rule of `=` alone).
fn rocm_banner(t: &str) -> Option<&str> {
    t.starts_with("==").then(|| t.trim_matches('=').trim())
}

/// A GPU label: `GPU3` (rocm-smi) or a PCI address `0000:0c:00.0` (amd-smi).
pub(super) fn is_label(s: &str) -> bool {
    gpu_index(s).is_some() || is_bdf_like(s)
}

/// `GPU3` → 3.
pub(super) fn gpu_index(s: &str) -> Option<usize> {
    let n = s.strip_prefix("GPU")?;
    (!n.is_empty() && n.len() <= 4 && n.bytes().all(|b| b.is_ascii_digit()))
        .then(|| n.parse().ok())
        .flatten()
}

/// `0000:0c:00.0` or `0c:00.0`.
fn is_bdf_like(s: &str) -> bool {
    let Some((head, func)) = s.rsplit_once('.') else {
        return false;
    };
    let parts: Vec<&str> = head.split(':').collect();
    (2..=3).contains(&parts.len())
        && parts
            .iter()
            .all(|p| !p.is_empty() && p.len() <= 4 && p.bytes().all(|b| b.is_ascii_hexdigit()))
        && func.len() == 1
        && func.bytes().all(|b| b.is_ascii_digit())
}

/// `GPU[3] : (Topology) Numa Node: 1` or `GPU 3 : (Topology) Numa Node: 1` → the entry;
/// other lines (`Numa Affinity`, anything else) → `None`.
fn numa_line(t: &str, line_no: usize, path: &Path) -> Result<Option<NumaLine>, DiscoverError> {
    let Some((head, rest)) = t.split_once(':') else {
        return Ok(None);
    };
    let Some(value) = rest.trim().strip_prefix("(Topology) Numa Node:") else {
        return Ok(None);
    };
    let head = head.trim();
    let index = head
        .strip_prefix("GPU[")
        .and_then(|s| s.strip_suffix(']'))
        .or_else(|| head.strip_prefix("GPU "))
        .and_then(|s| s.trim().parse::<usize>().ok())
        .filter(|&g| g < 4096)
        .ok_or_else(|| {
            malformed(
                path,
                line_no,
                format!(
                    "expected `GPU[N]` before `(Topology) Numa Node`, found `{}`",
                    excerpt(head)
                ),
            )
        })?;
    let value = value.trim();
    let node = match value.parse::<i64>() {
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
    Ok(Some(NumaLine {
        line: line_no,
        gpu: index,
        node,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_and_titles() {
        assert_eq!(amd_table_title("LINK TYPE TABLE:"), Some("LINK TYPE TABLE"));
        assert_eq!(
            amd_table_title("BI-DIRECTIONAL TABLE:"),
            Some("BI-DIRECTIONAL TABLE")
        );
        assert_eq!(amd_table_title("Legend:"), None);
        assert_eq!(amd_table_title("TABLE:"), None);
        assert_eq!(rocm_banner("=== Numa Nodes ==="), Some("Numa Nodes"));
        assert!(is_label("GPU12") && is_label("0000:0c:00.0") && is_label("0c:00.0"));
        assert!(!is_label("GPU") && !is_label("SELF") && !is_label("0-0"));
    }

    #[test]
    fn numa_lines_in_both_spellings() {
        let p = Path::new("x");
        let a = numa_line("GPU[3]\t\t: (Topology) Numa Node: 1", 4, p)
            .unwrap()
            .unwrap();
        assert_eq!((a.gpu, a.node), (3, Some(1)));
        let b = numa_line("GPU 2          : (Topology) Numa Node: -1", 5, p)
            .unwrap()
            .unwrap();
        assert_eq!((b.gpu, b.node), (2, None));
        assert!(
            numa_line("GPU[0] : (Topology) Numa Affinity: 0", 1, p)
                .unwrap()
                .is_none()
        );
        assert!(numa_line("GPU[x] : (Topology) Numa Node: 0", 1, p).is_err());
    }
}
