//! `nvidia-smi -L`: every GPU with its name and UUID, and under it its MIG devices.
//!
//! ```text
//! GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-c08d91cb-e324-655c-71ba-7570956445bc)
//!   MIG 3g.40gb     Device  0: (UUID: MIG-405bbda1-6b05-535f-9702-f95e8cd170ce)
//! ```
//!
//! Drivers from R470 print `MIG-<uuid>` (column widths vary: `Device 0:` or `Device  0:`);
//! R450/R460 printed `MIG-GPU-<gpu uuid>/<GPU instance ID>/<compute instance ID>`,
//! which names the instance (NVIDIA MIG user guide; DataDog/datadog-agent#33120 for the
//! newer form). A GPU line with no MIG lines under it is a GPU with no MIG devices
//! (MIG disabled or no instances; `-L` does not say which).

use serde::Serialize;

use crate::read_table::{Lines, ReadError, SavedOutput, is_empty_message, number};

/// One GPU of `nvidia-smi -L`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct ListedGpu {
    /// 1-based line in the input.
    pub line: usize,
    /// GPU index.
    pub index: u32,
    /// The product name (`NVIDIA H100 80GB HBM3`).
    pub name: String,
    /// `GPU-…`.
    pub uuid: String,
    /// Its MIG devices, in the order listed.
    pub mig_devices: Vec<MigDevice>,
}

/// One MIG device (a compute instance of a GPU instance) as `nvidia-smi -L` lists it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct MigDevice {
    /// 1-based line in the input.
    pub line: usize,
    /// The profile name without `MIG ` (`3g.40gb`, or `1c.3g.40gb` for a compute
    /// instance smaller than its GPU instance).
    pub profile: String,
    /// The MIG device index on its GPU (`Device 0`).
    pub device: u32,
    /// `MIG-…`.
    pub uuid: String,
}

impl MigDevice {
    /// The (GPU instance ID, compute instance ID) the legacy UUID form
    /// `MIG-GPU-<uuid>/<gi>/<ci>` names; `None` for the R470+ form, which names neither.
    pub fn legacy_ids(&self) -> Option<(u32, u32)> {
        let rest = self.uuid.strip_prefix("MIG-GPU-")?;
        let mut parts = rest.rsplitn(3, '/');
        let ci = parts.next()?.parse().ok()?;
        let gi = parts.next()?.parse().ok()?;
        parts.next().map(|_| (gi, ci))
    }
}

/// `(UUID: X)` at the end of a line: X.
fn uuid_of<'a>(
    lines: &Lines<'_>,
    n: usize,
    rest: &'a str,
    prefix: &str,
) -> Result<&'a str, ReadError> {
    let expected = format!("`(UUID: {prefix}…)`");
    let bad = || lines.field(n, "UUID", &expected, rest.trim());
    let inner = rest
        .trim()
        .strip_prefix("(UUID:")
        .and_then(|r| r.strip_suffix(')'))
        .ok_or_else(bad)?
        .trim();
    if inner.starts_with(prefix) && inner.len() > prefix.len() && !inner.contains(' ') {
        Ok(inner)
    } else {
        Err(bad())
    }
}

/// The GPUs of saved `nvidia-smi -L` output. `No devices found` reads as no GPUs.
pub(crate) fn read_list(out: SavedOutput<'_>) -> Result<Vec<ListedGpu>, ReadError> {
    let mut lines = Lines::new(out);
    let mut gpus: Vec<ListedGpu> = Vec::new();
    while let Some((n, line)) = lines.next_line() {
        let t = line.trim();
        if is_empty_message(t) {
            continue;
        }
        if let Some(rest) = line.strip_prefix("GPU ") {
            // `GPU 0: NAME (UUID: GPU-…)`; the name may hold spaces and parentheses.
            let (index, rest) = rest
                .split_once(':')
                .ok_or_else(|| lines.field(n, "GPU", "`GPU <index>: <name> (UUID: GPU-…)`", t))?;
            let at = rest
                .rfind("(UUID:")
                .ok_or_else(|| lines.field(n, "UUID", "`(UUID: GPU-…)`", rest.trim()))?;
            let name = rest[..at].trim();
            if name.is_empty() {
                return Err(lines.field(n, "name", "the GPU's product name", ""));
            }
            gpus.push(ListedGpu {
                line: n,
                index: number(&lines, n, "GPU", index.trim())?,
                name: name.to_string(),
                uuid: uuid_of(&lines, n, &rest[at..], "GPU-")?.to_string(),
                mig_devices: Vec::new(),
            });
        } else if let Some(rest) = t.strip_prefix("MIG ").filter(|_| line.starts_with(' ')) {
            // `  MIG 3g.40gb     Device  0: (UUID: MIG-…)`
            let shape = "`MIG <profile> Device <n>: (UUID: MIG-…)`";
            let (head, tail) = rest
                .split_once(':')
                .ok_or_else(|| lines.field(n, "MIG device", shape, t))?;
            let [profile, "Device", device] = head.split_whitespace().collect::<Vec<_>>()[..]
            else {
                return Err(lines.field(n, "MIG device", shape, t));
            };
            let device = MigDevice {
                line: n,
                profile: profile.to_string(),
                device: number(&lines, n, "Device", device)?,
                uuid: uuid_of(&lines, n, tail, "MIG-")?.to_string(),
            };
            let gpu = gpus.last_mut().ok_or_else(|| {
                lines.field(n, "MIG device", "a `GPU <index>: …` line before it", t)
            })?;
            gpu.mig_devices.push(device);
        } else {
            let expected = "`GPU <index>: <name> (UUID: GPU-…)` or an indented `MIG …` line";
            return Err(lines.field(n, "line", expected, t));
        }
    }
    Ok(gpus)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(text: &str) -> Result<Vec<ListedGpu>, ReadError> {
        read_list(SavedOutput::new("L.txt", text))
    }

    #[test]
    fn reads_gpus_and_their_mig_devices() {
        let gpus = read(include_str!("../tests/data/h100-mixed/list.txt")).unwrap();
        assert_eq!(gpus.len(), 3);
        assert_eq!(gpus[0].name, "NVIDIA H100 80GB HBM3");
        assert_eq!(gpus[0].uuid, "GPU-3b1f6c2e-8d4a-4f7b-9e21-5c0d7a9b4e10");
        assert_eq!(gpus[0].mig_devices.len(), 4);
        assert_eq!(gpus[1].mig_devices[1].profile, "2c.3g.40gb");
        assert_eq!(gpus[1].mig_devices[1].device, 1);
        assert_eq!(gpus[1].mig_devices[1].legacy_ids(), None);
        assert_eq!(gpus[2].index, 2);
        assert!(gpus[2].mig_devices.is_empty());
    }

    #[test]
    fn legacy_uuids_name_the_instances() {
        let gpus = read(include_str!("../tests/data/a100-40-7x1g/list.txt")).unwrap();
        assert_eq!(gpus[0].name, "A100-SXM4-40GB");
        let ids: Vec<_> = gpus[0]
            .mig_devices
            .iter()
            .map(MigDevice::legacy_ids)
            .collect();
        assert_eq!(ids[0], Some((7, 0)));
        assert_eq!(ids[6], Some((13, 0)));
        assert_eq!(read("No devices were found\n").map(|g| g.len()), Ok(0));
    }

    #[test]
    fn bad_lines_are_named() {
        let e = read("GPU x: NVIDIA H100 80GB HBM3 (UUID: GPU-1)\n").unwrap_err();
        assert_eq!(
            e.to_string(),
            "L.txt:1: GPU: expected a whole number, found `x`"
        );
        let e = read("GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-1\n").unwrap_err();
        assert!(matches!(&e, ReadError::Field { field: "UUID", .. }), "{e}");
        let e = read("GPU 0: NVIDIA H100 80GB HBM3\n").unwrap_err();
        assert!(matches!(&e, ReadError::Field { field: "UUID", .. }), "{e}");
        let e = read("  MIG 1g.10gb Device 0: (UUID: MIG-1)\n").unwrap_err();
        assert!(
            matches!(
                &e,
                ReadError::Field {
                    field: "MIG device",
                    line: 1,
                    ..
                }
            ),
            "{e}"
        );
        let text =
            "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-1)\n  MIG 1g.10gb Device 0: (UUID: MIG-";
        let e = read(text).unwrap_err();
        assert!(
            matches!(
                &e,
                ReadError::Field {
                    field: "UUID",
                    line: 2,
                    ..
                }
            ),
            "{e}"
        );
        let text =
            "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-1)\n  MIG 1g.10gb Device x: (UUID: MIG-1)";
        let e = read(text).unwrap_err();
        assert!(
            matches!(
                &e,
                ReadError::Field {
                    field: "Device",
                    ..
                }
            ),
            "{e}"
        );
        let e = read("Failed to initialize NVML: Driver/library version mismatch\n").unwrap_err();
        assert!(matches!(&e, ReadError::Field { field: "line", .. }), "{e}");
    }
}
