//! The DRA path's view of the cluster: the ResourceSlices by node (`topoalign.dev`'s and
//! the other drivers' — every driver, or those named with `--dra-drivers`), every
//! ResourceClaim (the allocated ones hold devices), ResourceClaimTemplates and
//! DeviceClasses, filled by the watchers in [`crate::dra::watch`] and read by the
//! scheduler calls (never a list per request).
//!
//! Per call, [`DraState::resolve`] finds the pod's claims the way the scheduler does
//! (`resourceClaimName`, or for `resourceClaimTemplateName` the generated claim named in
//! `status.resourceClaimStatuses`, checked to be owned by the pod; while that claim is not
//! seen yet, the template's spec), and [`crate::dra::shared::DraShared::visit`] judges each candidate on the
//! node's slices minus the devices other claims hold: claims of topoalign's classes with
//! [`crate::dra::judge::judge_with_budget`], claims of other drivers' classes with
//! [`crate::dra::foreign::judge_foreign`]. The pod's own claims, allocated already when it
//! is scheduled again, do not count as taken. The state's lock is held only to gather
//! what each node's judgement needs (shared, not copied) and the verdict cache's only to
//! look up and store: no lock is held across a judgement.

use std::collections::hash_map::DefaultHasher;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::hash::{Hash, Hasher};
use std::sync::Arc;
use std::time::Instant;

use k8s_openapi::api::resource::v1::{
    DeviceClass, ResourceClaim, ResourceClaimSpec, ResourceClaimTemplate, ResourceSlice,
};
use topoalign_dra::claim::{held_devices, held_shares};
use topoalign_dra::{DRIVER_NAME, alloc::DEFAULT_BUDGET, alloc::DeviceId, alloc::Share};
use topoalign_kube_types::Quantity;

use crate::dra::verdict::ObjKey;
use table::NodeTable;

/// What the state keeps of one claim.
#[derive(Debug, Clone)]
struct ClaimEntry {
    owners: Vec<String>,
    spec: ResourceClaimSpec,
    held: BTreeSet<DeviceId>,
    /// The shares of devices that allow multiple allocations it holds (its
    /// allocation's `consumedCapacity`), quantities as written.
    shares: Vec<Share>,
}

/// One node's slices (every driver watched), and a revision bumped on every change.
#[derive(Debug, Clone, Default)]
struct NodeSlices {
    /// Shared with the judgements in flight; replaced, never changed in place.
    slices: Arc<Vec<ResourceSlice>>,
    /// Slices of `topoalign.dev` among them.
    ours: usize,
    rev: u64,
    /// The node's pools, `(driver, pool)`, in the allocator's order (driver, then name).
    pools: Vec<(String, String)>,
    /// What a verdict depends on in the slices, the node's own name left out
    /// ([`node_kind`]): nodes of one kind with the same devices held get the same verdict.
    kind: u64,
    /// [`held_fingerprint`] of the pools: kept up to date as claims come and go, so that
    /// a call reads one number per node, not every pool's.
    held: u64,
}

impl NodeSlices {
    /// Recomputes the pools and the kind after the slices changed.
    fn refresh(&mut self, node: &str) {
        let pools: BTreeSet<(String, String)> = self
            .slices
            .iter()
            .map(|s| (s.spec.driver.clone(), s.spec.pool.name.clone()))
            .collect();
        self.pools = pools.into_iter().collect();
        self.kind = node_kind(node, &self.slices, &self.pools);
    }
}

/// A node's name as part of its pools' names, written as a mark that no object name
/// contains (a NUL), so that two nodes whose pools differ only by the node's name look
/// alike; other pool names are kept as they are. One-to-one on one node's pools.
fn pool_alias(node: &str, pool: &str) -> String {
    match pool.strip_prefix(node) {
        Some(rest) => format!("\0{rest}"),
        None => pool.to_string(),
    }
}

/// A fingerprint of everything in a node's slices a verdict depends on, with the node's
/// name left out: every slice's spec in the stored order (by slice name), its node name
/// dropped and its pool written with [`pool_alias`], and the pools in the allocator's
/// order. Two nodes of one kind differ only in names the judgement never reads (the
/// allocator matches devices by driver, attributes and capacity, orders pools by driver
/// and name, which this order keeps, and the verdicts of [`crate::dra::verdict::shareable`] kinds name no
/// device, pool or slice).
fn node_kind(node: &str, slices: &[ResourceSlice], pools: &[(String, String)]) -> u64 {
    let mut h = DefaultHasher::new();
    for (driver, pool) in pools {
        (driver, pool_alias(node, pool)).hash(&mut h);
    }
    for s in slices {
        let mut spec = s.spec.clone();
        spec.node_name = None;
        spec.pool.name = pool_alias(node, &spec.pool.name);
        hash_json(&spec, &mut h);
    }
    h.finish()
}

/// The fingerprint of the devices held in a node's `pools`, from each pool's
/// [`held_hash`] (`None`: nothing held there).
fn held_fingerprint<'a>(
    pools: &'a [(String, String)],
    mut held: impl FnMut(&'a (String, String)) -> Option<u64>,
) -> u64 {
    let mut h = DefaultHasher::new();
    for p in pools {
        held(p).hash(&mut h);
    }
    h.finish()
}

/// The fingerprint of what is held in one pool: the devices' names in order, then the
/// shares (device name, capacity, quantity) sorted, whichever claims hold them.
fn held_hash<'a>(
    devices: impl Iterator<Item = &'a DeviceId>,
    shares: impl Iterator<Item = &'a Share>,
) -> u64 {
    let mut h = DefaultHasher::new();
    for d in devices {
        d.device.hash(&mut h);
    }
    let mut shares: Vec<(&str, &str, &str)> = shares
        .map(|s| {
            let d = s.device.device.as_str();
            (d, s.capacity.as_str(), s.quantity.as_str())
        })
        .collect();
    shares.sort_unstable();
    shares.hash(&mut h);
    h.finish()
}

/// The DRA objects the extender needs, indexed for the scheduler calls.
#[derive(Debug, Clone)]
pub struct DraState {
    nodes: NodeTable,
    slice_node: HashMap<String, String>,
    claims: HashMap<ObjKey, ClaimEntry>,
    /// Devices held by allocated claims (and allocations assumed), by (driver, pool),
    /// with the claims that hold each (several for a device that allows multiple
    /// allocations).
    held: HashMap<(String, String), BTreeMap<DeviceId, BTreeSet<ObjKey>>>,
    /// Shares of devices that allow multiple allocations held by allocated claims (and
    /// allocations assumed), by (driver, pool), by claim.
    shares: HashMap<(String, String), BTreeMap<ObjKey, Vec<Share>>>,
    /// Allocations assumed, by pod uid: until when ([`DraState::assume`]).
    assumed: HashMap<String, Instant>,
    /// [`held_hash`] of each pool in `held`.
    held_hashes: HashMap<(String, String), u64>,
    /// The nodes whose slices name each pool.
    pool_nodes: HashMap<(String, String), BTreeSet<String>>,
    templates: HashMap<ObjKey, Option<ResourceClaimSpec>>,
    classes: BTreeMap<String, DeviceClass>,
    /// The classes that select the driver's devices, every class, and their revision.
    ours: Arc<Vec<DeviceClass>>,
    all_classes: Arc<Vec<DeviceClass>>,
    classes_rev: u64,
    /// Drivers whose slices are kept besides `topoalign.dev`'s (`None`: every driver).
    drivers: Option<BTreeSet<String>>,
    rev: u64,
    /// Devices the allocator's search may try per claim.
    pub budget: u64,
    /// Whether room is kept for the pods waiting for a node (`--dra-keep-room`,
    /// `dra::room`).
    pub keep_room: bool,
}

impl Default for DraState {
    fn default() -> Self {
        DraState {
            nodes: NodeTable::default(),
            slice_node: HashMap::new(),
            claims: HashMap::new(),
            held: HashMap::new(),
            shares: HashMap::new(),
            assumed: HashMap::new(),
            held_hashes: HashMap::new(),
            pool_nodes: HashMap::new(),
            templates: HashMap::new(),
            classes: BTreeMap::new(),
            ours: Arc::default(),
            all_classes: Arc::default(),
            classes_rev: 0,
            drivers: None,
            rev: 0,
            budget: DEFAULT_BUDGET,
            keep_room: true,
        }
    }
}

fn hash_json<T: serde::Serialize>(v: &T, h: &mut DefaultHasher) {
    serde_json::to_string(v).unwrap_or_default().hash(h);
}

/// Whether a class selects devices of topoalign's driver.
fn selects_driver(c: &DeviceClass) -> bool {
    let selectors = c.spec.as_ref().and_then(|s| s.selectors.as_ref());
    selectors.into_iter().flatten().any(|s| {
        s.cel.as_ref().is_some_and(|cel| {
            let e: String = cel.expression.split_whitespace().collect();
            e.contains(&format!("device.driver==\"{DRIVER_NAME}\""))
        })
    })
}

/// The class names a claim's requests use (`exactly` and every `firstAvailable`).
fn class_names(spec: &ResourceClaimSpec) -> Vec<&str> {
    let mut out = Vec::new();
    for r in spec
        .devices
        .as_ref()
        .and_then(|d| d.requests.as_ref())
        .into_iter()
        .flatten()
    {
        if let Some(e) = &r.exactly {
            out.push(e.device_class_name.as_str());
        }
        for s in r.first_available.iter().flatten() {
            out.push(s.device_class_name.as_str());
        }
    }
    out
}

/// The `(namespace, name)` key of a claim or template.
pub(crate) fn key_of<K: kube::ResourceExt>(o: &K) -> ObjKey {
    (o.namespace().unwrap_or_default(), o.name_any())
}

impl DraState {
    /// Keeps the slices of `topoalign.dev` and of these drivers only (`None`: every
    /// driver, the default). Set before the first slice.
    pub fn keep_drivers(&mut self, drivers: Option<BTreeSet<String>>) {
        self.drivers = drivers;
    }

    fn keeps(&self, driver: &str) -> bool {
        driver == DRIVER_NAME || self.drivers.as_ref().is_none_or(|d| d.contains(driver))
    }

    /// Sets (or replaces) a slice; slices of drivers not kept ([`DraState::keep_drivers`])
    /// or of no single node are ignored.
    pub fn apply_slice(&mut self, s: &ResourceSlice) {
        let Some(name) = s.metadata.name.clone() else {
            return;
        };
        self.delete_slice(&name);
        let Some(node) = s.spec.node_name.clone() else {
            return;
        };
        if !self.keeps(&s.spec.driver) {
            return;
        }
        self.rev += 1;
        let e = self.nodes.get_or_default(&node);
        let slices = Arc::make_mut(&mut e.slices);
        slices.push(s.clone());
        slices.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
        e.ours += usize::from(s.spec.driver == DRIVER_NAME);
        e.rev = self.rev;
        let old = std::mem::take(&mut e.pools);
        e.refresh(&node);
        self.reindex(&node, old);
        self.slice_node.insert(name, node);
    }

    /// After `node`'s pools changed from `old`: the pools' nodes and the node's
    /// fingerprint of the devices held.
    fn reindex(&mut self, node: &str, old: Vec<(String, String)>) {
        let new = self
            .nodes
            .get(node)
            .map(|e| e.pools.clone())
            .unwrap_or_default();
        for p in old.iter().filter(|p| !new.contains(p)) {
            if let Some(nodes) = self.pool_nodes.get_mut(p) {
                nodes.remove(node);
                if nodes.is_empty() {
                    self.pool_nodes.remove(p);
                }
            }
        }
        for p in new.iter().filter(|p| !old.contains(p)) {
            self.pool_nodes
                .entry(p.clone())
                .or_default()
                .insert(node.to_string());
        }
        self.refresh_held(node);
    }

    /// Recomputes `node`'s fingerprint of the devices held.
    fn refresh_held(&mut self, node: &str) {
        let hashes = &self.held_hashes;
        if let Some(e) = self.nodes.get_mut(node) {
            e.held = held_fingerprint(&e.pools, |p| hashes.get(p).copied());
        }
    }

    /// Forgets a slice by name.
    pub fn delete_slice(&mut self, name: &str) {
        let Some(node) = self.slice_node.remove(name) else {
            return;
        };
        self.rev += 1;
        if let Some(e) = self.nodes.get_mut(&node) {
            let slices = Arc::make_mut(&mut e.slices);
            slices.retain(|s| s.metadata.name.as_deref() != Some(name));
            e.ours = slices
                .iter()
                .filter(|s| s.spec.driver == DRIVER_NAME)
                .count();
            e.rev = self.rev;
            let old = std::mem::take(&mut e.pools);
            if e.slices.is_empty() {
                self.nodes.remove(&node);
            } else {
                e.refresh(&node);
            }
            self.reindex(&node, old);
        }
    }

    /// Keeps only the named slices (after a re-list).
    pub fn retain_slices(&mut self, live: &BTreeSet<String>) {
        let gone: Vec<String> = self
            .slice_node
            .keys()
            .filter(|k| !live.contains(*k))
            .cloned()
            .collect();
        for g in gone {
            self.delete_slice(&g);
        }
    }

    /// Sets (or replaces) a claim: its spec, owners, the devices it holds and its
    /// shares of devices that allow multiple allocations. An allocated claim settles the
    /// allocations assumed for the pods that own it or that it is reserved for
    /// ([`DraState::assume`]): its own devices are held now.
    ///
    /// A share whose quantity is not a quantity (the API server refuses one; a watch
    /// cache should never hold it) is kept as written and logged here: the claim is
    /// kept, and every node of that pool is judged neutral (the allocator model refuses
    /// the share, the verdict names it) until the claim is fixed, rather than judged as
    /// if the share were free.
    pub fn apply_claim(&mut self, c: &ResourceClaim) {
        let key = key_of(c);
        self.delete_claim(&key);
        let held = held_devices([c]);
        let shares = held_shares([c]);
        for s in &shares {
            if let Err(e) = s.quantity.parse::<Quantity>() {
                tracing::warn!(
                    claim = %format!("{}/{}", key.0, key.1),
                    device = %s.device.device,
                    capacity = %s.capacity,
                    quantity = %s.quantity,
                    error = %e,
                    "ResourceClaim consumedCapacity is not a quantity; nodes of its pool are judged neutral until it is fixed"
                );
            }
        }
        let owners: Vec<String> = c
            .metadata
            .owner_references
            .iter()
            .flatten()
            .map(|o| o.uid.clone())
            .collect();
        if !held.is_empty() {
            let reserved = c
                .status
                .iter()
                .flat_map(|s| s.reserved_for.iter().flatten());
            for uid in owners.iter().chain(reserved.map(|r| &r.uid)) {
                self.forget_assumed(uid);
            }
        }
        self.hold(
            key,
            ClaimEntry {
                owners,
                spec: c.spec.clone().unwrap_or_default(),
                held,
                shares,
            },
        );
    }

    /// Holds a claim's devices and shares and keeps it.
    fn hold(&mut self, key: ObjKey, entry: ClaimEntry) {
        let mut pools = BTreeSet::new();
        for d in &entry.held {
            let pool = (d.driver.clone(), d.pool.clone());
            self.held
                .entry(pool.clone())
                .or_default()
                .entry(d.clone())
                .or_default()
                .insert(key.clone());
            pools.insert(pool);
        }
        for s in &entry.shares {
            let pool = (s.device.driver.clone(), s.device.pool.clone());
            (self.shares.entry(pool.clone()).or_default())
                .entry(key.clone())
                .or_default()
                .push(s.clone());
            pools.insert(pool);
        }
        for p in pools {
            self.rehash_held(p);
        }
        self.claims.insert(key, entry);
    }

    /// Forgets a claim (its devices and shares become free; another claim's share of a
    /// device it shared stays held).
    pub fn delete_claim(&mut self, key: &ObjKey) {
        let Some(old) = self.claims.remove(key) else {
            return;
        };
        let mut pools = BTreeSet::new();
        for d in &old.held {
            let pool = (d.driver.clone(), d.pool.clone());
            if let Some(m) = self.held.get_mut(&pool) {
                if let Some(keys) = m.get_mut(d) {
                    keys.remove(key);
                    if keys.is_empty() {
                        m.remove(d);
                    }
                }
                if m.is_empty() {
                    self.held.remove(&pool);
                }
            }
            pools.insert(pool);
        }
        for s in &old.shares {
            let pool = (s.device.driver.clone(), s.device.pool.clone());
            if let Some(m) = self.shares.get_mut(&pool) {
                m.remove(key);
                if m.is_empty() {
                    self.shares.remove(&pool);
                }
            }
            pools.insert(pool);
        }
        for p in pools {
            self.rehash_held(p);
        }
    }

    /// [`held_hash`] of what claims other than `skip`'s hold in `pool` (`None`: nothing
    /// held there at all).
    fn pool_hash(&self, pool: &(String, String), skip: &BTreeSet<ObjKey>) -> Option<u64> {
        let devices = self.held.get(pool);
        let shares = self.shares.get(pool);
        if devices.is_none() && shares.is_none() {
            return None;
        }
        let devices = (devices.into_iter().flatten())
            .filter(|(_, keys)| keys.iter().any(|k| !skip.contains(k)))
            .map(|(d, _)| d);
        let shares = (shares.into_iter().flatten())
            .filter(|(k, _)| !skip.contains(*k))
            .flat_map(|(_, v)| v);
        Some(held_hash(devices, shares))
    }

    /// Recomputes one pool's [`held_hash`] and its nodes' fingerprints.
    fn rehash_held(&mut self, pool: (String, String)) {
        match self.pool_hash(&pool, &BTreeSet::new()) {
            Some(h) => {
                self.held_hashes.insert(pool.clone(), h);
            }
            None => {
                self.held_hashes.remove(&pool);
            }
        }
        let nodes: Vec<String> = self
            .pool_nodes
            .get(&pool)
            .into_iter()
            .flatten()
            .cloned()
            .collect();
        for n in nodes {
            self.refresh_held(&n);
        }
    }

    /// Keeps only the given claims (after a re-list); allocations assumed stay.
    pub fn retain_claims(&mut self, live: &BTreeSet<ObjKey>) {
        let gone: Vec<ObjKey> = self
            .claims
            .keys()
            .filter(|k| !live.contains(*k) && !assumed::is_assumed_key(k))
            .cloned()
            .collect();
        for g in gone {
            self.delete_claim(&g);
        }
    }

    /// Sets (or replaces) a claim template.
    pub fn apply_template(&mut self, t: &ResourceClaimTemplate) {
        self.templates
            .insert(key_of(t), t.spec.as_ref().and_then(|s| s.spec.clone()));
    }

    /// Forgets a template.
    pub fn delete_template(&mut self, key: &ObjKey) {
        self.templates.remove(key);
    }

    /// Keeps only the given templates (after a re-list).
    pub fn retain_templates(&mut self, live: &BTreeSet<ObjKey>) {
        self.templates.retain(|k, _| live.contains(k));
    }

    /// Sets (or replaces) a device class.
    pub fn apply_class(&mut self, c: &DeviceClass) {
        if let Some(name) = &c.metadata.name {
            self.classes.insert(name.clone(), c.clone());
            self.classes_changed();
        }
    }

    /// Forgets a device class.
    pub fn delete_class(&mut self, name: &str) {
        if self.classes.remove(name).is_some() {
            self.classes_changed();
        }
    }

    /// Keeps only the named classes (after a re-list).
    pub fn retain_classes(&mut self, live: &BTreeSet<String>) {
        self.classes.retain(|k, _| live.contains(k));
        self.classes_changed();
    }

    fn classes_changed(&mut self) {
        self.ours = Arc::new(
            self.classes
                .values()
                .filter(|c| selects_driver(c))
                .cloned()
                .collect(),
        );
        self.all_classes = Arc::new(self.classes.values().cloned().collect());
        self.classes_rev += 1;
    }

    /// The slices kept for `node`, when it has any.
    pub fn node_slices(&self, node: &str) -> Option<Arc<Vec<ResourceSlice>>> {
        self.nodes.get(node).map(|n| n.slices.clone())
    }

    /// Nodes with slices (of any driver kept).
    pub fn node_count(&self) -> usize {
        self.nodes.len()
    }

    /// Claims known (allocations assumed not counted).
    pub fn claim_count(&self) -> usize {
        self.claims.len() - self.assumed.len()
    }

    /// Devices held by allocated claims.
    pub fn held_count(&self) -> usize {
        self.held.values().map(BTreeMap::len).sum()
    }
}

mod assumed;
mod claims;
mod judging;
mod table;

pub(crate) use assumed::ASSUME_FOR;
pub(crate) use judging::{Gathered, Job, Keyed};

#[cfg(test)]
mod tests;
