//! The MIG and fabric facts of `nvidia-smi -q`: per GPU its MIG mode (current and
//! pending: they differ until a GPU reset or reboot applies a change) and, on
//! multi-node NVLink parts (GB200/GB300), its `Fabric` section's cluster UUID, clique ID
//! and registration state, for gang placement.
//!
//! The output is indented `Key : value` lines, sections as indented headers without a
//! value, one block per GPU headed by its PCI address:
//!
//! ```text
//! Attached GPUs                             : 2
//! GPU 00000000:1B:00.0
//!     Product Name                          : NVIDIA H100 80GB HBM3
//!     MIG Mode
//!         Current                           : Enabled
//!         Pending                           : Disabled
//!     Fabric
//!         State                             : Completed
//!         CliqueId                          : 7
//!         ClusterUUID                       : 5f0a…
//! ```
//!
//! Only the fields read are checked; unknown keys and sections are skipped, so newer
//! drivers' additions do not break the reader.

use serde::Serialize;

use crate::read_table::{Lines, ReadError, SavedOutput};

/// A MIG mode as `nvidia-smi -q` prints it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum MigMode {
    /// `Enabled`.
    Enabled,
    /// `Disabled`.
    Disabled,
    /// `N/A`: the GPU has no MIG.
    NotAvailable,
}

/// The `Fabric` section of one GPU.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct FabricInfo {
    /// `State` (`Completed`, `In Progress`, `Not Started`, `Not Supported`, `N/A`).
    pub state: Option<String>,
    /// `Status` (`Success`, …).
    pub status: Option<String>,
    /// `CliqueId` (absent or `N/A`: unknown).
    pub clique_id: Option<u32>,
    /// `ClusterUUID` (absent or `N/A`: unknown).
    pub cluster_uuid: Option<String>,
}

/// One GPU of `nvidia-smi -q`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct QueryGpu {
    /// Line of its `GPU <address>` header.
    pub line: usize,
    /// Its PCI address as printed (`00000000:1B:00.0`).
    pub bus_id: String,
    /// `Product Name`.
    pub product: Option<String>,
    /// `GPU UUID`.
    pub uuid: Option<String>,
    /// `MIG Mode` / `Current`.
    pub mig_current: Option<MigMode>,
    /// `MIG Mode` / `Pending`.
    pub mig_pending: Option<MigMode>,
    /// The `Fabric` section, when printed.
    pub fabric: Option<FabricInfo>,
}

impl QueryGpu {
    /// A MIG mode change waits for a GPU reset or reboot.
    pub fn mig_change_pending(&self) -> bool {
        matches!((self.mig_current, self.mig_pending), (Some(c), Some(p)) if c != p)
    }

    /// `<ClusterUUID>.<CliqueId>` (what GPU feature discovery labels
    /// `nvidia.com/gpu.clique`), when both are known.
    pub fn clique(&self) -> Option<String> {
        let f = self.fabric.as_ref()?;
        Some(format!("{}.{}", f.cluster_uuid.as_ref()?, f.clique_id?))
    }
}

fn known(v: &str) -> Option<&str> {
    (!v.is_empty() && v != "N/A").then_some(v)
}

fn gpu_header(line: &str) -> Option<&str> {
    let rest = line.strip_prefix("GPU ")?;
    let ok = rest.len() >= 7
        && rest.contains(':')
        && rest.contains('.')
        && rest
            .bytes()
            .all(|b| b.is_ascii_hexdigit() || b == b':' || b == b'.');
    ok.then_some(rest)
}

/// Reads every GPU block of `nvidia-smi -q` output. Errors name the input and line: no
/// GPU block at all, a malformed MIG mode or clique ID, a `MIG Mode` section without
/// `Current`, a GPU printed twice, and fewer blocks than `Attached GPUs` says
/// (truncated output).
pub fn read_query(out: SavedOutput<'_>) -> Result<Vec<QueryGpu>, ReadError> {
    let mut lines = Lines::new(out);
    let mut gpus: Vec<QueryGpu> = Vec::new();
    let mut attached: Option<(usize, usize)> = None;
    // Open sections of the current GPU: (indent, name).
    let mut stack: Vec<(usize, &str)> = Vec::new();
    let mut mig_header: Option<usize> = None;
    let close_gpu = |gpus: &[QueryGpu], mig_header: Option<usize>, lines: &Lines<'_>| match (
        gpus.last(),
        mig_header,
    ) {
        (Some(g), Some(at)) if g.mig_current.is_none() => Err(lines.field(
            at,
            "MIG Mode",
            "a `Current : Enabled|Disabled|N/A` line under it",
            "none",
        )),
        _ => Ok(()),
    };
    while let Some((n, raw)) = lines.next_line() {
        let indent = raw.len() - raw.trim_start().len();
        let line = raw.trim();
        if indent == 0 {
            if let Some(bus) = gpu_header(line) {
                close_gpu(&gpus, mig_header, &lines)?;
                if let Some(first) = gpus.iter().find(|g| g.bus_id.eq_ignore_ascii_case(bus)) {
                    return Err(lines.field(
                        n,
                        "GPU",
                        &format!("each GPU once (it was first at line {})", first.line),
                        line,
                    ));
                }
                gpus.push(QueryGpu {
                    line: n,
                    bus_id: bus.to_string(),
                    product: None,
                    uuid: None,
                    mig_current: None,
                    mig_pending: None,
                    fabric: None,
                });
                stack.clear();
                mig_header = None;
                continue;
            }
            if let Some((k, v)) = line.split_once(':')
                && k.trim() == "Attached GPUs"
            {
                let v = v.trim();
                let count = v
                    .parse::<usize>()
                    .map_err(|_| lines.field(n, "Attached GPUs", "a number of GPUs", v))?;
                attached = Some((n, count));
            }
            continue;
        }
        let Some(gpu) = gpus.last_mut() else {
            continue;
        };
        while stack.last().is_some_and(|(i, _)| *i >= indent) {
            stack.pop();
        }
        let Some((key, value)) = line.split_once(" : ") else {
            // A section header (or a key whose value is missing: also a header here).
            let name = line.trim_end_matches(':').trim();
            if stack.is_empty() && name == "MIG Mode" {
                mig_header = Some(n);
            }
            if stack.is_empty() && name == "Fabric" {
                gpu.fabric = Some(FabricInfo::default());
            }
            stack.push((indent, name));
            continue;
        };
        let (key, value) = (key.trim(), value.trim());
        let section: Vec<&str> = stack.iter().map(|(_, s)| *s).collect();
        match (section.as_slice(), key) {
            ([], "Product Name") => gpu.product = known(value).map(str::to_string),
            ([], "GPU UUID") => gpu.uuid = known(value).map(str::to_string),
            (["MIG Mode"], "Current" | "Pending") => {
                let mode = match value {
                    "Enabled" => MigMode::Enabled,
                    "Disabled" => MigMode::Disabled,
                    "N/A" => MigMode::NotAvailable,
                    _ => {
                        return Err(lines.field(n, "MIG Mode", "Enabled, Disabled or N/A", value));
                    }
                };
                if key == "Current" {
                    gpu.mig_current = Some(mode);
                } else {
                    gpu.mig_pending = Some(mode);
                }
            }
            (["Fabric"], k) => {
                let f = gpu.fabric.get_or_insert_with(FabricInfo::default);
                let v = known(value).map(str::to_string);
                match k {
                    "State" => f.state = v,
                    "Status" => f.status = v,
                    "ClusterUUID" => f.cluster_uuid = v,
                    "CliqueId" => {
                        f.clique_id = match known(value) {
                            None => None,
                            Some(t) => Some(t.parse::<u32>().map_err(|_| {
                                lines.field(n, "CliqueId", "an unsigned integer or N/A", t)
                            })?),
                        }
                    }
                    _ => {}
                }
            }
            _ => {}
        }
    }
    close_gpu(&gpus, mig_header, &lines)?;
    if gpus.is_empty() {
        return Err(match attached {
            Some((_, c)) if c > 0 => lines.truncated(
                "nvidia-smi -q output",
                &format!("{c} `GPU <address>` blocks (Attached GPUs)"),
            ),
            _ => lines.field(
                lines.last_number().min(1),
                "GPU",
                "`GPU 00000000:1B:00.0` blocks as `nvidia-smi -q` prints them",
                &out.text
                    .lines()
                    .find(|l| !l.trim().is_empty())
                    .unwrap_or("nothing")
                    .chars()
                    .take(60)
                    .collect::<String>(),
            ),
        });
    }
    if let Some((_, count)) = attached
        && gpus.len() < count
    {
        return Err(lines.truncated(
            "nvidia-smi -q output",
            &format!(
                "{count} `GPU <address>` blocks (Attached GPUs), found {}",
                gpus.len()
            ),
        ));
    }
    Ok(gpus)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Written for this project in the shape of `nvidia-smi -q` (R570): two GB200 GPUs
    /// of one NVLink clique, the second with a MIG change pending, and a third GPU that
    /// has no MIG and no fabric.
    const QUERY: &str = "
==============NVSMI LOG==============

Timestamp                                 : Fri Nov 27 04:00:00 2026
Driver Version                            : 570.124.06
CUDA Version                              : 12.8

Attached GPUs                             : 3
GPU 00000008:01:00.0
    Product Name                          : NVIDIA GB200
    Product Architecture                  : Blackwell
    MIG Mode
        Current                           : Disabled
        Pending                           : Disabled
    GPU UUID                              : GPU-aa000000-0000-4000-8000-000000000001
    Fabric
        State                             : Completed
        Status                            : Success
        CliqueId                          : 7
        ClusterUUID                       : 6c1e0d2a-7b3f-4e5d-9a8c-0f1e2d3c4b5a
        Health
            Bandwidth                     : Full
            Route Recovery in progress    : False

GPU 00000009:01:00.0
    Product Name                          : NVIDIA GB200
    MIG Mode
        Current                           : Disabled
        Pending                           : Enabled
    GPU UUID                              : GPU-aa000000-0000-4000-8000-000000000002
    Fabric
        State                             : In Progress
        Status                            : N/A
        CliqueId                          : N/A
        ClusterUUID                       : N/A

GPU 0000000A:01:00.0
    Product Name                          : NVIDIA L40S
    MIG Mode
        Current                           : N/A
        Pending                           : N/A
    GPU UUID                              : GPU-bb000000-0000-4000-8000-000000000003
";

    fn read(text: &str) -> Result<Vec<QueryGpu>, ReadError> {
        read_query(SavedOutput::new("node-1/query.txt", text))
    }

    #[test]
    fn reads_mig_modes_and_fabric() {
        let g = read(QUERY).unwrap();
        assert_eq!(g.len(), 3);
        assert_eq!(g[0].bus_id, "00000008:01:00.0");
        assert_eq!(g[0].product.as_deref(), Some("NVIDIA GB200"));
        assert_eq!(g[0].mig_current, Some(MigMode::Disabled));
        assert!(!g[0].mig_change_pending());
        let f = g[0].fabric.as_ref().unwrap();
        assert_eq!(f.state.as_deref(), Some("Completed"));
        assert_eq!(f.clique_id, Some(7));
        assert_eq!(
            g[0].clique().as_deref(),
            Some("6c1e0d2a-7b3f-4e5d-9a8c-0f1e2d3c4b5a.7")
        );
        // The health subsection's keys are not the fabric's.
        assert_eq!(f.status.as_deref(), Some("Success"));
        assert!(g[1].mig_change_pending());
        assert_eq!(g[1].mig_pending, Some(MigMode::Enabled));
        assert_eq!(g[1].clique(), None);
        assert_eq!(
            g[1].fabric.as_ref().unwrap().state.as_deref(),
            Some("In Progress")
        );
        assert_eq!(g[2].mig_current, Some(MigMode::NotAvailable));
        assert_eq!(g[2].fabric, None);
        assert_eq!(
            g[2].uuid.as_deref(),
            Some("GPU-bb000000-0000-4000-8000-000000000003")
        );
    }

    #[test]
    fn truncated_output_is_an_error_naming_the_line() {
        // Cut inside the last GPU's MIG section: its Current line is gone.
        let cut = &QUERY[..QUERY
            .find("        Current                           : N/A")
            .unwrap()];
        let e = read(cut).unwrap_err().to_string();
        assert!(e.starts_with("node-1/query.txt:"), "{e}");
        assert!(e.contains("MIG Mode") && e.contains("Current"), "{e}");
        // Cut before the last GPU: fewer blocks than attached.
        let cut = &QUERY[..QUERY.find("GPU 0000000A").unwrap()];
        let e = read(cut).unwrap_err().to_string();
        assert!(
            e.contains("truncated") && e.contains("3 `GPU <address>` blocks"),
            "{e}"
        );
        // Cut right after the header.
        let cut = &QUERY[..QUERY.find("GPU 00000008").unwrap()];
        let e = read(cut).unwrap_err().to_string();
        assert!(e.contains("truncated"), "{e}");
        // Every prefix reads or errors, never panics.
        for end in (0..QUERY.len()).filter(|i| QUERY.is_char_boundary(*i)) {
            let _ = read(&QUERY[..end]);
        }
    }

    #[test]
    fn malformed_fields_are_named() {
        let e = read(&QUERY.replace(
            "Pending                           : Enabled",
            "Pending : Maybe",
        ))
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("MIG Mode: expected Enabled, Disabled or N/A, found `Maybe`"),
            "{e}"
        );
        let e = read(&QUERY.replace("CliqueId                          : 7", "CliqueId : seven"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("CliqueId") && e.contains("`seven`"), "{e}");
        let twice = format!("{QUERY}GPU 00000008:01:00.0\n    MIG Mode\n        Current : N/A\n");
        let e = read(&twice).unwrap_err().to_string();
        assert!(e.contains("each GPU once"), "{e}");
        let e = read("garbage\n\0\0").unwrap_err().to_string();
        assert!(
            e.contains("`GPU 00000000:1B:00.0` blocks") && e.contains("garbage"),
            "{e}"
        );
        assert!(read("").is_err());
        let e = read("Attached GPUs : lots\n").unwrap_err().to_string();
        assert!(e.contains("Attached GPUs"), "{e}");
    }
}
