//! A `--used` file (the `clap` feature): the devices, CPUs and memory already taken on a
//! node, for `topoalign plan` and `topoalign claims --explain`.

use std::path::Path;

use thiserror::Error;
use topoalign_kube_types::{DocumentError, read_document};

use crate::Usage;

/// A `--used` file that cannot be read or is not a usage.
#[derive(Debug, Error)]
pub enum UsageFileError {
    /// Not readable, or neither JSON nor YAML.
    #[error(transparent)]
    Read(#[from] DocumentError),
    /// A document, but not a usage.
    #[error(
        "usage file {path}: expected {{gpus: [BDF…], nics: [BDF…], cpus: \"cpu list\", memory: {{node: bytes}}}}"
    )]
    Shape {
        /// The file.
        path: String,
        /// What did not fit.
        #[source]
        source: serde_json::Error,
    },
}

/// Reads a `--used` file (JSON or YAML) naming the devices already taken; none means an
/// empty node.
pub fn read_usage(path: Option<&Path>) -> Result<Usage, UsageFileError> {
    let Some(p) = path else {
        return Ok(Usage::empty());
    };
    serde_json::from_value(read_document(p)?).map_err(|source| UsageFileError::Shape {
        path: p.display().to_string(),
        source,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_usage_file_is_read_and_a_wrong_one_named() {
        assert_eq!(read_usage(None).unwrap(), Usage::empty());
        let dir = tempfile::tempdir().unwrap();
        let good = dir.path().join("used.yaml");
        std::fs::write(&good, "gpus: [\"0000:11:00.0\"]\ncpus: \"0-3\"\n").unwrap();
        let u = read_usage(Some(&good)).unwrap();
        assert_eq!(u.gpus.len(), 1);
        let bad = dir.path().join("bad.yaml");
        std::fs::write(&bad, "gpus: [\"zzz\"]\n").unwrap();
        let e = read_usage(Some(&bad)).unwrap_err();
        assert!(matches!(e, UsageFileError::Shape { .. }), "{e:?}");
        assert!(e.to_string().starts_with("usage file "), "{e}");
        assert!(std::error::Error::source(&e).is_some());
        let missing = dir.path().join("none.yaml");
        let e = read_usage(Some(&missing)).unwrap_err();
        assert!(e.to_string().contains("cannot read"), "{e}");
    }
}
