//! What `nvidia-smi mig -i <gpu> -cgi <profile ID>:<start> -C` prints, and the MIG
//! devices of one GPU in `nvidia-smi -L` (dynamic MIG: the kubelet plugin creates an
//! instance at prepare and reads back its IDs and UUID).
//!
//! ```text
//! Successfully created GPU instance ID  5 on GPU  0 using profile MIG 1g.10gb (ID 19)
//! Successfully created compute instance ID  0 on GPU  0 GPU instance ID  5 using profile MIG 1g.10gb (ID  0)
//! ```
//!
//! The numbers are padded to a width (`ID  5`), so the lines are read word by word.

use serde::{Deserialize, Serialize};

use crate::read_list::read_list;
use crate::read_table::{Lines, ReadError, SavedOutput, number};

/// The GPU instance and its default compute instance that one `-cgi … -C` created.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CreatedInstance {
    /// The GPU's index.
    pub gpu: u32,
    /// The new GPU-instance ID.
    pub gi: u32,
    /// Its profile name (`1g.10gb`).
    pub profile: String,
    /// Its GPU-instance profile ID (`19`).
    pub profile_id: u32,
    /// The new compute-instance ID.
    pub ci: u32,
}

const GI_LINE: &str =
    "`Successfully created GPU instance ID <n> on GPU <n> using profile MIG <profile> (ID <n>)`";
const CI_LINE: &str =
    "`Successfully created compute instance ID <n> on GPU <n> GPU instance ID <n> using profile …`";

/// `(ID 19)` split as `(ID`, `19)`: the number.
fn paren_id(lines: &Lines<'_>, n: usize, words: &[&str], at: usize) -> Result<u32, ReadError> {
    let t = words[at..].join(" ");
    let inner = t
        .strip_prefix("(ID")
        .and_then(|r| r.strip_suffix(')'))
        .ok_or_else(|| lines.field(n, "profile ID", "`(ID <n>)`", &t))?;
    number(lines, n, "profile ID", inner.trim())
}

/// Reads the output of one `-cgi <id>:<start> -C`: its GPU-instance line, then its
/// compute-instance line for the same GPU and GPU instance. Anything else, or a line
/// missing, is an error naming the input and the line.
pub fn read_created(out: SavedOutput<'_>) -> Result<CreatedInstance, ReadError> {
    let mut lines = Lines::new(out);
    let (n, line) = lines
        .next_line()
        .ok_or_else(|| lines.truncated("create output", GI_LINE))?;
    let w: Vec<&str> = line.split_whitespace().collect();
    let gi_shape = matches!(
        w.as_slice(),
        [
            "Successfully",
            "created",
            "GPU",
            "instance",
            "ID",
            _,
            "on",
            "GPU",
            _,
            "using",
            "profile",
            "MIG",
            _,
            ..
        ]
    );
    if !gi_shape || w.len() < 15 {
        return Err(lines.field(n, "GPU instance", GI_LINE, line.trim()));
    }
    let gi: u32 = number(&lines, n, "GPU instance ID", w[5])?;
    let gpu: u32 = number(&lines, n, "GPU", w[8])?;
    let profile = w[12].to_string();
    let profile_id = paren_id(&lines, n, &w, 13)?;
    let (n, line) = lines
        .next_line()
        .ok_or_else(|| lines.truncated("create output", CI_LINE))?;
    let w: Vec<&str> = line.split_whitespace().collect();
    let ci_shape = matches!(
        w.as_slice(),
        [
            "Successfully",
            "created",
            "compute",
            "instance",
            "ID",
            _,
            "on",
            "GPU",
            _,
            "GPU",
            "instance",
            "ID",
            _,
            ..
        ]
    );
    if !ci_shape {
        return Err(lines.field(n, "compute instance", CI_LINE, line.trim()));
    }
    let ci: u32 = number(&lines, n, "compute instance ID", w[5])?;
    let (ci_gpu, ci_gi): (u32, u32) = (
        number(&lines, n, "GPU", w[8])?,
        number(&lines, n, "GPU instance ID", w[12])?,
    );
    if (ci_gpu, ci_gi) != (gpu, gi) {
        return Err(lines.field(
            n,
            "compute instance",
            &format!("one on GPU {gpu} GPU instance {gi}"),
            line.trim(),
        ));
    }
    Ok(CreatedInstance {
        gpu,
        gi,
        profile,
        profile_id,
        ci,
    })
}

/// The GPU-instance ID a `-cgi … -C` output names on its first line, when that line
/// reads even though the rest does not (output cut short after the GPU instance was
/// made): what to destroy.
pub fn created_gpu_instance(text: &str) -> Option<u32> {
    text.lines().find_map(|l| {
        let w: Vec<&str> = l.split_whitespace().collect();
        match w.as_slice() {
            ["Successfully", "created", "GPU", "instance", "ID", id, ..] => id.parse().ok(),
            _ => None,
        }
    })
}

/// The MIG device UUIDs `nvidia-smi -L` lists under the GPU whose UUID is `gpu_uuid`,
/// in order; `None` when no GPU of the list has that UUID.
pub fn listed_mig_uuids(
    out: SavedOutput<'_>,
    gpu_uuid: &str,
) -> Result<Option<Vec<String>>, ReadError> {
    Ok(read_list(out)?
        .into_iter()
        .find(|g| g.uuid.eq_ignore_ascii_case(gpu_uuid))
        .map(|g| g.mig_devices.into_iter().map(|d| d.uuid).collect()))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    const OK: &str = "Successfully created GPU instance ID  5 on GPU  0 using profile MIG 1g.10gb (ID 19)\nSuccessfully created compute instance ID  0 on GPU  0 GPU instance ID  5 using profile MIG 1g.10gb (ID  0)\n";

    fn read(text: &str) -> Result<CreatedInstance, ReadError> {
        read_created(SavedOutput::new("create", text))
    }

    #[test]
    fn reads_the_ids_of_what_was_created() {
        assert_eq!(
            read(OK).unwrap(),
            CreatedInstance {
                gpu: 0,
                gi: 5,
                profile: "1g.10gb".into(),
                profile_id: 19,
                ci: 0
            }
        );
    }

    #[test]
    fn truncated_or_malformed_output_is_an_error_naming_the_line() {
        let first = OK.lines().next().unwrap();
        assert_eq!(created_gpu_instance(first), Some(5));
        assert_eq!(created_gpu_instance("Unable to create"), None);
        let e = read(first).unwrap_err().to_string();
        assert!(e.starts_with("create:1: truncated create output"), "{e}");
        let e = read("").unwrap_err().to_string();
        assert!(e.contains("truncated"), "{e}");
        let e = read(&OK.replace("ID  5 on", "ID five on"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("create:1: GPU instance ID"), "{e}");
        let e = read(&OK.replace("instance ID  5 using", "instance ID  6 using"))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("create:2") && e.contains("GPU instance 5"),
            "{e}"
        );
        let e = read(
            "Unable to create a GPU instance on GPU  0 using profile 19: Insufficient Resources\n",
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("create:1: GPU instance: expected"), "{e}");
        let e = read(&OK.replace("(ID 19)", "(ID x)"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("profile ID"), "{e}");
    }

    #[test]
    fn the_mig_uuids_of_one_gpu() {
        let list = "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-aaa)\n  MIG 1g.10gb     Device  0: (UUID: MIG-111)\nGPU 1: NVIDIA H100 80GB HBM3 (UUID: GPU-bbb)\n  MIG 3g.40gb     Device  0: (UUID: MIG-222)\n  MIG 1g.10gb     Device  1: (UUID: MIG-333)\n";
        let out = SavedOutput::new("-L", list);
        assert_eq!(
            listed_mig_uuids(out, "GPU-bbb").unwrap(),
            Some(vec!["MIG-222".to_string(), "MIG-333".to_string()])
        );
        assert_eq!(listed_mig_uuids(out, "GPU-ccc").unwrap(), None);
        let e = listed_mig_uuids(SavedOutput::new("-L", "GPU 0: X (UUID: GPU-a"), "GPU-a")
            .unwrap_err()
            .to_string();
        assert!(e.contains("-L:1"), "{e}");
    }
}
