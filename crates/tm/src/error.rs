//! Errors of the simulator's input (the pod, usage or resource map is malformed). Settings
//! the kubelet refuses are [`topoalign_kube_types::kubelet_settings::ConfigError`].

use thiserror::Error;

/// A malformed pod, usage, resource map or case.
#[derive(Debug, Clone, Error, PartialEq, Eq)]
pub enum InputError {
    /// A field with a bad value.
    #[error("{field}: {reason}")]
    Field {
        /// The field path, e.g. `spec.containers[0].resources.limits.cpu`.
        field: String,
        /// What is wrong and what was expected.
        reason: String,
    },
    /// A resource the map does not know.
    #[error(
        "{field}: unknown resource `{name}`: map it to devices with --resource {name}=gpus|gpus:<vendor>|vfs|vfs:<N>|pfs"
    )]
    UnknownResource {
        /// Where it was requested.
        field: String,
        /// The resource name.
        name: String,
    },
}

impl InputError {
    /// Shorthand for a field error.
    pub fn field(field: impl Into<String>, reason: impl Into<String>) -> Self {
        InputError::Field {
            field: field.into(),
            reason: reason.into(),
        }
    }
}
