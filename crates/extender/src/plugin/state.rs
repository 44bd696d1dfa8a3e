//! The in-memory cluster state the decisions read: per node its topology (shared between
//! nodes of one machine type), the kubelet Topology Manager settings, the devices in use
//! as last reported, and the allocations assumed for pods bound since that report.
//!
//! Nothing here does I/O: the watcher layer ([`crate::plugin::watch`]) turns API objects into
//! [`NodeInfo`] and pod bindings, tests and benchmarks build them directly.

use std::collections::hash_map::{DefaultHasher, RandomState};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::hash::{BuildHasher, BuildHasherDefault, Hash, Hasher};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use topoalign_kube_types::kubelet_settings::{CpuPolicy, MemoryPolicy, Settings};
use topoalign_mig::device_plugin::NodeMig;
use topoalign_plan::score::device_score;
use topoalign_plan::{Planner, Request};
use topoalign_tm::{Case, Outcome, Pod, ResourceMap, simulate};
use topoalign_topology::{NodeUsage, Topology};

use crate::plugin::keys::KeyHasher;

/// A topology shared by every node that reports it.
#[derive(Debug)]
pub struct NodeTopology {
    /// Where it came from: `profile:<name>` or `nrt:<hash>`.
    pub key: String,
    /// A hash of `key`, used in cache keys.
    pub id: u64,
    /// The model.
    pub topology: Topology,
}

impl NodeTopology {
    /// Wraps a topology under a source key.
    pub fn new(key: String, topology: Topology) -> Self {
        NodeTopology {
            id: hash_of(&key),
            key,
            topology,
        }
    }
}

/// Where a node's data came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Source {
    /// Node labels and annotations (`topoalign.dev/profile`, `topoalign.dev/used`):
    /// declared, never stale, used when neither NRT nor slices exist.
    Labels,
    /// The node agent's NodeResourceTopology object.
    Nrt,
}

impl Source {
    /// A short name for logs and metrics.
    pub fn as_str(self) -> &'static str {
        match self {
            Source::Labels => "labels",
            Source::Nrt => "nrt",
        }
    }
}

/// What the watchers know about one node.
#[derive(Debug, Clone)]
pub struct NodeInfo {
    /// Its topology.
    pub topology: Arc<NodeTopology>,
    /// The kubelet Topology Manager settings (policy, scope, options).
    pub settings: Arc<Settings>,
    /// Devices in use as reported.
    pub used: NodeUsage,
    /// Where the data came from.
    pub source: Source,
    /// When the agent last reported (`None`: declared data that cannot go stale).
    pub reported_at: Option<SystemTime>,
    /// Pods (`namespace/name`) the report already accounts for.
    pub reported_pods: BTreeSet<String>,
}

/// A node as the decisions see it.
#[derive(Debug, Clone)]
pub enum NodeEntry {
    /// Usable data.
    Known(NodeInfo),
    /// Data exists but cannot be used (malformed, unknown profile …): the reason.
    Broken(String),
}

/// An allocation assumed for a pod bound to a node but not yet in the node's report.
#[derive(Debug, Clone)]
pub(crate) struct Assumed {
    /// The node it is bound to.
    pub node: String,
    /// What it asks for.
    pub request: Request,
    /// The pod as the kubelet's resource managers see it: with it the assumed devices
    /// are the ones the kubelet's Topology Manager and device manager would give (the
    /// `tm` simulation); without it, the planner's choice.
    pub pod: Option<Pod>,
    /// When the binding was first seen.
    pub bound_at: SystemTime,
}

/// A known node with its assumed allocations applied.
#[derive(Debug, Clone)]
pub struct Effective {
    /// The data.
    pub info: NodeInfo,
    /// Reported plus assumed usage.
    pub used: NodeUsage,
    /// Partially used switches, NUMA nodes and islands before any new allocation.
    pub fragmentation: u32,
    /// Hash of topology, settings and usage: equal keys get equal verdicts.
    pub state_key: u64,
    /// Assumed pods that hold nothing: the kubelet would reject them, or their devices
    /// could not be chosen.
    pub unplaced: Vec<String>,
}

/// One node's entry in the state.
#[derive(Debug, Clone)]
pub enum NodeView {
    /// Usable.
    Known(Arc<Effective>),
    /// Not usable, with the reason.
    Broken(String),
}

/// Where a node lives in the state: a dense index, stable while the node exists.
pub(crate) type Slot = u32;

/// The per-node data a scheduler call reads for every candidate, kept dense (one array,
/// names in one arena) so that a call over thousands of nodes stays in the CPU caches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Hot {
    /// The node's state key (0 for broken or vacant slots).
    pub state_key: u64,
    /// When the agent last reported (`None`: cannot go stale).
    pub reported_at: Option<SystemTime>,
    /// Known (usable) data.
    pub known: bool,
    name_at: u32,
    name_len: u32,
}

/// The node name index: name → slot, names kept in one arena.
#[derive(Debug, Clone, Default)]
struct NameIndex {
    hasher: RandomState,
    by_hash: HashMap<u64, Slot, BuildHasherDefault<KeyHasher>>,
    /// Names whose hash another name already holds (practically never).
    collided: HashMap<String, Slot>,
    arena: String,
    garbage: usize,
}

/// The whole cluster as the decisions see it.
#[derive(Debug, Clone)]
pub struct ClusterState {
    index: NameIndex,
    slots: Vec<Option<(String, NodeView)>>,
    hot: Vec<Hot>,
    free: Vec<Slot>,
    assumed: BTreeMap<String, Assumed>,
    changed: Vec<String>,
    resources: Arc<ResourceMap>,
    mig: HashMap<String, NodeMig>,
    /// Agent data older than this is stale (neutral score, never filtered).
    pub stale_after: Duration,
    /// An assumed allocation on an agent-reported node expires after this.
    pub assume_ttl: Duration,
}

impl Default for ClusterState {
    fn default() -> Self {
        ClusterState::new(Duration::from_secs(300), Duration::from_secs(120))
    }
}

impl ClusterState {
    /// An empty state.
    pub fn new(stale_after: Duration, assume_ttl: Duration) -> Self {
        ClusterState {
            index: NameIndex::default(),
            slots: Vec::new(),
            hot: Vec::new(),
            free: Vec::new(),
            assumed: BTreeMap::new(),
            changed: Vec::new(),
            resources: Arc::new(ResourceMap::default()),
            mig: HashMap::new(),
            stale_after,
            assume_ttl,
        }
    }

    /// Sets the resource names → devices map the assumed pods are read with (the
    /// extender's `--resource` rules; default: the built-in map).
    pub fn set_resources(&mut self, resources: ResourceMap) {
        self.resources = Arc::new(resources);
    }

    /// Sets (or replaces) a node's data.
    pub fn upsert_node(&mut self, name: &str, entry: NodeEntry) {
        let view = match entry {
            NodeEntry::Broken(why) => NodeView::Broken(why),
            NodeEntry::Known(info) => NodeView::Known(Arc::new(self.effective(name, info))),
        };
        self.put(name, view);
        self.changed.push(name.to_string());
    }

    /// Sets (or, with `None`, forgets) a node's MIG devices as its GFD labels and
    /// allocatable resources show them; any node, topoalign's or not.
    pub fn set_mig(&mut self, name: &str, mig: Option<NodeMig>) {
        match mig {
            Some(m) => {
                self.mig.insert(name.to_string(), m);
            }
            None => {
                self.mig.remove(name);
            }
        }
    }

    /// A node's MIG devices, when it shows any.
    pub fn mig_node(&self, name: &str) -> Option<&NodeMig> {
        self.mig.get(name)
    }

    /// Forgets a node.
    pub fn remove_node(&mut self, name: &str) {
        let Some(slot) = self.slot(name) else {
            return;
        };
        self.index.remove(name, slot, &self.hot);
        self.slots[slot as usize] = None;
        self.hot[slot as usize] = Hot {
            state_key: 0,
            reported_at: None,
            known: false,
            name_at: 0,
            name_len: 0,
        };
        self.free.push(slot);
        if self.index.garbage > 4096 && self.index.garbage > self.index.arena.len() / 2 {
            self.index.compact(&self.slots, &mut self.hot);
        }
    }

    /// Sets a node's view in its slot (a new slot for a new name).
    fn put(&mut self, name: &str, view: NodeView) {
        let (state_key, reported_at, known) = match &view {
            NodeView::Known(e) => (e.state_key, e.info.reported_at, true),
            NodeView::Broken(_) => (0, None, false),
        };
        let slot = match self.slot(name) {
            Some(s) => s,
            None => {
                let slot = match self.free.pop() {
                    Some(s) => s,
                    None => {
                        self.slots.push(None);
                        self.hot.push(Hot {
                            state_key: 0,
                            reported_at: None,
                            known: false,
                            name_at: 0,
                            name_len: 0,
                        });
                        Slot::try_from(self.slots.len() - 1).unwrap_or(Slot::MAX)
                    }
                };
                let (at, len) = self.index.insert(name, slot, &self.hot);
                self.hot[slot as usize].name_at = at;
                self.hot[slot as usize].name_len = len;
                slot
            }
        };
        let h = &mut self.hot[slot as usize];
        h.state_key = state_key;
        h.reported_at = reported_at;
        h.known = known;
        self.slots[slot as usize] = Some((name.to_string(), view));
    }

    /// The slot of a node, by name.
    pub fn slot(&self, name: &str) -> Option<Slot> {
        self.index.get(name, &self.hot)
    }

    /// The dense per-node data of a slot.
    pub fn hot(&self, slot: Slot) -> Option<&Hot> {
        self.hot.get(slot as usize)
    }

    /// A slot's view.
    pub fn view(&self, slot: Slot) -> Option<&NodeView> {
        self.slots
            .get(slot as usize)
            .and_then(|s| s.as_ref())
            .map(|(_, v)| v)
    }

    /// Slots in all (some may be vacant): the bound of [`Slot`] values.
    pub fn slot_count(&self) -> usize {
        self.slots.len()
    }

    /// Whether data reported at `reported_at` is stale at `now`.
    pub fn is_stale_at(&self, reported_at: Option<SystemTime>, now: SystemTime) -> bool {
        reported_at.is_some_and(|t| now.duration_since(t).unwrap_or_default() > self.stale_after)
    }

    /// Records that a pod (`namespace/name`) is bound to `node` and asks for `request`.
    /// Calling it again for the same pod and node changes nothing.
    /// The devices assumed are the planner's choice; [`ClusterState::assume_pod`] assumes
    /// what the kubelet would give instead.
    pub fn assume(&mut self, pod: &str, node: &str, request: Request, now: SystemTime) {
        self.assume_with(pod, node, request, None, now);
    }

    /// Records that a pod is bound to `node`, assuming the devices (and exclusive CPUs)
    /// the node's kubelet would allocate to it: its Topology Manager and device manager,
    /// simulated by `topoalign-tm` with the node's settings, in binding order. A pod the
    /// kubelet would reject holds nothing. Pods that ask for no GPU are not recorded.
    pub fn assume_pod(&mut self, key: &str, node: &str, req: &crate::PodRequest, now: SystemTime) {
        if let Some(plan) = &req.plan {
            self.assume_with(key, node, plan.clone(), Some(req.pod.clone()), now);
        }
    }

    fn assume_with(
        &mut self,
        pod: &str,
        node: &str,
        request: Request,
        tm_pod: Option<Pod>,
        now: SystemTime,
    ) {
        if let Some(a) = self.assumed.get(pod)
            && a.node == node
        {
            return;
        }
        let old = self.assumed.insert(
            pod.to_string(),
            Assumed {
                node: node.to_string(),
                request,
                pod: tm_pod,
                bound_at: now,
            },
        );
        if let Some(old) = old {
            self.refresh(&old.node);
        }
        self.refresh(node);
    }

    /// Forgets a pod (deleted, finished, or no longer bound).
    pub fn forget_pod(&mut self, pod: &str) {
        if let Some(a) = self.assumed.remove(pod) {
            self.refresh(&a.node);
        }
    }

    /// Keeps only the assumed pods for which `keep(pod)` holds (after a re-list).
    pub fn retain_pods(&mut self, mut keep: impl FnMut(&str) -> bool) {
        let mut touched = BTreeSet::new();
        self.assumed.retain(|k, a| {
            let k2 = keep(k);
            if !k2 {
                touched.insert(a.node.clone());
            }
            k2
        });
        for n in touched {
            self.refresh(&n);
        }
    }

    /// Drops assumed allocations past their time on agent-reported nodes.
    pub fn expire(&mut self, now: SystemTime) {
        let ttl = self.assume_ttl;
        let mut touched = BTreeSet::new();
        let agent_nodes: BTreeSet<String> = self
            .assumed
            .values()
            .filter(|a| {
                matches!(self.node(&a.node), Some(NodeView::Known(e)) if e.info.source != Source::Labels)
            })
            .map(|a| a.node.clone())
            .collect();
        self.assumed.retain(|_, a| {
            let agent = agent_nodes.contains(a.node.as_str());
            let keep = !agent || now.duration_since(a.bound_at).unwrap_or_default() < ttl;
            if !keep {
                touched.insert(a.node.clone());
            }
            keep
        });
        for n in touched {
            self.refresh(&n);
        }
    }

    /// The nodes set or re-computed since the last call (each once), so that their
    /// verdicts can be computed ahead of the next scheduler call.
    pub fn take_changed(&mut self) -> Vec<String> {
        let mut c = std::mem::take(&mut self.changed);
        c.sort_unstable();
        c.dedup();
        c
    }

    /// A node's view.
    pub fn node(&self, name: &str) -> Option<&NodeView> {
        self.slot(name).and_then(|s| self.view(s))
    }

    /// Every node name with its view.
    pub fn nodes(&self) -> impl Iterator<Item = (&String, &NodeView)> {
        self.slots.iter().flatten().map(|(n, v)| (n, v))
    }

    /// Number of nodes.
    pub fn len(&self) -> usize {
        self.slots.len() - self.free.len()
    }

    /// Whether there are no nodes.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Number of assumed allocations.
    pub fn assumed_count(&self) -> usize {
        self.assumed.len()
    }

    /// Whether a known node's report is older than `stale_after` at `now`.
    pub fn is_stale(&self, e: &Effective, now: SystemTime) -> bool {
        e.info
            .reported_at
            .is_some_and(|t| now.duration_since(t).unwrap_or_default() > self.stale_after)
    }

    fn refresh(&mut self, name: &str) {
        if let Some(NodeView::Known(e)) = self.node(name) {
            let info = e.info.clone();
            let eff = self.effective(name, info);
            self.put(name, NodeView::Known(Arc::new(eff)));
            self.changed.push(name.to_string());
        }
    }

    /// Applies the node's assumed allocations (in binding order) on top of its report.
    fn effective(&self, name: &str, info: NodeInfo) -> Effective {
        let topo = &info.topology.topology;
        let mut used = info.used.clone();
        let mut unplaced = Vec::new();
        let mut pods: Vec<(&String, &Assumed)> = self
            .assumed
            .iter()
            .filter(|(k, a)| a.node == name && !info.reported_pods.contains(*k))
            .collect();
        if !pods.is_empty() {
            pods.sort_by(|a, b| a.1.bound_at.cmp(&b.1.bound_at).then(a.0.cmp(b.0)));
            let mut planner = None;
            for (key, a) in pods {
                if let Some(pod) = &a.pod {
                    let case = Case {
                        topology: topo,
                        settings: &info.settings,
                        resources: &self.resources,
                        pod,
                        usage: &used,
                        seed: 0,
                    };
                    match simulate(&case) {
                        Ok(o) if o.admitted => {
                            take_allocated(&mut used, topo, &o);
                            continue;
                        }
                        Ok(_) => {
                            unplaced.push(key.clone());
                            continue;
                        }
                        Err(err) => {
                            tracing::debug!(pod = %key, node = %name, error = %err,
                                "kubelet simulation failed; assuming the planner's choice");
                        }
                    }
                }
                let planner = planner.get_or_insert_with(|| Planner::new(topo));
                let mut req = a.request.clone();
                // The kubelet ignores topoalign's bounds; take what it can.
                req.max_pair = None;
                req.gpu_link = topoalign_plan::GpuLinkBound::Any;
                match planner.plan(&req, &used) {
                    Ok(p) => {
                        used.gpus.extend(p.gpus);
                        used.nics.extend(p.nics);
                    }
                    Err(_) => unplaced.push(key.clone()),
                }
            }
            used.gpus.sort();
            used.gpus.dedup();
            used.nics.sort();
            used.nics.dedup();
        }
        let fragmentation = fragmentation_of(topo, &used);
        let mut h = DefaultHasher::new();
        info.topology.id.hash(&mut h);
        hash_settings(&info.settings, &mut h);
        used.gpus.hash(&mut h);
        used.nics.hash(&mut h);
        used.cpus.hash(&mut h);
        Effective {
            state_key: h.finish(),
            info,
            used,
            fragmentation,
            unplaced,
        }
    }
}

impl NameIndex {
    fn hash(&self, name: &str) -> u64 {
        self.hasher.hash_one(name)
    }

    fn name_of<'a>(&'a self, hot: &[Hot], slot: Slot) -> &'a str {
        hot.get(slot as usize)
            .and_then(|h| {
                self.arena
                    .get(h.name_at as usize..(h.name_at as usize + h.name_len as usize))
            })
            .unwrap_or("")
    }

    fn get(&self, name: &str, hot: &[Hot]) -> Option<Slot> {
        if !self.collided.is_empty()
            && let Some(s) = self.collided.get(name)
        {
            return Some(*s);
        }
        let slot = *self.by_hash.get(&self.hash(name))?;
        (self.name_of(hot, slot) == name).then_some(slot)
    }

    /// Indexes a new name; returns where the arena holds it.
    fn insert(&mut self, name: &str, slot: Slot, hot: &[Hot]) -> (u32, u32) {
        let at = u32::try_from(self.arena.len()).unwrap_or(u32::MAX);
        let len = u32::try_from(name.len()).unwrap_or(u32::MAX);
        self.arena.push_str(name);
        let h = self.hash(name);
        match self.by_hash.get(&h) {
            Some(&other) if self.name_of(hot, other) != name => {
                self.collided.insert(name.to_string(), slot);
            }
            _ => {
                self.by_hash.insert(h, slot);
            }
        }
        (at, len)
    }

    fn remove(&mut self, name: &str, slot: Slot, hot: &[Hot]) {
        self.garbage += name.len();
        if self.collided.remove(name).is_none() {
            let h = self.hash(name);
            if self.by_hash.get(&h) == Some(&slot) {
                self.by_hash.remove(&h);
            }
        }
        let _ = hot;
    }

    /// Rewrites the arena without the names of removed nodes.
    fn compact(&mut self, slots: &[Option<(String, NodeView)>], hot: &mut [Hot]) {
        let mut arena = String::with_capacity(self.arena.len() - self.garbage);
        for (i, s) in slots.iter().enumerate() {
            if let (Some((name, _)), Some(h)) = (s, hot.get_mut(i)) {
                h.name_at = u32::try_from(arena.len()).unwrap_or(u32::MAX);
                arena.push_str(name);
            }
        }
        self.arena = arena;
        self.garbage = 0;
    }
}

/// Adds what the kubelet allocated in `o` to `used`.
pub(crate) fn take_allocated(used: &mut NodeUsage, topo: &Topology, o: &Outcome) {
    for alloc in &o.allocations {
        for (_, devices) in &alloc.devices {
            for d in devices {
                if topo.gpu_index(d.bdf).is_some() {
                    used.gpus.push(d.bdf);
                } else {
                    used.nics.push(d.bdf);
                }
            }
        }
        used.cpus = used.cpus.union(&alloc.cpus);
        for (numa, bytes) in &alloc.memory {
            *used.memory.entry(*numa).or_default() += bytes;
        }
    }
}

fn hash_settings(s: &Settings, h: &mut DefaultHasher) {
    s.topology_manager_policy.hash(h);
    s.topology_manager_scope.hash(h);
    s.topology_manager_policy_options.hash(h);
    (s.cpu_manager_policy == CpuPolicy::Static).hash(h);
    s.reserved_system_cpus.hash(h);
    s.reserved_cpu_millis.hash(h);
    // The simulation reads the memory manager too: two nodes that differ only there
    // must not share a verdict.
    (s.memory_manager_policy == MemoryPolicy::Static).hash(h);
    s.reserved_memory.hash(h);
}

/// Partially used switches + NUMA nodes + fabric islands under `used` (the planner's
/// fragmentation measure, before any new allocation). Unknown addresses are ignored.
pub(crate) fn fragmentation_of(topo: &Topology, used: &NodeUsage) -> u32 {
    let cls = topo.classifier();
    let mut used_g = vec![false; topo.gpus.len()];
    for b in &used.gpus {
        if let Some(i) = topo.gpu_index(*b) {
            used_g[i] = true;
        }
    }
    let mut used_n = vec![false; topo.nics.len()];
    for b in &used.nics {
        if let Some(i) = topo.nic_index(*b) {
            used_n[i] = true;
        }
    }
    device_score(
        topo,
        &cls,
        &used_g,
        &used_n,
        &topo.fabric_islands(),
        &[],
        &[],
    )
    .fragmentation
}

/// A stable 64-bit hash of a string.
pub(crate) fn hash_of(s: &str) -> u64 {
    let mut h = DefaultHasher::new();
    s.hash(&mut h);
    h.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(s: &Settings) -> u64 {
        let mut h = DefaultHasher::new();
        hash_settings(s, &mut h);
        h.finish()
    }

    #[test]
    fn the_state_key_tells_memory_manager_settings_apart() {
        let base = Settings::default();
        let mut stat = base.clone();
        stat.memory_manager_policy = MemoryPolicy::Static;
        assert_ne!(key(&base), key(&stat));
        let mut reserved = stat.clone();
        reserved.reserved_memory.insert(0, 1 << 30);
        assert_ne!(key(&stat), key(&reserved));
        assert_eq!(key(&base), key(&base.clone()));
    }
}
