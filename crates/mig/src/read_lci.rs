//! `nvidia-smi mig -lci`: the compute instances inside each GPU instance.
//!
//! ```text
//! +--------------------------------------------------------------------+
//! | Compute instances:                                                 |
//! | GPU     GPU       Name             Profile   Instance   Placement  |
//! |       Instance                       ID        ID       Start:Size |
//! |         ID                                                         |
//! |====================================================================|
//! |   0      9       MIG 1g.10gb          0         0          0:1     |
//! +--------------------------------------------------------------------+
//! ```
//!
//! Older drivers print no `Placement` column (the NVIDIA MIG user guide's `-lci -gi 1`
//! example); both forms are read. The profile ID is the *compute-instance* profile, and
//! the placement counts compute slices inside the GPU instance, not memory slices.

use serde::Serialize;

use crate::read_table::{
    Lines, ReadError, SavedOutput, number, profile_name, start_size, table_rows,
};

/// One row of `nvidia-smi mig -lci`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct LciRow {
    /// 1-based line in the input.
    pub line: usize,
    /// GPU index.
    pub gpu: u32,
    /// The parent GPU-instance ID.
    pub gpu_instance: u32,
    /// The compute-instance profile name without `MIG ` (`1c.3g.40gb`, or `3g.40gb`
    /// for one compute instance over the whole GPU instance).
    pub profile: String,
    /// The compute-instance profile ID.
    pub profile_id: u32,
    /// The compute-instance ID (unique inside its GPU instance).
    pub instance: u32,
    /// `Start:Size` in compute slices of the GPU instance (absent on older drivers).
    pub placement: Option<(u8, u8)>,
}

/// The rows of saved `nvidia-smi mig -lci` output. `No MIG-enabled devices found.` and
/// `No compute instances found` read as no rows.
pub(crate) fn read_lci(out: SavedOutput<'_>) -> Result<Vec<LciRow>, ReadError> {
    let mut lines = Lines::new(out);
    let rows = table_rows(&mut lines, "Compute instances:", "compute instances table")?;
    rows.into_iter()
        .map(|(n, cells)| {
            let found = cells.join(" ");
            let columns = || {
                let expected = "5 or 6 columns: GPU, GPU instance ID, Name, Profile ID, \
                                Instance ID[, Placement]";
                lines.field(n, "row", expected, &found)
            };
            let [gpu, gi, ..] = cells[..] else {
                return Err(columns());
            };
            let (profile, at) = profile_name(&cells, 2).ok_or_else(columns)?;
            let (profile_id, instance, placement) = match cells.get(at..).unwrap_or_default() {
                [p, i] => (p, i, None),
                [p, i, pl] => (p, i, Some(start_size(&lines, n, pl)?)),
                _ => return Err(columns()),
            };
            Ok(LciRow {
                line: n,
                gpu: number(&lines, n, "GPU", gpu)?,
                gpu_instance: number(&lines, n, "GPU instance ID", gi)?,
                profile: profile.to_string(),
                profile_id: number(&lines, n, "Profile ID", profile_id)?,
                instance: number(&lines, n, "Instance ID", instance)?,
                placement,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(text: &str) -> Result<Vec<LciRow>, ReadError> {
        read_lci(SavedOutput::new("lci.txt", text))
    }

    #[test]
    fn reads_both_layouts() {
        let rows = read(include_str!("../tests/data/h100-mixed/lci.txt")).unwrap();
        assert_eq!(rows.len(), 9);
        assert_eq!(
            rows[8],
            LciRow {
                line: 23,
                gpu: 1,
                gpu_instance: 1,
                profile: "2c.3g.40gb".into(),
                profile_id: 1,
                instance: 1,
                placement: Some((1, 2)),
            }
        );
        let rows = read(include_str!("../tests/data/a100-40-7x1g/lci-old.txt")).unwrap();
        assert_eq!(rows.len(), 7);
        assert_eq!(
            rows[..3]
                .iter()
                .map(|r| (r.gpu_instance, r.instance, r.placement))
                .collect::<Vec<_>>(),
            [(7, 0, None), (8, 0, None), (9, 0, None)]
        );
    }

    #[test]
    fn messages_mean_no_instances() {
        assert_eq!(read("No compute instances found: Not Found\n"), Ok(vec![]));
        assert_eq!(read("No MIG-enabled devices found.\n"), Ok(vec![]));
    }

    #[test]
    fn bad_fields_are_named() {
        let head = "+---+\n| Compute instances: |\n| GPU GPU Name Profile Instance |\n|===|\n";
        let e = read(&format!(
            "{head}|  0  x  MIG 1g.10gb  0  0  0:1  |\n+---+\n"
        ))
        .unwrap_err();
        assert_eq!(
            e.to_string(),
            "lci.txt:5: GPU instance ID: expected a whole number, found `x`"
        );
        let e = read(&format!(
            "{head}|  0  7  MIG 1g.10gb  0  0  0/1  |\n+---+\n"
        ))
        .unwrap_err();
        assert!(
            matches!(
                &e,
                ReadError::Field {
                    field: "Placement",
                    ..
                }
            ),
            "{e}"
        );
        let e = read(&format!("{head}|  0  7  MIG 1g.10gb  0  |\n+---+\n")).unwrap_err();
        assert!(matches!(&e, ReadError::Field { field: "row", .. }), "{e}");
        let e = read(&format!("{head}|  0  7  MIG 1g.10gb  0  0  0:1  |\n")).unwrap_err();
        assert!(matches!(&e, ReadError::Truncated { line: 5, .. }), "{e}");
    }
}
