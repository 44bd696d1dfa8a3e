//! Where prepare reads a claim's allocation: the [`ClaimSource`] trait (the kube-rs
//! implementation lives in the driver crate), a conversion from the API object, and an
//! in-memory source for tests.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::Mutex;

use k8s_openapi::api::resource::v1::ResourceClaim;
use tonic::Code;
use topoalign_dra::alloc::AllocatedDevice;

/// A boxed, sendable future (keeps [`ClaimSource`] usable as `dyn`).
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// A ResourceClaim's identity and allocation, reduced to what prepare needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClaimAllocation {
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
    /// UID.
    pub uid: String,
    /// `status.allocation.devices.results`, every driver's.
    pub results: Vec<AllocatedDevice>,
}

impl ClaimAllocation {
    /// Reads identity and allocation from the API object; a claim without an allocation
    /// is [`ClaimSourceError::NotAllocated`].
    pub fn from_resource_claim(claim: &ResourceClaim) -> Result<Self, ClaimSourceError> {
        let meta = &claim.metadata;
        let namespace = meta.namespace.clone().unwrap_or_default();
        let name = meta.name.clone().unwrap_or_default();
        let results = claim
            .status
            .as_ref()
            .and_then(|s| s.allocation.as_ref())
            .map(|a| {
                a.devices
                    .as_ref()
                    .and_then(|d| d.results.as_ref())
                    .map(|r| r.iter().map(AllocatedDevice::from).collect())
                    .unwrap_or_default()
            })
            .ok_or(ClaimSourceError::NotAllocated)?;
        Ok(Self {
            namespace,
            name,
            uid: meta.uid.clone().unwrap_or_default(),
            results,
        })
    }
}

/// Why a claim could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ClaimSourceError {
    /// No claim with this namespace and name.
    #[error("not found")]
    NotFound,
    /// A claim with this name exists but has another UID (deleted and recreated).
    #[error("found uid {found}, the kubelet asked for another; the claim was replaced")]
    UidMismatch {
        /// The UID found.
        found: String,
    },
    /// The claim has no `status.allocation`.
    #[error("not allocated (no status.allocation)")]
    NotAllocated,
    /// The API server could not be asked (network, RBAC, timeout).
    #[error("the API server could not be asked: {0}")]
    Unavailable(String),
}

impl ClaimSourceError {
    /// The gRPC status code for this failure.
    pub fn code(&self) -> Code {
        match self {
            ClaimSourceError::NotFound | ClaimSourceError::UidMismatch { .. } => Code::NotFound,
            ClaimSourceError::NotAllocated => Code::FailedPrecondition,
            ClaimSourceError::Unavailable(_) => Code::Unavailable,
        }
    }
}

/// Reads ResourceClaims (from the API server in the driver).
pub trait ClaimSource: Send + Sync + 'static {
    /// The claim `namespace/name`; an implementation must check that its UID is `uid`
    /// (or leave that to [`check_uid`]).
    fn get<'a>(
        &'a self,
        namespace: &'a str,
        name: &'a str,
        uid: &'a str,
    ) -> BoxFuture<'a, Result<ClaimAllocation, ClaimSourceError>>;
}

/// Refuses a claim whose UID is not the one asked for.
pub fn check_uid(claim: ClaimAllocation, uid: &str) -> Result<ClaimAllocation, ClaimSourceError> {
    if claim.uid == uid {
        Ok(claim)
    } else {
        Err(ClaimSourceError::UidMismatch { found: claim.uid })
    }
}

/// Claims kept in memory, keyed by namespace and name: for tests and benchmarks.
#[derive(Debug, Default)]
pub struct InMemoryClaims {
    claims: Mutex<HashMap<(String, String), ClaimAllocation>>,
}

impl InMemoryClaims {
    /// An empty source.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds or replaces a claim.
    pub fn insert(&self, claim: ClaimAllocation) {
        let key = (claim.namespace.clone(), claim.name.clone());
        if let Ok(mut m) = self.claims.lock() {
            m.insert(key, claim);
        }
    }

    /// Removes a claim.
    pub fn remove(&self, namespace: &str, name: &str) {
        if let Ok(mut m) = self.claims.lock() {
            m.remove(&(namespace.to_string(), name.to_string()));
        }
    }
}

impl ClaimSource for InMemoryClaims {
    fn get<'a>(
        &'a self,
        namespace: &'a str,
        name: &'a str,
        uid: &'a str,
    ) -> BoxFuture<'a, Result<ClaimAllocation, ClaimSourceError>> {
        let found = self
            .claims
            .lock()
            .map_err(|_| ClaimSourceError::Unavailable("claim store poisoned".into()))
            .and_then(|m| {
                m.get(&(namespace.to_string(), name.to_string()))
                    .cloned()
                    .ok_or(ClaimSourceError::NotFound)
            });
        Box::pin(async move { check_uid(found?, uid) })
    }
}
