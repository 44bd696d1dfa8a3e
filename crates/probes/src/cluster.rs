//! One-shot reads of the live cluster for commands that look at it once (`claims
//! --kubeconfig`, `explain pod`, `explain --all`): lists and gets through one client, each
//! error naming what was read and, when the server was not reached, the server.

use std::fmt::Debug;
use std::path::Path;

use k8s_openapi::NamespaceResourceScope;
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::api::resource::v1::{DeviceClass, ResourceClaim, ResourceSlice};
use kube::api::ListParams;
use kube::{Api, Resource};
use serde::de::DeserializeOwned;

use crate::process::{ClientError, Threads, kube_config, runtime};

/// Why a read of the live cluster failed.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    /// No runtime to read with.
    #[error("starting the async runtime")]
    Runtime(#[source] std::io::Error),
    /// No API client.
    #[error(transparent)]
    Client(#[from] ClientError),
    /// The API server answered with an error.
    #[error("reading {what}: {}", api_said(.source))]
    Api {
        /// What was read (`ResourceSlices`, `pod ml/train-0`).
        what: String,
        /// The API's answer (`kube::Error::Api`).
        #[source]
        source: kube::Error,
    },
    /// The API server was not reached.
    #[error("cannot reach the API server at {server} (reading {what}): {source}")]
    Unreachable {
        /// The server's URL.
        server: String,
        /// What was read.
        what: String,
        /// Why.
        #[source]
        source: kube::Error,
    },
    /// An object that must be there is not.
    #[error("{what} not found")]
    NotFound {
        /// The object.
        what: String,
    },
}

/// The API's message and code, as `reading …` says them.
fn api_said(e: &kube::Error) -> String {
    match e {
        kube::Error::Api(s) => format!("{} ({})", s.message, s.code),
        other => other.to_string(),
    }
}

/// An API client and the server it talks to (named when it cannot be reached).
#[derive(Clone)]
pub struct ClusterReader {
    client: kube::Client,
    server: String,
}

impl ClusterReader {
    /// The client of `kubeconfig` ([`kube_config`]: `None` infers one).
    pub async fn connect(kubeconfig: Option<&Path>) -> Result<Self, ReadError> {
        let config = kube_config(kubeconfig).await?;
        let server = config.cluster_url.to_string();
        let client = kube::Client::try_from(config).map_err(ClientError::Client)?;
        Ok(Self { client, server })
    }

    /// `e` as a [`ReadError`] of reading `what`.
    fn failed(&self, what: &str, e: kube::Error) -> ReadError {
        let what = what.to_string();
        match e {
            kube::Error::Api(_) => ReadError::Api { what, source: e },
            source => ReadError::Unreachable {
                server: self.server.clone(),
                what,
                source,
            },
        }
    }

    /// Every `K` (all namespaces) that `params` selects; `what` names them in errors.
    pub async fn list<K>(&self, what: &str, params: &ListParams) -> Result<Vec<K>, ReadError>
    where
        K: Resource + Clone + DeserializeOwned + Debug,
        K::DynamicType: Default,
    {
        let list = Api::<K>::all(self.client.clone()).list(params).await;
        Ok(list.map_err(|e| self.failed(what, e))?.items)
    }

    /// The cluster-scoped `K` named `name`, `None` when there is none.
    pub async fn get<K>(&self, name: &str, what: &str) -> Result<Option<K>, ReadError>
    where
        K: Resource + Clone + DeserializeOwned + Debug,
        K::DynamicType: Default,
    {
        let got = Api::<K>::all(self.client.clone()).get_opt(name).await;
        got.map_err(|e| self.failed(what, e))
    }

    /// The `K` named `name` in `namespace`; [`ReadError::NotFound`] when there is none.
    pub async fn get_in<K>(&self, namespace: &str, name: &str, what: &str) -> Result<K, ReadError>
    where
        K: Resource<Scope = NamespaceResourceScope> + Clone + DeserializeOwned + Debug,
        K::DynamicType: Default,
    {
        let got = Api::<K>::namespaced(self.client.clone(), namespace)
            .get_opt(name)
            .await;
        let not_found = || ReadError::NotFound { what: what.into() };
        got.map_err(|e| self.failed(what, e))?.ok_or_else(not_found)
    }

    /// The pod `namespace/name`.
    pub async fn pod(&self, namespace: &str, name: &str) -> Result<Pod, ReadError> {
        (self.get_in(namespace, name, &format!("pod {namespace}/{name}"))).await
    }

    /// What the devices of `pod` are judged on: nothing when it is not scheduled; else
    /// its ResourceClaims named `claims` (each must exist), then with claims the
    /// ResourceSlices of its node, every claim and every DeviceClass, without claims its
    /// Node (what a device-plugin node's agent wrote there).
    pub async fn pod_devices(&self, pod: &Pod, claims: &[&str]) -> Result<PodDevices, ReadError> {
        let mut out = PodDevices::default();
        let Some(node) = pod.spec.as_ref().and_then(|s| s.node_name.as_deref()) else {
            return Ok(out);
        };
        let ns = pod.metadata.namespace.as_deref().unwrap_or_default();
        let name = pod.metadata.name.as_deref().unwrap_or_default();
        for c in claims {
            let what = format!("ResourceClaim {ns}/{c} of pod {ns}/{name}");
            out.claims.push(self.get_in(ns, c, &what).await?);
        }
        if claims.is_empty() {
            out.node = self.get::<Node>(node, &format!("node {node}")).await?;
            return Ok(out);
        }
        let all = ListParams::default();
        let by_node = ListParams::default().fields(&format!("spec.nodeName={node}"));
        let what = format!("ResourceSlices of node {node}");
        out.slices = self.list(&what, &by_node).await?;
        out.others = self.list("ResourceClaims", &all).await?;
        out.classes = self.list("DeviceClasses", &all).await?;
        Ok(out)
    }
}

/// What [`ClusterReader::pod_devices`] read.
#[derive(Debug, Default)]
pub struct PodDevices {
    /// The pod's ResourceClaims, in the order asked.
    pub claims: Vec<ResourceClaim>,
    /// The ResourceSlices of its node.
    pub slices: Vec<ResourceSlice>,
    /// Every ResourceClaim (what else holds devices).
    pub others: Vec<ResourceClaim>,
    /// Every DeviceClass.
    pub classes: Vec<DeviceClass>,
    /// Its Node, when it has no claims.
    pub node: Option<Node>,
}

/// Every ResourceSlice, DeviceClass and ResourceClaim of a cluster, and its pods when
/// asked.
#[derive(Debug, Default)]
pub struct ClusterObjects {
    /// The ResourceSlices.
    pub slices: Vec<ResourceSlice>,
    /// The DeviceClasses.
    pub classes: Vec<DeviceClass>,
    /// The ResourceClaims.
    pub claims: Vec<ResourceClaim>,
    /// The pods (empty unless asked).
    pub pods: Vec<Pod>,
}

/// Reads [`ClusterObjects`] through `kubeconfig` (`None`: in-cluster, `$KUBECONFIG`,
/// `~/.kube/config`), the pods when `pods`, on a runtime of its own (blocking).
pub fn read_cluster(kubeconfig: Option<&Path>, pods: bool) -> Result<ClusterObjects, ReadError> {
    let rt = runtime(Threads::PerCpu).map_err(ReadError::Runtime)?;
    rt.block_on(async {
        let r = ClusterReader::connect(kubeconfig).await?;
        let all = ListParams::default();
        Ok(ClusterObjects {
            slices: r.list("ResourceSlices", &all).await?,
            classes: r.list("DeviceClasses", &all).await?,
            claims: r.list("ResourceClaims", &all).await?,
            pods: match pods {
                true => r.list("pods", &all).await?,
                false => Vec::new(),
            },
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unreachable_server_is_named_with_what_was_read() {
        let dir = std::env::temp_dir().join(format!("topoalign-probes-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let kc = dir.join("kubeconfig");
        // Port 1 on loopback: nothing listens there.
        let text = "apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: \"http://127.0.0.1:1\"}}]\nusers: [{name: u, user: {}}]\ncontexts: [{name: x, context: {cluster: c, user: u}}]\ncurrent-context: x\n";
        std::fs::write(&kc, text).unwrap();
        let e = read_cluster(Some(&kc), false).unwrap_err();
        let _ = std::fs::remove_dir_all(&dir);
        assert!(matches!(e, ReadError::Unreachable { .. }), "{e:?}");
        let line = e.to_string();
        assert!(
            line.starts_with(
                "cannot reach the API server at http://127.0.0.1:1/ (reading ResourceSlices): "
            ),
            "{line}"
        );
        assert!(std::error::Error::source(&e).is_some(), "kube's error kept");
    }

    #[test]
    fn a_missing_kubeconfig_is_the_client_error() {
        let e = read_cluster(Some(Path::new("/nonexistent/kubeconfig")), true).unwrap_err();
        assert!(
            matches!(e, ReadError::Client(ClientError::Kubeconfig { .. })),
            "{e:?}"
        );
    }

    #[test]
    fn the_api_s_answer_is_said_with_its_code() {
        let status = kube::core::Status::failure("forbidden: User \"x\" cannot list", "Forbidden")
            .with_code(403);
        let e = ReadError::Api {
            what: "ResourceSlices".into(),
            source: kube::Error::Api(Box::new(status)),
        };
        assert_eq!(
            e.to_string(),
            "reading ResourceSlices: forbidden: User \"x\" cannot list (403)"
        );
    }
}
