//! `nvidia-smi mig -lgipp`: the possible placements of each GPU-instance profile.
//!
//! ```text
//! GPU  0 Profile ID 19 Placements: {0,1,2,3,4,5,6}:1
//! GPU  0 Profile ID  5 Placement : {0}:4
//! ```
//!
//! `{starts}:size` in memory slices, every placement regardless of what is free (the
//! NVIDIA MIG user guide's `-lgipp` example). A profile with one placement is printed
//! as `Placement :`.

use serde::Serialize;

use crate::read_table::{Lines, ReadError, SavedOutput, is_empty_message, number};

/// One line of `nvidia-smi mig -lgipp`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LgippRow {
    /// 1-based line in the input.
    pub line: usize,
    /// GPU index.
    pub gpu: u32,
    /// The GPU-instance profile ID.
    pub profile_id: u32,
    /// The memory slices a placement may start at.
    pub starts: Vec<u8>,
    /// Memory slices each placement takes.
    pub size: u8,
}

/// The lines of saved `nvidia-smi mig -lgipp` output. `No MIG-enabled devices found.`
/// reads as no lines.
pub(crate) fn read_lgipp(out: SavedOutput<'_>) -> Result<Vec<LgippRow>, ReadError> {
    let mut lines = Lines::new(out);
    let mut rows = Vec::new();
    let shape = "`GPU <n> Profile ID <id> Placements: {<start>,…}:<size>`";
    while let Some((n, line)) = lines.next_line() {
        let t = line.trim();
        if is_empty_message(t) {
            continue;
        }
        let (head, placements) = t
            .split_once(':')
            .ok_or_else(|| lines.field(n, "line", shape, t))?;
        let ["GPU", gpu, "Profile", "ID", id, "Placements" | "Placement"] =
            head.split_whitespace().collect::<Vec<_>>()[..]
        else {
            return Err(lines.field(n, "line", shape, t));
        };
        let placements = placements.trim();
        let bad = || {
            lines.field(
                n,
                "Placements",
                "`{<start>,…}:<size>` such as `{0,4}:4`",
                placements,
            )
        };
        let (set, size) = placements
            .strip_prefix('{')
            .and_then(|p| p.split_once("}:"))
            .ok_or_else(bad)?;
        let starts = set
            .split(',')
            .map(|s| s.trim().parse::<u8>())
            .collect::<Result<Vec<_>, _>>()
            .map_err(|_| bad())?;
        rows.push(LgippRow {
            line: n,
            gpu: number(&lines, n, "GPU", gpu)?,
            profile_id: number(&lines, n, "Profile ID", id)?,
            starts,
            size: size.trim().parse().map_err(|_| bad())?,
        });
    }
    Ok(rows)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(text: &str) -> Result<Vec<LgippRow>, ReadError> {
        read_lgipp(SavedOutput::new("lgipp.txt", text))
    }

    #[test]
    fn reads_every_profile_of_every_gpu() {
        let rows = read(include_str!("../tests/data/h100-mixed/lgipp.txt")).unwrap();
        assert_eq!(rows.len(), 14);
        assert_eq!((rows[0].gpu, rows[0].profile_id, rows[0].size), (0, 19, 1));
        assert_eq!(rows[0].starts, [0, 1, 2, 3, 4, 5, 6]);
        assert_eq!(
            (rows[5].profile_id, &rows[5].starts[..], rows[5].size),
            (5, &[0u8][..], 4)
        );
        assert_eq!(rows[13].gpu, 1);
        assert_eq!(read("No MIG-enabled devices found.\n"), Ok(vec![]));
    }

    #[test]
    fn bad_lines_are_named() {
        let e = read("GPU  0 Profile ID  9 Placements: {0,4:4\n").unwrap_err();
        assert_eq!(
            e.to_string(),
            "lgipp.txt:1: Placements: expected `{<start>,…}:<size>` such as `{0,4}:4`, found `{0,4:4`"
        );
        let e = read("GPU  0 Profile ID  9 Placements: {0,x}:4\n").unwrap_err();
        assert!(
            matches!(
                &e,
                ReadError::Field {
                    field: "Placements",
                    ..
                }
            ),
            "{e}"
        );
        let e = read("GPU  0 Profile ID  x Placements: {0,4}:4\n").unwrap_err();
        assert!(
            matches!(
                &e,
                ReadError::Field {
                    field: "Profile ID",
                    ..
                }
            ),
            "{e}"
        );
        let e =
            read("GPU  0 Profile ID 19 Placements: {0,1,2,3,4,5,6}:1\nGPU  0 Profile").unwrap_err();
        assert!(
            matches!(
                &e,
                ReadError::Field {
                    field: "line",
                    line: 2,
                    ..
                }
            ),
            "{e}"
        );
    }
}
