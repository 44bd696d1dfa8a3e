//! What is already taken on a node: the input every placement question starts from.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::ids::Bdf;
use crate::numa::CpuSet;

/// Devices, CPUs and memory already allocated on a node. Reads from YAML or JSON such as
/// `{gpus: ["0000:11:00.0"], nics: ["0000:0c:00.1"], cpus: "0-7", memory: {0: 1073741824}}`;
/// unknown fields are refused so that a typo cannot silently mean "nothing in use".
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NodeUsage {
    /// GPUs in use, by PCI address.
    #[serde(default)]
    pub gpus: Vec<Bdf>,
    /// NIC functions (PFs or VFs) in use, by PCI address.
    #[serde(default)]
    pub nics: Vec<Bdf>,
    /// CPUs held exclusively by other pods (or reserved).
    #[serde(default)]
    pub cpus: CpuSet,
    /// Memory in use per NUMA node id, in bytes.
    #[serde(default)]
    pub memory: BTreeMap<u32, u64>,
}

impl NodeUsage {
    /// Nothing in use.
    pub fn empty() -> Self {
        NodeUsage::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_documented_shape_and_refuses_typos() {
        let u: NodeUsage = serde_json::from_str(
            r#"{"gpus": ["0000:11:00.0"], "nics": ["0000:0c:00.1"], "cpus": "0-7", "memory": {"0": 1024}}"#,
        )
        .unwrap();
        assert_eq!(u.cpus.len(), 8);
        assert_eq!(u.memory[&0], 1024);
        let err = serde_json::from_str::<NodeUsage>(r#"{"gpu": []}"#).unwrap_err();
        assert!(err.to_string().contains("unknown field `gpu`"), "{err}");
        let err = serde_json::from_str::<NodeUsage>(r#"{"gpus": ["11:00"]}"#).unwrap_err();
        assert!(err.to_string().contains("PCI address"), "{err}");
    }
}
