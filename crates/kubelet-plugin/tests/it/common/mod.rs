//! Shared test helpers: an inventory from a built-in profile, claims, a served plugin and
//! tonic clients over its unix sockets.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use hyper_util::rt::TokioIo;
use tokio::net::UnixStream;
use tonic::transport::{Channel, Endpoint, Uri};
use topoalign_dra::{DRIVER_NAME, alloc::AllocatedDevice, publish::Inventory};
use topoalign_kubelet_plugin::pb::dra_v1 as dra;
use topoalign_kubelet_plugin::{ClaimAllocation, InMemoryClaims, Plugin, PluginConfig};

pub(crate) const NODE: &str = "node-a";

pub(crate) fn inventory() -> Inventory {
    Inventory::from_topology(&topoalign_profiles::get("mi300x-8").unwrap())
}

pub(crate) fn result(request: &str, device: &str) -> AllocatedDevice {
    AllocatedDevice {
        request: request.into(),
        driver: DRIVER_NAME.into(),
        pool: NODE.into(),
        device: device.into(),
    }
}

pub(crate) fn claim(uid: &str, results: Vec<AllocatedDevice>) -> ClaimAllocation {
    ClaimAllocation {
        namespace: "ns".into(),
        name: format!("claim-{uid}"),
        uid: uid.into(),
        results,
    }
}

pub(crate) fn claim_ref(c: &ClaimAllocation) -> dra::Claim {
    dra::Claim {
        namespace: c.namespace.clone(),
        uid: c.uid.clone(),
        name: c.name.clone(),
    }
}

/// A UUID-shaped uid from a small number.
pub(crate) fn uid(n: u32) -> String {
    format!("00000000-0000-4000-8000-{n:012}")
}

/// A running plugin in a temporary root.
pub(crate) struct Served {
    pub root: tempfile::TempDir,
    pub config: PluginConfig,
    pub plugin: Plugin,
    pub claims: Arc<InMemoryClaims>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    task: Option<tokio::task::JoinHandle<Result<(), topoalign_kubelet_plugin::PluginError>>>,
}

impl Served {
    pub(crate) async fn start() -> Served {
        let root = tempfile::tempdir().unwrap();
        let config = PluginConfig::under(NODE, root.path());
        Served::start_in(root, config, inventory()).await
    }

    /// A plugin with this root, configuration and inventory (a restart: the root of a
    /// stopped one, see [`Served::stop_keeping_root`]).
    pub(crate) async fn start_in(
        root: tempfile::TempDir,
        config: PluginConfig,
        inventory: Inventory,
    ) -> Served {
        let claims = Arc::new(InMemoryClaims::new());
        let plugin = Plugin::new(config.clone(), inventory, claims.clone()).unwrap();
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let task = tokio::spawn(plugin.clone().serve(async move {
            let _ = rx.await;
        }));
        for p in [config.registration_socket(), config.dra_socket()] {
            wait_for(&p).await;
        }
        Served {
            root,
            config,
            plugin,
            claims,
            stop: Some(tx),
            task: Some(task),
        }
    }

    pub(crate) async fn stop(mut self) {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
        if let Some(t) = self.task.take() {
            t.await.unwrap().unwrap();
        }
        assert!(!self.config.registration_socket().exists());
        assert!(!self.config.dra_socket().exists());
    }

    /// Stops the plugin and hands back its root, files kept.
    pub(crate) async fn stop_keeping_root(mut self) -> tempfile::TempDir {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
        if let Some(t) = self.task.take() {
            t.await.unwrap().unwrap();
        }
        let empty = tempfile::tempdir().unwrap();
        std::mem::replace(&mut self.root, empty)
    }

    pub(crate) async fn dra(&self) -> dra::dra_plugin_client::DraPluginClient<Channel> {
        dra::dra_plugin_client::DraPluginClient::new(channel(&self.config.dra_socket()).await)
    }

    pub(crate) fn cdi_file(&self, uid: &str) -> PathBuf {
        self.config
            .cdi_dir
            .join(topoalign_dra::prepare::cdi_file_name(uid))
    }
}

pub(crate) async fn wait_for(p: &Path) {
    for _ in 0..500 {
        if p.exists() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("{} never appeared", p.display());
}

/// A tonic channel over a unix socket (the authority is the placeholder `localhost`, as
/// the kubelet's DRA client sends).
pub(crate) async fn channel(path: &Path) -> Channel {
    let path = path.to_path_buf();
    Endpoint::try_from("http://localhost")
        .unwrap()
        .connect_with_connector(tower::service_fn(move |_: Uri| {
            let p = path.clone();
            async move { UnixStream::connect(p).await.map(TokioIo::new) }
        }))
        .await
        .unwrap()
}

pub(crate) fn cdi_files(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}
