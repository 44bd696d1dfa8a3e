//! The `--config` file: the resource name table as YAML or JSON, every field optional
//! (a missing list keeps the built-in one).
//!
//! ```yaml
//! gpus: [nvidia.com/gpu, amd.com/gpu]
//! nics: [nvidia.com/sriov-rdma-vf, nvidia.com/hostdev]
//! sharedRdma: [rdma/rdma_shared_device_a]
//! migPrefixes: [nvidia.com/mig-]
//! targets: {pair: topoalign.dev/gpu-nic-pair, gpu: topoalign.dev/gpu, nic: topoalign.dev/nic, migPrefix: topoalign.dev/mig-}
//! sriovNetworks: [default/sriov-rdma-vf]
//! ```

use std::path::Path;

use crate::error::ConfigError;
use crate::names::Names;

/// Reads and checks a name table file.
pub fn read_names(path: &Path) -> Result<Names, ConfigError> {
    let doc = topoalign_kube_types::read_document(path)?;
    let names: Names = serde_path_to_error::deserialize(doc).map_err(|e| ConfigError::Field {
        file: path.to_path_buf(),
        path: e.path().to_string(),
        source: e.into_inner(),
    })?;
    names.validate().map_err(|source| ConfigError::Names {
        file: path.to_path_buf(),
        source,
    })?;
    Ok(names)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(text: &str) -> tempfile::NamedTempFile {
        let f = tempfile::Builder::new().suffix(".yaml").tempfile().unwrap();
        std::fs::write(f.path(), text).unwrap();
        f
    }

    #[test]
    fn a_file_replaces_the_lists_it_names() {
        let f = file("nics: [example.com/vf]\nsriovNetworks: [default/sriov-rdma-vf]\n");
        let n = read_names(f.path()).unwrap();
        assert_eq!(n.nics, vec!["example.com/vf".to_string()]);
        assert_eq!(n.gpus, Names::default().gpus);
        assert_eq!(n.sriov_networks, vec!["default/sriov-rdma-vf".to_string()]);
    }

    #[test]
    fn bad_files_name_the_file_and_the_field() {
        let f = file("nic: [example.com/vf]\n");
        let e = read_names(f.path()).unwrap_err().to_string();
        assert!(e.contains(&f.path().display().to_string()), "{e}");
        assert!(e.contains("unknown field `nic`"), "{e}");
        let f = file("targets: {pair: 3}\n");
        let e = read_names(f.path()).unwrap_err().to_string();
        assert!(e.contains("targets.pair"), "{e}");
        let f = file("gpus: [gpu]\n");
        let e = read_names(f.path()).unwrap_err().to_string();
        assert!(e.contains("gpus: `gpu`"), "{e}");
        let e = read_names(Path::new("/nonexistent.yaml"))
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("/nonexistent.yaml: cannot read"), "{e}");
    }
}
