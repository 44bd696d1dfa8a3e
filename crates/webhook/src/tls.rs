//! The serving certificate: read from a Secret's files (`tls.crt`, `tls.key`, as a
//! Secret of type `kubernetes.io/tls` or cert-manager's Certificate mounts them), read
//! again when they change, and handed to each TLS handshake.
//!
//! A changed pair that cannot be used (a half-written file, a key of another certificate)
//! is not taken: the previous one keeps serving, the failure is counted and logged, and
//! `/readyz` notes it, so a bad rotation never takes the webhook down.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, RwLock};
use std::time::SystemTime;

use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;

use crate::error::TlsError;

/// The certificate and key files.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsFiles {
    /// The PEM certificate chain (`tls.crt`), the server's certificate first.
    pub cert: PathBuf,
    /// The PEM private key (`tls.key`: PKCS#8, PKCS#1 or SEC1).
    pub key: PathBuf,
}

impl TlsFiles {
    /// `tls.crt` and `tls.key` in `dir` (a mounted Secret).
    pub fn in_dir(dir: &Path) -> Self {
        TlsFiles {
            cert: dir.join("tls.crt"),
            key: dir.join("tls.key"),
        }
    }
}

fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

fn read(path: &Path) -> Result<Vec<u8>, TlsError> {
    std::fs::read(path).map_err(|source| TlsError::Read {
        path: path.to_path_buf(),
        source,
    })
}

/// A certified key from the files' bytes.
fn certified(files: &TlsFiles, cert: &[u8], key: &[u8]) -> Result<CertifiedKey, TlsError> {
    let pem = |path: &Path, what: String| TlsError::Pem {
        path: path.to_path_buf(),
        what,
    };
    let chain = CertificateDer::pem_slice_iter(cert)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| pem(&files.cert, format!("not a PEM certificate chain: {e}")))?;
    if chain.is_empty() {
        return Err(pem(
            &files.cert,
            "no CERTIFICATE block (expected a PEM certificate chain)".into(),
        ));
    }
    let key = PrivateKeyDer::from_pem_slice(key).map_err(|e| {
        pem(
            &files.key,
            format!("no usable PEM private key (PKCS#8, PKCS#1 or SEC1): {e}"),
        )
    })?;
    CertifiedKey::from_der(chain, key, &provider()).map_err(|source| TlsError::Pair {
        cert: files.cert.clone(),
        key: files.key.clone(),
        source,
    })
}

/// Reads the pair once.
pub fn load(files: &TlsFiles) -> Result<CertifiedKey, TlsError> {
    certified(files, &read(&files.cert)?, &read(&files.key)?)
}

/// What a re-read found.
#[derive(Debug)]
pub enum Reread {
    /// The files hold what is served.
    Same,
    /// A new pair is served from now on.
    Reloaded,
    /// The files changed but cannot be used: the previous pair keeps serving.
    Failed(TlsError),
}

/// The pair being served, read again on [`Certificates::reread`].
#[derive(Debug)]
pub struct Certificates {
    files: TlsFiles,
    current: RwLock<Arc<CertifiedKey>>,
    /// The bytes the current pair (or the last failure) was read from.
    seen: Mutex<(Vec<u8>, Vec<u8>)>,
    /// The last re-read that failed, if the files still hold it.
    failing: Mutex<Option<String>>,
    /// When the current pair was loaded.
    loaded_at: RwLock<SystemTime>,
}

impl Certificates {
    /// Reads the pair; fails when it cannot be used.
    pub fn load(files: TlsFiles) -> Result<Self, TlsError> {
        let (cert, key) = (read(&files.cert)?, read(&files.key)?);
        let ck = certified(&files, &cert, &key)?;
        Ok(Certificates {
            files,
            current: RwLock::new(Arc::new(ck)),
            seen: Mutex::new((cert, key)),
            failing: Mutex::new(None),
            loaded_at: RwLock::new(SystemTime::now()),
        })
    }

    /// Reads the files again; takes a changed pair that can be used.
    pub fn reread(&self) -> Reread {
        let (cert, key) = match (read(&self.files.cert), read(&self.files.key)) {
            (Ok(c), Ok(k)) => (c, k),
            (Err(e), _) | (_, Err(e)) => return self.failed(e),
        };
        {
            let seen = self.seen.lock().unwrap_or_else(|p| p.into_inner());
            if seen.0 == cert && seen.1 == key {
                return Reread::Same;
            }
        }
        match certified(&self.files, &cert, &key) {
            Ok(ck) => {
                *self.current.write().unwrap_or_else(|p| p.into_inner()) = Arc::new(ck);
                *self.seen.lock().unwrap_or_else(|p| p.into_inner()) = (cert, key);
                *self.failing.lock().unwrap_or_else(|p| p.into_inner()) = None;
                *self.loaded_at.write().unwrap_or_else(|p| p.into_inner()) = SystemTime::now();
                Reread::Reloaded
            }
            Err(e) => self.failed(e),
        }
    }

    fn failed(&self, e: TlsError) -> Reread {
        *self.failing.lock().unwrap_or_else(|p| p.into_inner()) = Some(e.to_string());
        Reread::Failed(e)
    }

    /// Why the files on disk are not what is served, if they are not.
    pub fn failing(&self) -> Option<String> {
        self.failing
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// When the served pair was loaded.
    pub fn loaded_at(&self) -> SystemTime {
        *self.loaded_at.read().unwrap_or_else(|p| p.into_inner())
    }

    /// The rustls configuration that serves the current pair over HTTP/1.1 (the API
    /// server's webhook client asks for nothing else: `pkg/util/webhook/client.go` sets
    /// `NextProtos` to `http/1.1`, k8s#75791).
    pub fn server_config(self: &Arc<Self>) -> Result<rustls::ServerConfig, TlsError> {
        let resolver: Arc<dyn ResolvesServerCert> = self.clone();
        let mut c = rustls::ServerConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .map_err(TlsError::Config)?
            .with_no_client_auth()
            .with_cert_resolver(resolver);
        c.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(c)
    }
}

impl ResolvesServerCert for Certificates {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(
            self.current
                .read()
                .unwrap_or_else(|p| p.into_inner())
                .clone(),
        )
    }
}
