//! The DRA path's watchers: kube-rs reflectors over `resource.k8s.io/v1` ResourceSlices
//! (every driver's: claims of NVIDIA's GPU driver and dranet are judged too; the state
//! keeps those of the drivers it is told to, [`DraState::keep_drivers`]), ResourceClaims,
//! ResourceClaimTemplates
//! and DeviceClasses, applied to [`DraState`]; and over the Pods waiting for a node
//! (`spec.nodeName` unset), kept in [`DraShared`] to weigh room for them. The DRA side is
//! ready once the four DRA kinds have listed (the waiting pods only refine the
//! priorities); a cluster without the API (or without the RBAC to read it) runs without
//! the DRA path, said once in the log.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};

use futures::{Stream, StreamExt};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::resource::v1::{
    DeviceClass, ResourceClaim, ResourceClaimTemplate, ResourceSlice,
};
use kube::api::{Api, ListParams};
use kube::runtime::reflector::{self, Store, reflector};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, Resource, ResourceExt};

use crate::dra::shared::DraShared;
use crate::dra::state::{DraState, key_of};

const KINDS: u8 = 4;

/// Runs the DRA watchers until the process ends. When the API cannot be read, logs why,
/// marks the DRA side ready (nothing to wait for) and returns.
pub(crate) async fn run(client: Client, dra: Arc<DraShared>) {
    let slices: Api<ResourceSlice> = Api::all(client.clone());
    if let Err(e) = slices.list_metadata(&ListParams::default().limit(1)).await {
        tracing::warn!(error = %e, "resource.k8s.io/v1 ResourceSlices cannot be listed (no DRA API, or no RBAC for it); pods with ResourceClaims get neutral scores");
        dra.set_ready();
        return;
    }
    let synced = Arc::new(AtomicU8::new(0));
    let done = {
        let (dra, synced) = (dra.clone(), synced.clone());
        move |bit: u8| {
            let now = synced.fetch_or(bit, Ordering::SeqCst) | bit;
            if now.count_ones() as u8 >= KINDS && !dra.is_ready() {
                dra.set_ready();
                let st = dra.read();
                tracing::info!(
                    nodes = st.node_count(),
                    claims = st.claim_count(),
                    held = st.held_count(),
                    "DRA lists done; ready"
                );
            }
        }
    };

    // One field selector can name one driver only: every slice is watched, the state
    // keeps the drivers it is told to.
    let cfg = watcher::Config::default();
    let (d, f) = (dra.clone(), done.clone());
    let t1 = tokio::spawn(watch(slices, cfg, move |ev| {
        let mut st = d.write();
        match ev {
            Ev::Apply(s) => st.apply_slice(&s),
            Ev::Delete(s) => st.delete_slice(&s.name_any()),
            Ev::Synced(all) => {
                st.retain_slices(&all.iter().map(|s| s.name_any()).collect());
                drop(st);
                f(1);
            }
        }
    }));
    let (d, f) = (dra.clone(), done.clone());
    let t2 = tokio::spawn(watch(
        Api::<ResourceClaim>::all(client.clone()),
        watcher::Config::default(),
        move |ev| {
            let mut st = d.write();
            match ev {
                Ev::Apply(c) => st.apply_claim(&c),
                Ev::Delete(c) => st.delete_claim(&key_of(&c)),
                Ev::Synced(all) => {
                    st.retain_claims(&all.iter().map(|c| key_of(&**c)).collect());
                    drop(st);
                    f(2);
                }
            }
        },
    ));
    let (d, f) = (dra.clone(), done.clone());
    let t3 = tokio::spawn(watch(
        Api::<ResourceClaimTemplate>::all(client.clone()),
        watcher::Config::default(),
        move |ev| {
            let mut st = d.write();
            match ev {
                Ev::Apply(t) => st.apply_template(&t),
                Ev::Delete(t) => st.delete_template(&key_of(&t)),
                Ev::Synced(all) => {
                    st.retain_templates(&all.iter().map(|t| key_of(&**t)).collect());
                    drop(st);
                    f(4);
                }
            }
        },
    ));
    let d = dra.clone();
    let pods = tokio::spawn(watch(
        Api::<Pod>::all(client.clone()),
        watcher::Config::default()
            .fields("spec.nodeName=,status.phase!=Succeeded,status.phase!=Failed"),
        move |ev| match ev {
            Ev::Apply(p) => d.apply_pending(&p),
            Ev::Delete(p) => d.delete_pending(&p),
            Ev::Synced(all) => {
                d.retain_pending(&all.iter().filter_map(|p| p.metadata.uid.clone()).collect());
                tracing::info!(
                    waiting = d.waiting_count(),
                    "pods waiting for a node listed"
                );
            }
        },
    ));
    let (d, f) = (dra.clone(), done);
    let t4 = tokio::spawn(watch(
        Api::<DeviceClass>::all(client),
        watcher::Config::default(),
        move |ev| {
            let mut st: std::sync::RwLockWriteGuard<'_, DraState> = d.write();
            match ev {
                Ev::Apply(c) => st.apply_class(&c),
                Ev::Delete(c) => st.delete_class(&c.name_any()),
                Ev::Synced(all) => {
                    let live: BTreeSet<String> = all.iter().map(|c| c.name_any()).collect();
                    st.retain_classes(&live);
                    drop(st);
                    f(8);
                }
            }
        },
    ));
    let _ = futures::future::join_all([t1, t2, t3, t4, pods]).await;
}

/// One event: an object set or gone, or the full content after a (re-)list.
enum Ev<K> {
    Apply(K),
    Delete(K),
    Synced(Vec<Arc<K>>),
}

/// A reflector over `api` whose events go to `handle`; watch errors are logged and
/// retried with backoff.
async fn watch<K, F>(api: Api<K>, cfg: watcher::Config, handle: F)
where
    K: Resource + Clone + std::fmt::Debug + serde::de::DeserializeOwned + Send + Sync + 'static,
    K::DynamicType: Eq + std::hash::Hash + Clone + Default,
    F: FnMut(Ev<K>),
{
    let (store, writer) = reflector::store::<K>();
    let stream = reflector(writer, watcher(api, cfg).default_backoff());
    consume(stream, store, handle).await;
}

async fn consume<K, S, F>(stream: S, store: Store<K>, mut handle: F)
where
    K: Resource + Clone + 'static,
    K::DynamicType: Eq + std::hash::Hash + Clone,
    S: Stream<Item = Result<watcher::Event<K>, watcher::Error>>,
    F: FnMut(Ev<K>),
{
    let mut stream = std::pin::pin!(stream);
    while let Some(item) = stream.next().await {
        match item {
            Ok(watcher::Event::Apply(k) | watcher::Event::InitApply(k)) => handle(Ev::Apply(k)),
            Ok(watcher::Event::Delete(k)) => handle(Ev::Delete(k)),
            Ok(watcher::Event::InitDone) => handle(Ev::Synced(store.state())),
            Ok(watcher::Event::Init) => {}
            Err(e) => tracing::warn!(error = %e, "DRA watch error; retrying with backoff"),
        }
    }
}
