//! The in-memory cluster state the decisions read: per node its topology (shared between
//! nodes of one machine type), the kubelet Topology Manager settings, the devices in use
//! as last reported, and the allocations assumed for pods bound since that report.
//!
//! Nothing here does I/O: the watcher layer ([`crate::plugin::watch`]) turns API objects into
//! [`crate::plugin::node::NodeInfo`] and pod bindings, tests and benchmarks build them directly.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use topoalign_mig::NodeMig;
use topoalign_plan::Request;
use topoalign_tm::{Pod, ResourceMap};

use crate::list_memo::ListMemo;
use crate::name_index::NameIndex;
use crate::plugin::effective::{Effective, effective};
use crate::plugin::node::{Assumed, NodeEntry, Source};

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

/// The node names: name → slot ([`NameIndex`]), the names kept in one arena (where each
/// is, in its slot's [`Hot`]).
#[derive(Debug, Clone, Default)]
struct Names {
    index: NameIndex,
    arena: String,
    /// Bytes of the arena held by names of removed nodes.
    garbage: usize,
}

/// The whole cluster as the decisions see it.
#[derive(Debug, Clone)]
pub struct ClusterState {
    names: Names,
    slots: Vec<Option<(String, NodeView)>>,
    hot: Vec<Hot>,
    free: Vec<Slot>,
    assumed: BTreeMap<String, Assumed>,
    changed: Vec<String>,
    resources: Arc<ResourceMap>,
    mig: HashMap<String, NodeMig>,
    /// The slots of candidate lists asked lately, forgotten when a node is added or removed.
    lists: ListMemo,
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
            names: Names::default(),
            slots: Vec::new(),
            hot: Vec::new(),
            free: Vec::new(),
            assumed: BTreeMap::new(),
            changed: Vec::new(),
            resources: Arc::new(ResourceMap::default()),
            mig: HashMap::new(),
            lists: ListMemo::default(),
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
            NodeEntry::Known(info) => NodeView::Known(Arc::new(effective(
                name,
                info,
                &self.assumed,
                &self.resources,
            ))),
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

    /// Whether any node shows MIG devices.
    pub fn has_mig(&self) -> bool {
        !self.mig.is_empty()
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
        self.names.remove(name, &self.hot);
        self.lists.forget();
        self.slots[slot as usize] = None;
        self.hot[slot as usize] = Hot {
            state_key: 0,
            reported_at: None,
            known: false,
            name_at: 0,
            name_len: 0,
        };
        self.free.push(slot);
        if self.names.garbage > 4096 && self.names.garbage > self.names.arena.len() / 2 {
            self.names.compact(&self.slots, &mut self.hot);
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
                let (at, len) = self.names.insert(name, slot);
                self.lists.forget();
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
        self.names
            .index
            .find(name, |slot| self.names.name_of(&self.hot, slot))
    }

    /// The slot of every name of a candidate list, in order (the answer for a list asked
    /// lately is kept: [`ListMemo`]).
    pub(crate) fn slots_of<N: AsRef<str>>(&self, names: &[N]) -> Arc<[Option<Slot>]> {
        self.lists.positions(names, || {
            self.names
                .index
                .find_many(names, |slot| self.names.name_of(&self.hot, slot))
        })
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

    /// Slots in all (some may be vacant): the bound of `Slot` values.
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
            let eff = effective(name, info, &self.assumed, &self.resources);
            self.put(name, NodeView::Known(Arc::new(eff)));
            self.changed.push(name.to_string());
        }
    }
}

/// The name in `slot`: its place in `arena` held by `hot`.
fn name_in<'a>(arena: &'a str, hot: &[Hot], slot: Slot) -> Option<&'a str> {
    let h = hot.get(slot as usize)?;
    arena.get(h.name_at as usize..(h.name_at as usize + h.name_len as usize))
}

impl Names {
    /// The name in `slot` (its place in the arena held by `hot`).
    fn name_of<'a>(&'a self, hot: &[Hot], slot: Slot) -> Option<&'a str> {
        name_in(&self.arena, hot, slot)
    }

    /// Indexes a new name in `slot`; returns where the arena holds it.
    fn insert(&mut self, name: &str, slot: Slot) -> (u32, u32) {
        let at = u32::try_from(self.arena.len()).unwrap_or(u32::MAX);
        let len = u32::try_from(name.len()).unwrap_or(u32::MAX);
        self.arena.push_str(name);
        self.index.insert(name, slot);
        (at, len)
    }

    /// Forgets a name (its bytes stay in the arena until compacted).
    fn remove(&mut self, name: &str, hot: &[Hot]) {
        self.garbage += name.len();
        let arena = &self.arena;
        let _ = self.index.remove(name, |slot| name_in(arena, hot, slot));
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

#[cfg(test)]
mod tests {
    use super::*;

    fn broken(st: &mut ClusterState, name: &str) {
        st.upsert_node(name, NodeEntry::Broken(format!("{name} has no data")));
    }

    fn expected(st: &ClusterState, names: &[String]) -> Vec<Option<Slot>> {
        names.iter().map(|n| st.slot(n)).collect()
    }

    /// A candidate list's kept slots follow nodes removed, added (a freed slot taken by
    /// another name) and added again.
    #[test]
    fn kept_slots_of_a_list_follow_nodes_added_and_removed() {
        let mut st = ClusterState::default();
        let names: Vec<String> = (0..400).map(|i| format!("node-{i:03}")).collect();
        for n in &names {
            broken(&mut st, n);
        }
        let first = st.slots_of(&names);
        assert_eq!(&*first, expected(&st, &names).as_slice());
        assert!(first.iter().all(Option::is_some));
        st.remove_node("node-007");
        broken(&mut st, "other");
        let after = st.slots_of(&names);
        assert_eq!(after[7], None);
        assert_eq!(&*after, expected(&st, &names).as_slice());
        broken(&mut st, "node-007");
        let again = st.slots_of(&names);
        assert!(again[7].is_some());
        assert_eq!(&*again, expected(&st, &names).as_slice());
        // A report for a known node keeps its slot: the kept answer stands.
        broken(&mut st, "node-100");
        assert!(Arc::ptr_eq(&again, &st.slots_of(&names)));
    }
}
