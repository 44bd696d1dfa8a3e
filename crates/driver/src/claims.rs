//! The kubelet plugin's [`ClaimSource`] backed by the API server: reads the
//! ResourceClaim the kubelet names and hands its allocation to prepare.

use k8s_openapi::api::resource::v1::ResourceClaim;
use kube::Client;
use kube::api::Api;
use topoalign_kubelet_plugin::check_uid;
use topoalign_kubelet_plugin::{BoxFuture, ClaimAllocation, ClaimSource, ClaimSourceError};

/// Reads ResourceClaims with kube-rs (needs `get` on `resourceclaims` in every namespace
/// whose pods may run on this node).
#[derive(Clone)]
pub(crate) struct KubeClaims {
    client: Client,
}

impl std::fmt::Debug for KubeClaims {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KubeClaims").finish_non_exhaustive()
    }
}

impl KubeClaims {
    /// A source using `client`.
    pub(crate) fn new(client: Client) -> Self {
        KubeClaims { client }
    }
}

impl ClaimSource for KubeClaims {
    fn get<'a>(
        &'a self,
        namespace: &'a str,
        name: &'a str,
        uid: &'a str,
    ) -> BoxFuture<'a, Result<ClaimAllocation, ClaimSourceError>> {
        Box::pin(async move {
            let api: Api<ResourceClaim> = Api::namespaced(self.client.clone(), namespace);
            let claim = api
                .get_opt(name)
                .await
                .map_err(|e| {
                    ClaimSourceError::Unavailable(format!(
                        "reading ResourceClaim {namespace}/{name}: {e}"
                    ))
                })?
                .ok_or(ClaimSourceError::NotFound)?;
            check_uid(ClaimAllocation::from_resource_claim(&claim)?, uid)
        })
    }
}
