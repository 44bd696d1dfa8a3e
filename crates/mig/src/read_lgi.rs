//! `nvidia-smi mig -lgi`: the GPU instances of every MIG-enabled GPU.
//!
//! ```text
//! +-------------------------------------------------------+
//! | GPU instances:                                        |
//! | GPU   Name             Profile  Instance   Placement  |
//! |                          ID       ID       Start:Size |
//! |=======================================================|
//! |   0  MIG 2g.20gb         14        3          0:2     |
//! +-------------------------------------------------------+
//! ```
//!
//! The format as the NVIDIA MIG user guide and real outputs show it (NVIDIA/DCGM#138 for
//! a multi-GPU listing). `Placement` is `Start:Size` in memory slices.

use serde::Serialize;

use crate::read_table::{
    Lines, ReadError, SavedOutput, number, profile_name, start_size, table_rows,
};

/// One row of `nvidia-smi mig -lgi`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct LgiRow {
    /// 1-based line in the input.
    pub line: usize,
    /// GPU index.
    pub gpu: u32,
    /// The GPU-instance profile name without `MIG ` (`3g.40gb`).
    pub profile: String,
    /// The GPU-instance profile ID (`9`).
    pub profile_id: u32,
    /// The GPU-instance ID.
    pub instance: u32,
    /// First memory slice.
    pub start: u8,
    /// Memory slices taken.
    pub size: u8,
}

/// The rows of saved `nvidia-smi mig -lgi` output. `No MIG-enabled devices found.` and
/// `No GPU instances found` read as no rows.
pub(crate) fn read_lgi(out: SavedOutput<'_>) -> Result<Vec<LgiRow>, ReadError> {
    let mut lines = Lines::new(out);
    let rows = table_rows(&mut lines, "GPU instances:", "GPU instances table")?;
    rows.into_iter()
        .map(|(n, cells)| {
            let found = cells.join(" ");
            let columns = || {
                let expected = "5 columns: GPU, Name, Profile ID, Instance ID, Placement";
                lines.field(n, "row", expected, &found)
            };
            let gpu_cell = cells.first().ok_or_else(columns)?;
            let (profile, at) = profile_name(&cells, 1).ok_or_else(columns)?;
            let [profile_id, instance, placement] = cells.get(at..).unwrap_or_default() else {
                return Err(columns());
            };
            let (start, size) = start_size(&lines, n, placement)?;
            Ok(LgiRow {
                line: n,
                gpu: number(&lines, n, "GPU", gpu_cell)?,
                profile: profile.to_string(),
                profile_id: number(&lines, n, "Profile ID", profile_id)?,
                instance: number(&lines, n, "Instance ID", instance)?,
                start,
                size,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(text: &str) -> Result<Vec<LgiRow>, ReadError> {
        read_lgi(SavedOutput::new("lgi.txt", text))
    }

    #[test]
    fn reads_the_rows_of_every_gpu() {
        let rows = read(include_str!("../tests/data/h100-mixed/lgi.txt")).unwrap();
        let got: Vec<_> = rows
            .iter()
            .map(|r| {
                (
                    r.gpu,
                    r.profile.as_str(),
                    r.profile_id,
                    r.instance,
                    r.start,
                    r.size,
                )
            })
            .collect();
        assert_eq!(
            got[..4],
            [
                (0, "1g.10gb", 19, 9, 2, 1),
                (0, "1g.10gb", 19, 10, 3, 1),
                (0, "2g.20gb", 14, 3, 0, 2),
                (0, "3g.40gb", 9, 2, 4, 4),
            ]
        );
        assert_eq!(rows.len(), 8);
        assert_eq!(rows[0].line, 6);
        assert_eq!(rows[7].gpu, 1);
    }

    #[test]
    fn messages_mean_no_instances() {
        assert_eq!(read("No MIG-enabled devices found.\n"), Ok(vec![]));
        assert_eq!(read("No GPU instances found: Not Found\n"), Ok(vec![]));
        assert_eq!(read(""), Ok(vec![]));
    }

    #[test]
    fn tables_saved_one_after_another_are_read() {
        let one = "+---+\n| GPU instances: |\n| GPU Name Profile Instance Placement |\n|===|\n";
        let text = format!(
            "{one}|   0  MIG 7g.80gb   0   0   0:8  |\n+---+\n{one}|   1  MIG 4g.40gb   5   1   0:4  |\n+---+\n"
        );
        let rows = read(&text).unwrap();
        assert_eq!(rows.len(), 2);
        assert_eq!((rows[1].gpu, rows[1].line), (1, 11));
    }

    #[test]
    fn bad_fields_are_named() {
        let head = "+---+\n| GPU instances: |\n| GPU Name Profile Instance Placement |\n|===|\n";
        let e = read(&format!("{head}|  0  MIG 3g.40gb  9  2  4-4  |\n+---+\n")).unwrap_err();
        assert_eq!(
            e.to_string(),
            "lgi.txt:5: Placement: expected `Start:Size` such as `4:4`, found `4-4`"
        );
        let e = read(&format!(
            "{head}|  0  MIG 3g.40gb  nine  2  4:4  |\n+---+\n"
        ))
        .unwrap_err();
        assert!(
            matches!(
                &e,
                ReadError::Field {
                    field: "Profile ID",
                    line: 5,
                    ..
                }
            ),
            "{e}"
        );
        let e = read(&format!("{head}|  x  MIG 3g.40gb  9  2  4:4  |\n+---+\n")).unwrap_err();
        assert!(matches!(&e, ReadError::Field { field: "GPU", .. }), "{e}");
        let e = read(&format!("{head}|  0  MIG 3g.40gb  9  |\n+---+\n")).unwrap_err();
        assert!(matches!(&e, ReadError::Field { field: "row", .. }), "{e}");
        let e = read(&format!("{head}|  0  MIG 3g.40gb  9  2  4:4\n")).unwrap_err();
        assert!(matches!(&e, ReadError::Field { field: "row", .. }), "{e}");
        let e = read("Failed to display GPU instances: Insufficient Permissions\n").unwrap_err();
        assert!(
            matches!(
                &e,
                ReadError::Field {
                    field: "table",
                    line: 1,
                    ..
                }
            ),
            "{e}"
        );
    }

    #[test]
    fn truncated_tables_are_errors() {
        let full = include_str!("../tests/data/h100-mixed/lgi.txt");
        let lines: Vec<&str> = full.lines().collect();
        // A cut after a row's closing border is a shorter listing; every other cut is
        // an error, never a panic or a short reading.
        for cut in 1..lines.len() {
            let text = lines[..cut].join("\n");
            match read(&text) {
                Ok(rows) if cut > 5 && lines[cut - 1].starts_with('+') => {
                    assert_eq!(rows.len(), (cut - 5) / 2, "cut {cut}");
                }
                Ok(rows) => panic!("cut {cut}: read {} rows", rows.len()),
                Err(e) => assert!(matches!(e, ReadError::Truncated { .. }), "cut {cut}: {e}"),
            }
        }
        // A row cut mid-line.
        let text = format!("{}\n|   1  MIG 3g.4", lines[..lines.len() - 1].join("\n"));
        assert!(read(&text).is_err());
    }
}
