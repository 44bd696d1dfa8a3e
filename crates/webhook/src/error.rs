//! The crate's errors: each names the file, field or part of the request that is wrong
//! and what was expected, and keeps its source.

use std::path::PathBuf;

use thiserror::Error;

/// A resource name table that cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("{field}: `{name}` {why}")]
pub struct NamesError {
    /// The field (`gpus`, `targets.pair`, `sriovNetworks`, …).
    pub field: String,
    /// The name.
    pub name: String,
    /// What is wrong.
    pub why: String,
}

impl NamesError {
    pub(crate) fn bad(field: &str, name: &str, why: String) -> Self {
        let why = if why.starts_with("is ") || why.starts_with("named") {
            why
        } else {
            format!("is not valid: {why}")
        };
        NamesError {
            field: field.into(),
            name: name.into(),
            why,
        }
    }
}

/// The `--config` file cannot be used.
#[derive(Debug, Error)]
pub enum ConfigError {
    /// It cannot be read or parsed.
    #[error(transparent)]
    Read(#[from] topoalign_kube_types::DocumentError),
    /// A field has the wrong type or is not one the file has.
    #[error("{}: {path}: {source}", file.display())]
    Field {
        /// The file.
        file: PathBuf,
        /// The field's path (`targets.pair`).
        path: String,
        /// The decoder's message.
        source: serde_json::Error,
    },
    /// A name given by a flag is not valid (the field is the flag).
    #[error(transparent)]
    Flags(NamesError),
    /// A name in it is not valid.
    #[error("{}: {source}", file.display())]
    Names {
        /// The file.
        file: PathBuf,
        /// What is wrong.
        source: NamesError,
    },
}

/// A request body that is no AdmissionReview the webhook can answer (no `request.uid` to
/// answer to): the server answers 400 with this message.
#[derive(Debug, Error)]
pub enum NotAReview {
    /// Not JSON.
    #[error("the request body is not JSON: {0}")]
    Json(#[source] serde_json::Error),
    /// JSON without `request.uid`.
    #[error(
        "the request body is not an AdmissionReview: {0} (expected {{\"apiVersion\": \"admission.k8s.io/v1\", \"kind\": \"AdmissionReview\", \"request\": {{\"uid\": …}}}})"
    )]
    Shape(&'static str),
}

/// The serving certificate or key cannot be used.
#[derive(Debug, Error)]
pub enum TlsError {
    /// A file cannot be read.
    #[error("reading {}: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// A file holds no usable PEM of the kind expected.
    #[error("{}: {what}", path.display())]
    Pem {
        /// The file.
        path: PathBuf,
        /// What is missing or wrong.
        what: String,
    },
    /// The key does not fit the certificate, or rustls refuses them.
    #[error("{} with {}: {source}", cert.display(), key.display())]
    Pair {
        /// The certificate file.
        cert: PathBuf,
        /// The key file.
        key: PathBuf,
        /// rustls's reason.
        source: rustls::Error,
    },
    /// rustls refuses the server configuration.
    #[error("configuring TLS: {0}")]
    Config(#[source] rustls::Error),
}

/// The server cannot start.
#[derive(Debug, Error)]
pub enum ServeError {
    /// The certificate and key cannot be loaded.
    #[error(transparent)]
    Tls(#[from] TlsError),
    /// The listen address cannot be bound.
    #[error("listening on {addr}: {source}")]
    Bind {
        /// The address.
        addr: std::net::SocketAddr,
        /// Why.
        source: std::io::Error,
    },
    /// Serving failed.
    #[error("serving: {0}")]
    Serve(#[source] std::io::Error),
}
