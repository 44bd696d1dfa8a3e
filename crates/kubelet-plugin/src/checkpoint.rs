//! The checkpoint: every claim this plugin has prepared, what it chose (GPU, NIC function)
//! and the CDI spec it wrote. Written atomically before the CDI spec (write-ahead), so
//! after a crash at any point the checkpoint is the truth that the CDI directory is
//! reconciled to.

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};
use topoalign_dra::prepare::CdiSpec;
use topoalign_topology::Bdf;

use crate::error::PluginError;
use crate::mig_dynamic::{CreatedMig, PendingMig};

/// The checkpoint format version this code reads and writes.
pub(crate) const CHECKPOINT_VERSION: u32 = 1;

/// The whole checkpoint file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Checkpoint {
    /// `CHECKPOINT_VERSION`.
    pub version: u32,
    /// Prepared claims by UID.
    pub claims: BTreeMap<String, PreparedClaim>,
    /// Dynamic MIG instances being created (write-ahead, before `nvidia-smi` runs): a
    /// crash before their claim is checkpointed leaves them here, and the next start
    /// destroys whatever sits at their placements.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub creating: Vec<PendingMig>,
}

impl Default for Checkpoint {
    fn default() -> Self {
        Self {
            version: CHECKPOINT_VERSION,
            claims: BTreeMap::new(),
            creating: Vec::new(),
        }
    }
}

/// One prepared claim.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PreparedClaim {
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
    /// This driver's devices of the claim, in allocation order.
    pub devices: Vec<PreparedRecord>,
    /// The CDI spec written for it (`None` when the claim has none of our devices).
    pub spec: Option<CdiSpec>,
}

/// One prepared device: what the kubelet is told, and what it holds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PreparedRecord {
    /// The request (base name, without a `/subrequest`).
    pub request: String,
    /// Pool.
    pub pool: String,
    /// Published device name.
    pub device: String,
    /// The GPU it holds.
    pub gpu: Option<Bdf>,
    /// The NIC function (PF or VF) chosen for it.
    pub nic_function: Option<Bdf>,
    /// Its CDI ids.
    pub cdi_device_ids: Vec<String>,
    /// The MIG instance created for it (dynamic MIG): what unprepare destroys.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mig: Option<CreatedMig>,
}

impl Checkpoint {
    /// Reads the checkpoint; a missing file is an empty checkpoint, anything unreadable
    /// is an error naming the file (never silently dropped: it holds prepared claims).
    pub fn load(path: &Path) -> Result<Self, PluginError> {
        let bytes = match std::fs::read(path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Self::default()),
            Err(source) => {
                return Err(PluginError::Io {
                    op: "reading",
                    path: path.to_path_buf(),
                    source,
                });
            }
        };
        let cp: Checkpoint =
            serde_json::from_slice(&bytes).map_err(|e| PluginError::Checkpoint {
                path: path.to_path_buf(),
                what: format!(
                    "not a topoalign checkpoint ({e}); expected the JSON this plugin writes"
                ),
            })?;
        if cp.version != CHECKPOINT_VERSION {
            return Err(PluginError::Checkpoint {
                path: path.to_path_buf(),
                what: format!(
                    "version {} (this plugin reads version {CHECKPOINT_VERSION})",
                    cp.version
                ),
            });
        }
        Ok(cp)
    }

    /// The file content (pretty JSON).
    pub fn to_bytes(&self) -> Result<Vec<u8>, serde_json::Error> {
        json_bytes(self)
    }
}

/// Pretty JSON with a final newline: the format of the checkpoint and of CDI specs.
pub fn json_bytes<T: Serialize>(value: &T) -> Result<Vec<u8>, serde_json::Error> {
    let mut v = serde_json::to_vec_pretty(value)?;
    v.push(b'\n');
    Ok(v)
}
