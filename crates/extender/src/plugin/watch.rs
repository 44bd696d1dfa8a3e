//! The device-plugin wing's watchers: kube-rs watchers and reflector stores over Nodes,
//! the agents' NodeResourceTopology objects and bound pods, turned into [`ClusterState`]
//! updates. They know nothing of the server or its metrics: the [`NodeFeed`] they get
//! carries the state, and a [`Refresh`] callback the server fills with its gauges.
//! No request ever lists anything: handlers only read the state.

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, SystemTime};

use futures::{Stream, StreamExt};
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, DynamicObject, ListParams};
use kube::runtime::reflector::{self, Store, reflector, store::Writer};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, Resource, ResourceExt};
use serde_json::Value;
use tokio::sync::Notify;
use topoalign_kube_types::nrt::nrt_resource;
use topoalign_mig::{NrtAmount, node_mig_with_nrt, nrt_mig_counts};
use topoalign_tm::ResourceMap;

use crate::plugin::nodeinfo::{Interner, from_node_labels, from_nrt};
use crate::plugin::podreq::pod_request;
use crate::plugin::state::ClusterState;

/// Raw inputs per node name, so that a node's entry can be rebuilt from whichever exist.
/// What the device-plugin watchers update, and nothing of the server: the node state,
/// the resource map bound pods are read with, the readiness flag, the signal that wakes
/// the background warmer, and what to refresh every few seconds.
#[derive(Debug, Clone)]
pub struct NodeFeed {
    /// The node state the watchers fill.
    pub state: Arc<RwLock<ClusterState>>,
    /// The resource map bound pods are read with.
    pub resources: ResourceMap,
    /// Set once the watchers have listed everything.
    pub ready: Arc<AtomicBool>,
    /// Notified on every change (wakes the background warmer).
    pub changed: Arc<Notify>,
    /// Run every few seconds with the time (the server refreshes its state gauges).
    pub refresh: Refresh,
}

/// A callback the watchers run every few seconds with the time.
#[derive(Clone)]
pub struct Refresh(pub Arc<dyn Fn(SystemTime) + Send + Sync>);

impl fmt::Debug for Refresh {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Refresh(..)")
    }
}

impl NodeFeed {
    fn update_gauges(&self, now: SystemTime) {
        (self.refresh.0)(now);
    }
}

#[derive(Debug, Default)]
struct Inputs {
    nodes: HashMap<String, Value>,
    nrts: HashMap<String, Value>,
    interner: Interner,
}

struct Shared {
    feed: NodeFeed,
    inputs: Mutex<Inputs>,
    synced: AtomicU8,
    expected: u8,
}

impl Shared {
    fn state(&self) -> std::sync::RwLockWriteGuard<'_, ClusterState> {
        self.feed.state.write().unwrap_or_else(|p| p.into_inner())
    }

    /// Rebuilds one node's entry: its NRT when there is one, else its labels, else
    /// nothing (not a topoalign node).
    fn rebuild(&self, name: &str) {
        let mut inputs = self.inputs.lock().unwrap_or_else(|p| p.into_inner());
        let Inputs {
            nodes,
            nrts,
            interner,
        } = &mut *inputs;
        // MIG devices: the Node's GFD labels and allocatable, with what its NRT says is
        // free now (`available`) over them.
        let free = nrts
            .get(name)
            .map(|n| nrt_mig_counts(n, NrtAmount::Available));
        let free = free.filter(|c| !c.is_empty());
        let mig = match nodes.get(name).and_then(|node| {
            node_mig_with_nrt(name, Some(node), free.as_ref(), NrtAmount::Available)
        }) {
            Some(Ok(m)) => Some(m),
            Some(Err(e)) => {
                tracing::warn!(node = name, error = %e, "MIG labels unusable; the node is judged without them");
                None
            }
            None => None,
        };
        let entry = match (nodes.get(name), nrts.get(name)) {
            (None, _) => None,
            (Some(_), Some(nrt)) => Some(from_nrt(nrt, interner)),
            (Some(node), None) => from_node_labels(node, interner),
        };
        drop(inputs);
        let mut state = self.state();
        state.set_mig(name, mig);
        match entry {
            Some(e) => {
                if let crate::plugin::node::NodeEntry::Broken(why) = &e {
                    tracing::warn!(node = name, %why, "node data unusable; the node gets a neutral score");
                }
                state.upsert_node(name, e);
            }
            None => state.remove_node(name),
        }
    }

    fn mark_synced(&self, bit: u8) {
        let now = self.synced.fetch_or(bit, Ordering::SeqCst) | bit;
        if now.count_ones() as u8 >= self.expected {
            self.feed.ready.store(true, Ordering::SeqCst);
            tracing::info!("initial lists done; ready");
        }
    }
}

/// Why the watchers could not start.
#[derive(Debug, thiserror::Error)]
pub enum WatchError {
    /// The API server refused a first call.
    #[error("checking {what}: {source}")]
    Probe {
        /// What was checked.
        what: &'static str,
        /// The error.
        source: kube::Error,
    },
}

/// Runs the watchers until the process ends: Nodes, NodeResourceTopology objects (when
/// the CRD is installed) and bound pods; marks the app ready after their first lists,
/// and expires assumed allocations every few seconds.
pub(crate) async fn run(client: Client, feed: NodeFeed) -> Result<(), WatchError> {
    let nodes: Api<Node> = Api::all(client.clone());
    nodes
        .list_metadata(&ListParams::default().limit(1))
        .await
        .map_err(|source| WatchError::Probe {
            what: "access to Nodes",
            source,
        })?;
    let nrt_api: Api<DynamicObject> = Api::all_with(client.clone(), &nrt_resource());
    let nrt_enabled = match nrt_api.list_metadata(&ListParams::default().limit(1)).await {
        Ok(_) => true,
        Err(e) => {
            tracing::warn!(error = %e, "NodeResourceTopology objects cannot be listed (CRD not installed?); using node labels only");
            false
        }
    };
    let pods: Api<Pod> = Api::all(client);
    let shared = Arc::new(Shared {
        feed,
        inputs: Mutex::new(Inputs::default()),
        synced: AtomicU8::new(0),
        expected: if nrt_enabled { 3 } else { 2 },
    });

    let (node_store, node_writer) = reflector::store::<Node>();
    let node_stream = reflector(
        node_writer,
        watcher(nodes, watcher::Config::default()).default_backoff(),
    );
    let s = shared.clone();
    let node_task = tokio::spawn(consume(node_stream, node_store, move |ev, warm| {
        node_event(&s, ev);
        if warm {
            s.feed.changed.notify_one();
        }
    }));

    let nrt_task = if nrt_enabled {
        let writer = Writer::<DynamicObject>::new(nrt_resource());
        let store = writer.as_reader();
        let stream = reflector(
            writer,
            watcher(nrt_api, watcher::Config::default()).default_backoff(),
        );
        let s = shared.clone();
        Some(tokio::spawn(consume(stream, store, move |ev, warm| {
            nrt_event(&s, ev);
            if warm {
                s.feed.changed.notify_one();
            }
        })))
    } else {
        None
    };

    let (pod_store, pod_writer) = reflector::store::<Pod>();
    let cfg = watcher::Config::default()
        .fields("spec.nodeName!=,status.phase!=Succeeded,status.phase!=Failed");
    let pod_stream = reflector(pod_writer, watcher(pods, cfg).default_backoff());
    let s = shared.clone();
    let pod_task = tokio::spawn(consume(pod_stream, pod_store, move |ev, warm| {
        pod_event(&s, ev);
        if warm {
            s.feed.changed.notify_one();
        }
    }));

    let s = shared.clone();
    let ticker = tokio::spawn(async move {
        let mut t = tokio::time::interval(Duration::from_secs(5));
        loop {
            t.tick().await;
            s.state().expire(SystemTime::now());
            s.feed.changed.notify_one();
            s.feed.update_gauges(SystemTime::now());
        }
    });

    let _ = node_task.await;
    if let Some(t) = nrt_task {
        let _ = t.await;
    }
    let _ = pod_task.await;
    ticker.abort();
    Ok(())
}

/// What one event means, with the store's full content at `InitDone`. The handler's
/// second argument says whether to re-judge changed nodes now (not during a first list:
/// at its end).
enum Ev<K> {
    Apply(K),
    Delete(K),
    Synced(Vec<Arc<K>>),
}

async fn consume<K, S, F>(stream: S, store: Store<K>, mut handle: F)
where
    K: Resource + Clone + 'static,
    K::DynamicType: Eq + std::hash::Hash + Clone,
    S: Stream<Item = Result<watcher::Event<K>, watcher::Error>>,
    F: FnMut(Ev<K>, bool),
{
    let mut stream = std::pin::pin!(stream);
    while let Some(item) = stream.next().await {
        match item {
            Ok(watcher::Event::Apply(k)) => handle(Ev::Apply(k), true),
            Ok(watcher::Event::InitApply(k)) => handle(Ev::Apply(k), false),
            Ok(watcher::Event::Delete(k)) => handle(Ev::Delete(k), true),
            Ok(watcher::Event::InitDone) => handle(Ev::Synced(store.state()), true),
            Ok(watcher::Event::Init) => {}
            Err(e) => tracing::warn!(error = %e, "watch error; retrying with backoff"),
        }
    }
}

const NODES_SYNCED: u8 = 1;
const NRTS_SYNCED: u8 = 2;
const PODS_SYNCED: u8 = 4;

fn to_value<K: serde::Serialize>(k: &K) -> Value {
    serde_json::to_value(k).unwrap_or(Value::Null)
}

fn node_event(s: &Shared, ev: Ev<Node>) {
    keyed_event(
        s,
        ev,
        |i| &mut i.nodes,
        |n| serde_json::json!({"metadata": to_value(&n.metadata)}),
        NODES_SYNCED,
    );
}

fn nrt_event(s: &Shared, ev: Ev<DynamicObject>) {
    keyed_event(s, ev, |i| &mut i.nrts, to_value, NRTS_SYNCED);
}

/// One watched kind's events into its map of [`Inputs`] (by object name = node name),
/// rebuilding the state of every node an event touches; on a full resync, entries that
/// are gone are dropped and `synced_bit` is marked.
fn keyed_event<K: ResourceExt>(
    s: &Shared,
    ev: Ev<K>,
    map: fn(&mut Inputs) -> &mut HashMap<String, Value>,
    value: fn(&K) -> Value,
    synced_bit: u8,
) {
    let lock = || s.inputs.lock().unwrap_or_else(|p| p.into_inner());
    match ev {
        Ev::Apply(o) => {
            let name = o.name_any();
            map(&mut lock()).insert(name.clone(), value(&o));
            s.rebuild(&name);
        }
        Ev::Delete(o) => {
            let name = o.name_any();
            map(&mut lock()).remove(&name);
            s.rebuild(&name);
        }
        Ev::Synced(all) => {
            let live: HashSet<String> = all.iter().map(|o| o.name_any()).collect();
            let gone: Vec<String> = {
                let mut inputs = lock();
                let entries = map(&mut inputs);
                let gone: Vec<String> = entries
                    .keys()
                    .filter(|k| !live.contains(*k))
                    .cloned()
                    .collect();
                for g in &gone {
                    entries.remove(g);
                }
                gone
            };
            for g in gone {
                s.rebuild(&g);
            }
            s.mark_synced(synced_bit);
        }
    }
}

fn pod_key(p: &Pod) -> String {
    format!("{}/{}", p.namespace().unwrap_or_default(), p.name_any())
}

fn pod_event(s: &Shared, ev: Ev<Pod>) {
    match ev {
        Ev::Apply(p) => apply_pod(s, &p),
        Ev::Delete(p) => s.state().forget_pod(&pod_key(&p)),
        Ev::Synced(all) => {
            let live: HashSet<String> = all.iter().map(|p| pod_key(p)).collect();
            let mut state = s.state();
            state.retain_pods(|k| live.contains(k));
            drop(state);
            s.mark_synced(PODS_SYNCED);
        }
    }
}

fn apply_pod(s: &Shared, p: &Pod) {
    let key = pod_key(p);
    let node = p.spec.as_ref().and_then(|sp| sp.node_name.clone());
    let done = matches!(
        p.status.as_ref().and_then(|st| st.phase.as_deref()),
        Some("Succeeded" | "Failed")
    );
    let Some(node) = node.filter(|_| !done) else {
        s.state().forget_pod(&key);
        return;
    };
    match pod_request(&to_value(p), &s.feed.resources) {
        Ok(r) => s.state().assume_pod(&key, &node, &r, SystemTime::now()),
        Err(e) => tracing::debug!(pod = %key, error = %e, "bound pod not understood; not assumed"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn shared() -> Shared {
        Shared {
            feed: NodeFeed {
                state: Arc::new(RwLock::new(ClusterState::default())),
                resources: ResourceMap::default(),
                ready: Arc::new(AtomicBool::new(false)),
                changed: Arc::new(Notify::new()),
                refresh: Refresh(Arc::new(|_| {})),
            },
            inputs: Mutex::new(Inputs::default()),
            synced: AtomicU8::new(0),
            expected: 2,
        }
    }

    /// A node's MIG devices: its GFD labels, with its NRT's `available` MIG amounts over
    /// them (what is free now), rebuilt whichever object arrives.
    #[test]
    fn mig_state_takes_what_the_nrt_says_is_free() {
        let s = shared();
        let node = json!({"metadata": {"name": "g", "labels": {
            "nvidia.com/mig.strategy": "mixed",
            "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3",
            "nvidia.com/gpu.count": "1",
            "nvidia.com/mig-3g.40gb.count": "2"}}});
        s.inputs.lock().unwrap().nodes.insert("g".into(), node);
        s.rebuild("g");
        let instances = |s: &Shared| {
            let st = s.feed.state.read().unwrap();
            st.mig_node("g")
                .map(|m| m.instances.get("3g.40gb").copied())
        };
        assert_eq!(instances(&s), Some(Some(2)), "labels alone");
        let nrt = json!({"metadata": {"name": "g"}, "zones": [{"name": "node-0", "resources": [
            {"name": "nvidia.com/mig-3g.40gb", "capacity": "2", "allocatable": "2", "available": "1"}]}]});
        s.inputs.lock().unwrap().nrts.insert("g".into(), nrt);
        s.rebuild("g");
        assert_eq!(instances(&s), Some(Some(1)), "one of two is in use");
        // An NRT naming a profile the model lacks: the node is judged without MIG.
        let bad = json!({"metadata": {"name": "g"}, "zones": [{"name": "node-0", "resources": [
            {"name": "nvidia.com/mig-2g.45gb", "available": "1"}]}]});
        s.inputs.lock().unwrap().nrts.insert("g".into(), bad);
        s.rebuild("g");
        assert_eq!(instances(&s), None);
    }
}
