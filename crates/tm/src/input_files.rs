//! The files `tm` reads beside the node: a whole case, a Pod manifest and the devices
//! already in use, each read with
//! [`topoalign_kube_types::read_document`] (JSON or YAML) and decoded, errors
//! naming the file.

use std::path::Path;

use thiserror::Error;
use topoalign_kube_types::{DocumentError, read_document};

use crate::case::CaseFile;
use crate::error::InputError;
use crate::node::Usage;
use crate::pod::Pod;
use crate::simulate::SimError;

/// Why an input file cannot be used.
#[derive(Debug, Error)]
pub enum InputFileError {
    /// The file cannot be read or is not JSON/YAML.
    #[error(transparent)]
    Read(#[from] DocumentError),
    /// A case file whose fields are wrong.
    #[error("{path}: {error}")]
    Case {
        /// The file.
        path: String,
        /// What is wrong.
        error: SimError,
    },
    /// A manifest that is not a usable Pod.
    #[error("{path}: {error}")]
    Pod {
        /// The file.
        path: String,
        /// What is wrong.
        error: InputError,
    },
    /// A usage file of the wrong shape.
    #[error("{path}: expected {{gpus: [BDF...], nics: [BDF...], cpus: \"0-7\"}}: {error}")]
    Usage {
        /// The file.
        path: String,
        /// What did not match.
        error: serde_json::Error,
    },
}

fn name(path: &Path) -> String {
    path.display().to_string()
}

/// Reads a whole case (`--input`).
pub(crate) fn read_case(path: &Path) -> Result<CaseFile, InputFileError> {
    let doc = read_document(path)?;
    CaseFile::from_value(&doc).map_err(|error| InputFileError::Case {
        path: name(path),
        error,
    })
}

/// Reads a Pod manifest (`--pod`).
pub(crate) fn read_pod(path: &Path) -> Result<Pod, InputFileError> {
    let doc = read_document(path)?;
    Pod::from_manifest(&doc).map_err(|error| InputFileError::Pod {
        path: name(path),
        error,
    })
}

/// Reads the devices and CPUs already in use (`--used`).
pub(crate) fn read_usage(path: &Path) -> Result<Usage, InputFileError> {
    let doc = read_document(path)?;
    serde_json::from_value(doc).map_err(|error| InputFileError::Usage {
        path: name(path),
        error,
    })
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
    fn a_pod_and_a_usage_file_are_decoded() {
        let pod = file("spec:\n  containers:\n  - name: c\n");
        assert_eq!(read_pod(pod.path()).unwrap().containers.len(), 1);
        let used = file("gpus: [\"0000:11:00.0\"]\ncpus: \"0-3\"\n");
        assert_eq!(read_usage(used.path()).unwrap().gpus.len(), 1);
    }

    #[test]
    fn errors_name_the_file_and_what_was_expected() {
        let bad = file("gpus: 3\n");
        let p = bad.path().display().to_string();
        let e = read_usage(bad.path()).unwrap_err().to_string();
        assert!(
            e.starts_with(&format!("{p}: expected {{gpus: [BDF...]")),
            "{e}"
        );
        let e = read_pod(bad.path()).unwrap_err().to_string();
        assert!(e.starts_with(&format!("{p}: ")), "{e}");
        let e = read_case(Path::new("/nonexistent/case.json")).unwrap_err();
        assert!(matches!(e, InputFileError::Read(_)), "{e}");
    }
}
