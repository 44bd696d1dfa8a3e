//! The DRA path's view of the cluster: the ResourceSlices by node (`topoalign.dev`'s and
//! the other drivers' — every driver, or those named with `--dra-drivers`), every
//! ResourceClaim (the allocated ones hold devices), ResourceClaimTemplates and
//! DeviceClasses, filled by the watchers in [`crate::dra::watch`] and read by the
//! scheduler calls (never a list per request).
//!
//! Per call, [`DraState::resolve`] finds the pod's claims the way the scheduler does
//! (`resourceClaimName`, or for `resourceClaimTemplateName` the generated claim named in
//! `status.resourceClaimStatuses`, checked to be owned by the pod; while that claim is not
//! seen yet, the template's spec), and [`DraShared::visit`] judges each candidate on the
//! node's slices minus the devices other claims hold: claims of topoalign's classes with
//! [`crate::dra::judge::judge_with_budget`], claims of other drivers' classes with
//! [`crate::dra::foreign::judge_foreign`]. The pod's own claims, allocated already when it
//! is scheduled again, do not count as taken. The state's lock is held only to gather
//! what each node's judgement needs (shared, not copied) and the verdict cache's only to
//! look up and store: no lock is held across a judgement.

use std::collections::hash_map::DefaultHasher;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::hash::{Hash, Hasher};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Instant;

use k8s_openapi::api::core::v1::{PodResourceClaim, PodResourceClaimStatus};
use k8s_openapi::api::resource::v1::{
    DeviceClass, ResourceClaim, ResourceClaimSpec, ResourceClaimTemplate, ResourceSlice,
};
use serde_json::Value;
use topoalign_dra::{DRIVER_NAME, DeviceId};

use crate::dra::foreign::judge_foreign;
use crate::dra::judge::{
    CAPACITY_WEIGHT, CapacityLevels, DraFit, DraVerdict, SEARCH_BUDGET, allocated_ids, dra_score,
    foreign_score, judge_with_budget,
};
use crate::score::NEUTRAL_SCORE;

/// `(namespace, name)` of a claim or template.
pub(crate) type ObjKey = (String, String);

/// Verdicts kept before the cache starts over.
const CACHE_LIMIT: usize = 100_000;

/// What the state keeps of one claim.
#[derive(Debug, Clone)]
struct ClaimEntry {
    owners: Vec<String>,
    spec: ResourceClaimSpec,
    held: BTreeSet<DeviceId>,
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
/// and name, which this order keeps, and the verdicts of [`shareable`] kinds name no
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

/// Whether a verdict may be shared by every node of a kind: it names no device, pool,
/// slice or node (a fit, a rejection, a search out of budget). Errors and blind verdicts
/// name what they could not read, so they stay the node's own.
fn shareable(v: &DraNode) -> bool {
    matches!(
        v,
        DraNode::Fit(_) | DraNode::Reject(_) | DraNode::Neutral(DraNeutral::Budget(_))
    )
}

/// The fingerprint of the devices held in one pool: their names in order.
fn held_hash<'a>(devices: impl Iterator<Item = &'a DeviceId>) -> u64 {
    let mut h = DefaultHasher::new();
    for d in devices {
        d.device.hash(&mut h);
    }
    h.finish()
}

/// The DRA objects the extender needs, indexed for the scheduler calls.
#[derive(Debug, Clone)]
pub struct DraState {
    nodes: HashMap<String, NodeSlices>,
    slice_node: HashMap<String, String>,
    claims: HashMap<ObjKey, ClaimEntry>,
    /// Devices held by allocated claims, by (driver, pool).
    held: HashMap<(String, String), BTreeMap<DeviceId, ObjKey>>,
    /// [`held_hash`] of each pool in `held`.
    held_hashes: HashMap<(String, String), u64>,
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
    /// The weight of the capacity a placement uses up ([`crate::dra::judge::capacity_penalty`]).
    pub capacity_weight: f64,
}

impl Default for DraState {
    fn default() -> Self {
        DraState {
            nodes: HashMap::new(),
            slice_node: HashMap::new(),
            claims: HashMap::new(),
            held: HashMap::new(),
            held_hashes: HashMap::new(),
            templates: HashMap::new(),
            classes: BTreeMap::new(),
            ours: Arc::default(),
            all_classes: Arc::default(),
            classes_rev: 0,
            drivers: None,
            rev: 0,
            budget: SEARCH_BUDGET,
            capacity_weight: CAPACITY_WEIGHT,
        }
    }
}

/// A pod's claims as the DRA path reads them.
#[derive(Debug, Clone, PartialEq)]
pub enum PodClaims {
    /// No `spec.resourceClaims`, or none of them uses a known DeviceClass: not the DRA
    /// path's pod.
    NotOurs,
    /// The claims cannot be judged now (neutral everywhere, never filtered): a metrics
    /// label and why.
    Unjudged(&'static str, String),
    /// The claim specs to judge.
    Judge(Resolved),
}

/// The claims of one pod, ready to judge.
#[derive(Debug, Clone, PartialEq)]
pub struct Resolved {
    /// The specs of the claims that use known classes, in pod order.
    pub specs: Vec<ResourceClaimSpec>,
    /// Whether some claim uses other drivers' classes (judged with
    /// [`crate::dra::foreign::judge_foreign`] on every class); else every claim uses
    /// topoalign's.
    pub foreign: bool,
    /// The pod's own claims (their devices are not taken from it).
    pub own: BTreeSet<ObjKey>,
    /// Claims judged on their template's spec (the generated claim not seen yet).
    pub from_template: usize,
    /// A hash of the specs (cache key part).
    pub hash: u64,
}

/// Why a node passes with the neutral score on the DRA path.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum DraNeutral {
    /// The node has no slices of the driver (not a topoalign node, or not published yet).
    NoSlices,
    /// The allocator's search ran out of budget.
    Budget(String),
    /// The claim or the slices could not be evaluated (unsupported CEL, bad quantity …).
    Error(String),
    /// Other drivers' devices that publish no NUMA node or PCI address: the pairs' class
    /// is unknown.
    Blind(String),
    /// The call's work budget ran out before the node was judged.
    OverBudget,
}

impl DraNeutral {
    /// The metrics label.
    pub fn label(&self) -> &'static str {
        match self {
            DraNeutral::NoSlices => "dra_no_slices",
            DraNeutral::Budget(_) => "dra_budget",
            DraNeutral::Error(_) => "dra_error",
            DraNeutral::Blind(_) => "dra_blind",
            DraNeutral::OverBudget => "dra_over_budget",
        }
    }

    /// Why, in words.
    pub fn why(&self) -> &str {
        match self {
            DraNeutral::NoSlices => "no ResourceSlices for the claims on the node",
            DraNeutral::OverBudget => "the call's work budget ran out before the node was judged",
            DraNeutral::Budget(w) | DraNeutral::Error(w) | DraNeutral::Blind(w) => w,
        }
    }
}

/// One node's DRA decision.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum DraNode {
    /// Every claim can be allocated: what the allocation reaches and costs (scored
    /// against the other candidates with [`crate::dra::judge::dra_score`]).
    Fit(DraFit),
    /// Some claim cannot be allocated on the node's free devices.
    Reject(String),
    /// Not judged: passes with the neutral score.
    Neutral(DraNeutral),
}

impl DraNode {
    /// The outcome label of the `dra_verdicts` metric.
    pub fn outcome(&self) -> &'static str {
        match self {
            DraNode::Fit(..) => "fit",
            DraNode::Reject(_) => "reject",
            DraNode::Neutral(n) => n.label(),
        }
    }
}

/// The priorities of a pod's candidates (in order) from their DRA verdicts, scored
/// against each other: the capacity a placement uses up weighs by how many candidates can
/// still hold as many pairs ([`CapacityLevels`]); claims of other drivers (`foreign`)
/// score by the class the stock allocator gives first ([`foreign_score`]), topoalign's
/// by [`dra_score`]. A rejected node scores 0, a node not judged the neutral score.
pub fn priorities(verdicts: &[Option<&DraNode>], foreign: bool, weight: f64) -> Vec<i64> {
    let levels = CapacityLevels::of(verdicts.iter().filter_map(|v| match v {
        Some(DraNode::Fit(f)) => Some(f.capacity_before),
        _ => None,
    }));
    verdicts
        .iter()
        .map(|v| match v {
            Some(DraNode::Fit(f)) if foreign => foreign_score(f, &levels, weight),
            Some(DraNode::Fit(f)) => dra_score(f, &levels, weight),
            Some(DraNode::Reject(_)) => 0,
            _ => NEUTRAL_SCORE,
        })
        .collect()
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
        let e = self.nodes.entry(node.clone()).or_default();
        let slices = Arc::make_mut(&mut e.slices);
        slices.push(s.clone());
        slices.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
        e.ours += usize::from(s.spec.driver == DRIVER_NAME);
        e.rev = self.rev;
        e.refresh(&node);
        self.slice_node.insert(name, node);
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
            if e.slices.is_empty() {
                self.nodes.remove(&node);
            } else {
                e.refresh(&node);
            }
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

    /// Sets (or replaces) a claim: its spec, owners and the devices it holds.
    pub fn apply_claim(&mut self, c: &ResourceClaim) {
        let key = key_of(c);
        self.delete_claim(&key);
        let held = allocated_ids([c]);
        let mut pools = BTreeSet::new();
        for d in &held {
            let pool = (d.driver.clone(), d.pool.clone());
            self.held
                .entry(pool.clone())
                .or_default()
                .insert(d.clone(), key.clone());
            pools.insert(pool);
        }
        for p in pools {
            self.rehash_held(p);
        }
        let owners = c
            .metadata
            .owner_references
            .iter()
            .flatten()
            .map(|o| o.uid.clone())
            .collect();
        self.claims.insert(
            key,
            ClaimEntry {
                owners,
                spec: c.spec.clone().unwrap_or_default(),
                held,
            },
        );
    }

    /// Forgets a claim (its devices become free).
    pub fn delete_claim(&mut self, key: &ObjKey) {
        let Some(old) = self.claims.remove(key) else {
            return;
        };
        let mut pools = BTreeSet::new();
        for d in &old.held {
            let pool = (d.driver.clone(), d.pool.clone());
            if let Some(m) = self.held.get_mut(&pool) {
                m.remove(d);
                if m.is_empty() {
                    self.held.remove(&pool);
                }
            }
            pools.insert(pool);
        }
        for p in pools {
            self.rehash_held(p);
        }
    }

    /// Recomputes one pool's [`held_hash`].
    fn rehash_held(&mut self, pool: (String, String)) {
        match self.held.get(&pool) {
            Some(m) => {
                self.held_hashes.insert(pool, held_hash(m.keys()));
            }
            None => {
                self.held_hashes.remove(&pool);
            }
        }
    }

    /// Keeps only the given claims (after a re-list).
    pub fn retain_claims(&mut self, live: &BTreeSet<ObjKey>) {
        let gone: Vec<ObjKey> = self
            .claims
            .keys()
            .filter(|k| !live.contains(*k))
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

    /// Claims known.
    pub fn claim_count(&self) -> usize {
        self.claims.len()
    }

    /// Devices held by allocated claims.
    pub fn held_count(&self) -> usize {
        self.held.values().map(BTreeMap::len).sum()
    }

    fn is_ours(&self, class: &str) -> bool {
        self.ours
            .iter()
            .any(|c| c.metadata.name.as_deref() == Some(class))
    }

    /// Finds the claims of `pod` (a decoded `v1.Pod`) as the scheduler does.
    pub fn resolve(&self, pod: &Value) -> PodClaims {
        let Some(list) = pod.pointer("/spec/resourceClaims") else {
            return PodClaims::NotOurs;
        };
        let podclaims: Vec<PodResourceClaim> = match serde_json::from_value(list.clone()) {
            Ok(v) => v,
            Err(e) => {
                return PodClaims::Unjudged(
                    "dra_bad_pod",
                    format!("Pod spec.resourceClaims: {e} (expected a list of PodResourceClaim)"),
                );
            }
        };
        if podclaims.is_empty() {
            return PodClaims::NotOurs;
        }
        let statuses: Vec<PodResourceClaimStatus> = pod
            .pointer("/status/resourceClaimStatuses")
            .and_then(|v| serde_json::from_value(v.clone()).ok())
            .unwrap_or_default();
        let text = |p: &str| pod.pointer(p).and_then(Value::as_str).unwrap_or("");
        let (ns, uid) = (text("/metadata/namespace"), text("/metadata/uid"));
        let mut resolved = Resolved {
            specs: Vec::new(),
            foreign: false,
            own: BTreeSet::new(),
            from_template: 0,
            hash: 0,
        };
        let mut unseen = Vec::new();
        let mut h = DefaultHasher::new();
        for pc in &podclaims {
            let spec = match (&pc.resource_claim_name, &pc.resource_claim_template_name) {
                (Some(name), _) => {
                    let key = (ns.to_string(), name.clone());
                    match self.claims.get(&key) {
                        Some(c) => {
                            resolved.own.insert(key);
                            c.spec.clone()
                        }
                        None => {
                            unseen.push(format!("claim {ns}/{name}"));
                            continue;
                        }
                    }
                }
                (None, Some(template)) => {
                    let generated = statuses.iter().find(|s| s.name == pc.name);
                    if let Some(PodResourceClaimStatus {
                        resource_claim_name: None,
                        ..
                    }) = generated
                    {
                        continue; // no claim needed
                    }
                    let key = generated
                        .and_then(|s| s.resource_claim_name.clone())
                        .map(|n| (ns.to_string(), n));
                    let claim = key.as_ref().and_then(|k| {
                        self.claims
                            .get(k)
                            .filter(|c| uid.is_empty() || c.owners.iter().any(|o| o == uid))
                    });
                    match (claim, key) {
                        (Some(c), Some(k)) => {
                            resolved.own.insert(k);
                            c.spec.clone()
                        }
                        _ => match self.templates.get(&(ns.to_string(), template.clone())) {
                            Some(Some(spec)) => {
                                resolved.from_template += 1;
                                spec.clone()
                            }
                            _ => {
                                unseen.push(format!("template {ns}/{template}"));
                                continue;
                            }
                        },
                    }
                }
                (None, None) => continue,
            };
            let names = class_names(&spec);
            let ours = names.iter().filter(|n| self.is_ours(n)).count();
            let known = names
                .iter()
                .filter(|n| self.classes.contains_key(**n))
                .count();
            if known == 0 {
                continue; // no class the cluster has: not for any driver here
            }
            if known < names.len() {
                let missing: Vec<&str> = names
                    .iter()
                    .copied()
                    .filter(|n| !self.classes.contains_key(*n))
                    .collect();
                unseen.push(format!("DeviceClass {}", missing.join(", ")));
                continue;
            }
            if ours > 0 && ours < names.len() {
                return PodClaims::Unjudged(
                    "dra_mixed",
                    format!(
                        "claim {:?} mixes topoalign.dev classes with other classes ({})",
                        pc.name,
                        names.join(", ")
                    ),
                );
            }
            resolved.foreign |= ours == 0;
            hash_json(&spec, &mut h);
            resolved.specs.push(spec);
        }
        if !unseen.is_empty() {
            return PodClaims::Unjudged(
                "dra_claim_unseen",
                format!("not seen yet: {}", unseen.join(", ")),
            );
        }
        if resolved.specs.is_empty() {
            return PodClaims::NotOurs;
        }
        resolved.foreign.hash(&mut h);
        resolved.hash = h.finish();
        PodClaims::Judge(resolved)
    }

    /// The devices other claims hold on the node's pools (the pod's own claims' devices
    /// are not taken from it).
    fn taken(&self, ns: &NodeSlices, own: &BTreeSet<ObjKey>) -> BTreeSet<DeviceId> {
        ns.pools
            .iter()
            .filter_map(|p| self.held.get(p))
            .flat_map(|m| {
                m.iter()
                    .filter(|(_, k)| !own.contains(*k))
                    .map(|(d, _)| d.clone())
            })
            .collect()
    }

    /// The pools in which the pod's own claims hold devices (usually none).
    fn own_pools(&self, own: &BTreeSet<ObjKey>) -> BTreeSet<(String, String)> {
        own.iter()
            .filter_map(|k| self.claims.get(k))
            .flat_map(|c| c.held.iter())
            .map(|d| (d.driver.clone(), d.pool.clone()))
            .collect()
    }

    /// The verdict cache keys of `node` for the pod's claims, or the verdict when there is
    /// nothing to judge. Cheap: no device set is built (the held devices' fingerprints are
    /// kept per pool), unless the pod's own claims hold devices in the node's pools.
    fn keys(&self, claims: &Resolved, node: &str, own_pools: &BTreeSet<(String, String)>) -> Keyed {
        let Some(ns) = self.nodes.get(node) else {
            return Keyed::Done(DraNode::Neutral(DraNeutral::NoSlices));
        };
        if !claims.foreign && ns.ours == 0 {
            return Keyed::Done(DraNode::Neutral(DraNeutral::NoSlices));
        }
        let mut h = DefaultHasher::new();
        (ns.kind, self.classes_rev, self.budget).hash(&mut h);
        for p in &ns.pools {
            let held = if own_pools.contains(p) {
                self.held.get(p).map(|m| {
                    held_hash(
                        m.iter()
                            .filter(|(_, k)| !claims.own.contains(*k))
                            .map(|(d, _)| d),
                    )
                })
            } else {
                self.held_hashes.get(p).copied()
            };
            held.hash(&mut h);
        }
        let kind = h.finish();
        let mut h = DefaultHasher::new();
        (kind, node, ns.rev).hash(&mut h);
        Keyed::Keys(Keys {
            shared: (claims.hash, kind),
            own: (claims.hash, h.finish()),
        })
    }

    /// Judges one node for a pod's claims.
    pub fn judge_node(&self, claims: &Resolved, node: &str) -> DraNode {
        match self.gather(claims, node) {
            Gathered::Done(v) => v,
            Gathered::Job(job) => job.judge(claims),
        }
    }

    /// What judging `node` needs, shared from the state (or the verdict, when there is
    /// nothing to judge), with its cache keys.
    fn gather(&self, claims: &Resolved, node: &str) -> Gathered {
        let own_pools = self.own_pools(&claims.own);
        let keys = match self.keys(claims, node, &own_pools) {
            Keyed::Done(v) => return Gathered::Done(v),
            Keyed::Keys(k) => k,
        };
        let Some(ns) = self.nodes.get(node) else {
            return Gathered::Done(DraNode::Neutral(DraNeutral::NoSlices));
        };
        Gathered::Job(Job {
            keys,
            node: node.to_string(),
            slices: ns.slices.clone(),
            classes: if claims.foreign {
                self.all_classes.clone()
            } else {
                self.ours.clone()
            },
            taken: self.taken(ns, &claims.own),
            budget: self.budget,
        })
    }
}

/// The verdict cache keys of one node for one pod's claims: (claims, fingerprint).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct Keys {
    /// Shared by the nodes of one kind with the same devices held ([`shareable`]
    /// verdicts).
    shared: (u64, u64),
    /// The node's own (its name and slice revision too): verdicts that name what they
    /// could not read.
    own: (u64, u64),
}

enum Keyed {
    Done(DraNode),
    Keys(Keys),
}

/// One node's judgement, ready to run with no lock held.
struct Job {
    keys: Keys,
    node: String,
    slices: Arc<Vec<ResourceSlice>>,
    classes: Arc<Vec<DeviceClass>>,
    taken: BTreeSet<DeviceId>,
    budget: u64,
}

enum Gathered {
    Done(DraNode),
    Job(Job),
}

impl Job {
    fn judge(&self, claims: &Resolved) -> DraNode {
        let judge = if claims.foreign {
            judge_foreign
        } else {
            judge_with_budget
        };
        match judge(
            &claims.specs,
            &self.classes,
            &self.slices,
            &self.node,
            &self.taken,
            self.budget,
        ) {
            Ok(DraVerdict::Fit { fit, .. }) => DraNode::Fit(fit),
            Ok(DraVerdict::Reject(m)) => DraNode::Reject(m),
            Ok(DraVerdict::Undecided(w)) => DraNode::Neutral(DraNeutral::Budget(w)),
            Ok(DraVerdict::Blind(w)) => DraNode::Neutral(DraNeutral::Blind(w)),
            Err(e) => DraNode::Neutral(DraNeutral::Error(e.to_string())),
        }
    }
}

/// Verdicts by (claims, node fingerprint), shared with the calls that read them.
type VerdictMap = HashMap<(u64, u64), Arc<DraNode>>;

/// The DRA state shared by the watchers and the handlers, its readiness and a verdict
/// cache keyed by (claims, node fingerprint): nodes of one kind (the same slices but for
/// their names) with the same devices held share a verdict, so a pod's first call judges
/// each kind of node once, not each node.
#[derive(Debug)]
pub struct DraShared {
    /// The state.
    pub state: RwLock<DraState>,
    ready: AtomicBool,
    cache: Mutex<VerdictMap>,
}

impl Default for DraShared {
    fn default() -> Self {
        DraShared::new()
    }
}

impl DraShared {
    /// An empty state, ready (nothing to wait for until [`DraShared::expect_lists`]).
    pub fn new() -> Self {
        DraShared {
            state: RwLock::new(DraState::default()),
            ready: AtomicBool::new(true),
            cache: Mutex::new(HashMap::new()),
        }
    }

    /// Not ready until the DRA watchers have listed once.
    pub fn expect_lists(&self) {
        self.ready.store(false, Ordering::SeqCst);
    }

    /// Marks the first lists done.
    pub fn set_ready(&self) {
        self.ready.store(true, Ordering::SeqCst);
    }

    /// Whether the DRA watchers have listed (or are not expected).
    pub fn is_ready(&self) -> bool {
        self.ready.load(Ordering::SeqCst)
    }

    /// Reads the state.
    pub fn read(&self) -> std::sync::RwLockReadGuard<'_, DraState> {
        self.state.read().unwrap_or_else(|p| p.into_inner())
    }

    /// Writes the state.
    pub fn write(&self) -> std::sync::RwLockWriteGuard<'_, DraState> {
        self.state.write().unwrap_or_else(|p| p.into_inner())
    }

    /// The pod's claims ([`DraState::resolve`]).
    pub fn resolve(&self, pod: &Value) -> PodClaims {
        self.read().resolve(pod)
    }

    fn cache(&self) -> std::sync::MutexGuard<'_, VerdictMap> {
        self.cache.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Calls `f(index, name, decision)` for every candidate in order. The state is read
    /// (and the cache looked up) first; the nodes not cached are judged with no lock
    /// held, one per kind and devices held (the others of the kind take its verdict when
    /// it names no device, pool or slice: a fit, a rejection, a search out of budget;
    /// else each is judged), until `deadline` (the rest pass neutral:
    /// [`DraNeutral::OverBudget`], not cached), and their verdicts stored.
    pub fn visit<N: AsRef<str>>(
        &self,
        claims: &Resolved,
        names: &[N],
        deadline: Option<Instant>,
        mut f: impl FnMut(usize, &str, &DraNode),
    ) {
        let verdicts = self.judge_nodes(claims, names, deadline);
        for (i, (n, v)) in names.iter().zip(&verdicts).enumerate() {
            f(i, n.as_ref(), v);
        }
    }

    /// Every candidate's decision, in order, as [`DraShared::visit`] finds them (shared,
    /// so that a call can keep them to score the candidates against each other).
    pub fn judge_nodes<N: AsRef<str>>(
        &self,
        claims: &Resolved,
        names: &[N],
        deadline: Option<Instant>,
    ) -> Vec<Arc<DraNode>> {
        let mut verdicts: Vec<Option<Arc<DraNode>>> = vec![None; names.len()];
        // Per kind not cached: the first node's job and the other nodes' indices.
        let mut groups: Vec<(usize, Job, Vec<usize>)> = Vec::new();
        {
            let state = self.read();
            let own_pools = state.own_pools(&claims.own);
            let keyed: Vec<Keyed> = names
                .iter()
                .map(|n| state.keys(claims, n.as_ref(), &own_pools))
                .collect();
            let mut group_of: HashMap<(u64, u64), usize> = HashMap::new();
            let mut misses = Vec::new();
            {
                let cache = self.cache();
                for (i, k) in keyed.into_iter().enumerate() {
                    match k {
                        Keyed::Done(v) => verdicts[i] = Some(Arc::new(v)),
                        Keyed::Keys(k) => {
                            let hit = cache.get(&k.shared).or_else(|| cache.get(&k.own));
                            match hit {
                                Some(v) => verdicts[i] = Some(v.clone()),
                                None => misses.push((i, k)),
                            }
                        }
                    }
                }
            }
            for (i, k) in misses {
                match group_of.get(&k.shared) {
                    Some(&g) => groups[g].2.push(i),
                    None => {
                        if let Gathered::Job(job) = state.gather(claims, names[i].as_ref()) {
                            group_of.insert(k.shared, groups.len());
                            groups.push((i, job, Vec::new()));
                        }
                    }
                }
            }
        }
        let mut fresh: Vec<((u64, u64), Arc<DraNode>)> = Vec::new();
        let mut alone = Vec::new();
        for (first, job, others) in &groups {
            if deadline.is_some_and(|d| Instant::now() >= d) {
                break;
            }
            let judged = Arc::new(job.judge(claims));
            verdicts[*first] = Some(judged.clone());
            if shareable(&judged) {
                for &i in others {
                    verdicts[i] = Some(judged.clone());
                }
                fresh.push((job.keys.shared, judged));
            } else {
                fresh.push((job.keys.own, judged));
                alone.extend(others.iter().copied());
            }
        }
        if !alone.is_empty() {
            let jobs: Vec<(usize, Gathered)> = {
                let state = self.read();
                alone
                    .into_iter()
                    .map(|i| (i, state.gather(claims, names[i].as_ref())))
                    .collect()
            };
            for (i, g) in jobs {
                if deadline.is_some_and(|d| Instant::now() >= d) {
                    break;
                }
                let judged = Arc::new(match g {
                    Gathered::Done(v) => v,
                    Gathered::Job(job) => {
                        let v = job.judge(claims);
                        let key = if shareable(&v) {
                            job.keys.shared
                        } else {
                            job.keys.own
                        };
                        let v = Arc::new(v);
                        fresh.push((key, v.clone()));
                        verdicts[i] = Some(v);
                        continue;
                    }
                });
                verdicts[i] = Some(judged);
            }
        }
        if !fresh.is_empty() {
            let mut cache = self.cache();
            if cache.len() + fresh.len() > CACHE_LIMIT {
                cache.clear();
            }
            cache.extend(fresh);
        }
        let over = Arc::new(DraNode::Neutral(DraNeutral::OverBudget));
        verdicts
            .into_iter()
            .map(|v| v.unwrap_or_else(|| over.clone()))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use topoalign_dra::{ClaimSpec, PublishOptions, claim_spec, device_classes, resource_slices};

    fn state_with(nodes: &[(&str, &str)]) -> DraState {
        let mut st = DraState::default();
        for c in device_classes() {
            st.apply_class(&c);
        }
        for (node, profile) in nodes {
            let topo = topoalign_profiles::get(profile).unwrap();
            for s in resource_slices(&topo, node, &PublishOptions::default()).unwrap() {
                st.apply_slice(&s);
            }
        }
        st
    }

    fn pairs(n: u32) -> ResourceClaimSpec {
        claim_spec(&ClaimSpec::pairs(n)).unwrap()
    }

    /// A claim object, allocated to `devices` of `node` when given.
    fn claim(
        ns: &str,
        name: &str,
        owner: &str,
        spec: ResourceClaimSpec,
        node: &str,
        devices: &[String],
    ) -> ResourceClaim {
        let results: Vec<Value> = devices
            .iter()
            .map(|d| json!({"request": "pairs", "driver": DRIVER_NAME, "pool": node, "device": d}))
            .collect();
        let mut v = json!({
            "metadata": {"namespace": ns, "name": name,
                         "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": "p", "uid": owner}]},
            "spec": spec,
        });
        if !devices.is_empty() {
            v["status"] = json!({"allocation": {"devices": {"results": results}}});
        }
        serde_json::from_value(v).unwrap()
    }

    fn pod(claims: Value, statuses: Value) -> Value {
        json!({"metadata": {"namespace": "ns", "name": "p", "uid": "u1"},
               "spec": {"containers": [], "resourceClaims": claims},
               "status": {"resourceClaimStatuses": statuses}})
    }

    fn resolved(st: &DraState, p: &Value) -> Resolved {
        match st.resolve(p) {
            PodClaims::Judge(r) => r,
            other => panic!("{other:?}"),
        }
    }

    /// The devices the stock allocator would give `n` pairs on an empty `node`.
    fn first_pairs(st: &DraState, node: &str, n: u32) -> Vec<String> {
        let slices = &st.nodes[node].slices;
        match crate::dra::judge::judge(&[pairs(n)], &st.ours, slices, node, &BTreeSet::new())
            .unwrap()
        {
            DraVerdict::Fit { devices, .. } => devices.into_iter().map(|d| d.device).collect(),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn claims_are_found_by_name_and_by_template() {
        let mut st = state_with(&[("n1", "mi300x-8")]);
        // By name.
        st.apply_claim(&claim("ns", "mine", "other", pairs(2), "n1", &[]));
        let r = resolved(
            &st,
            &pod(
                json!([{"name": "a", "resourceClaimName": "mine"}]),
                json!([]),
            ),
        );
        assert_eq!(r.specs, vec![pairs(2)]);
        assert!(r.own.contains(&("ns".into(), "mine".into())));
        // By name, not seen yet: neutral, never guessed.
        let p = pod(
            json!([{"name": "a", "resourceClaimName": "later"}]),
            json!([]),
        );
        assert!(
            matches!(st.resolve(&p), PodClaims::Unjudged("dra_claim_unseen", ref w) if w.contains("ns/later"))
        );
        // From a template, the generated claim not created yet: the template's spec.
        let t: ResourceClaimTemplate = serde_json::from_value(json!({
            "metadata": {"namespace": "ns", "name": "four"}, "spec": {"spec": pairs(4)}}))
        .unwrap();
        st.apply_template(&t);
        let p = pod(
            json!([{"name": "g", "resourceClaimTemplateName": "four"}]),
            json!([]),
        );
        let r = resolved(&st, &p);
        assert_eq!((r.specs.clone(), r.from_template), (vec![pairs(4)], 1));
        // The generated claim exists and is the pod's: its own spec.
        st.apply_claim(&claim("ns", "p-g-x1", "u1", pairs(3), "n1", &[]));
        let p = pod(
            json!([{"name": "g", "resourceClaimTemplateName": "four"}]),
            json!([{"name": "g", "resourceClaimName": "p-g-x1"}]),
        );
        let r = resolved(&st, &p);
        assert_eq!((r.specs.clone(), r.from_template), (vec![pairs(3)], 0));
        // A claim of that name owned by another pod is not this pod's: the template.
        st.apply_claim(&claim("ns", "p-g-x1", "someone-else", pairs(3), "n1", &[]));
        assert_eq!(resolved(&st, &p).specs, vec![pairs(4)]);
        // Status says no claim is needed.
        let p = pod(
            json!([{"name": "g", "resourceClaimTemplateName": "four"}]),
            json!([{"name": "g"}]),
        );
        assert_eq!(st.resolve(&p), PodClaims::NotOurs);
        // No claims, or only other drivers' classes: not the DRA path's pod.
        assert_eq!(
            st.resolve(&json!({"spec": {"containers": []}})),
            PodClaims::NotOurs
        );
        let mut foreign = pairs(1);
        if let Some(r) = foreign.devices.as_mut().and_then(|d| d.requests.as_mut()) {
            r[0].exactly.as_mut().unwrap().device_class_name = "gpu.nvidia.com".into();
        }
        st.apply_claim(&claim("ns", "nv", "u1", foreign, "n1", &[]));
        let p = pod(json!([{"name": "a", "resourceClaimName": "nv"}]), json!([]));
        assert_eq!(st.resolve(&p), PodClaims::NotOurs);
        // A malformed list is named.
        let p = pod(json!([{"name": 3}]), json!([]));
        assert!(
            matches!(st.resolve(&p), PodClaims::Unjudged("dra_bad_pod", ref w) if w.contains("spec.resourceClaims"))
        );
    }

    #[test]
    fn held_devices_are_taken_except_the_pods_own() {
        let mut st = state_with(&[("n1", "mi300x-8")]);
        let all = first_pairs(&st, "n1", 8);
        // Another pod's allocated claim holds every GPU: a 1-pair claim cannot fit.
        st.apply_claim(&claim("ns", "theirs", "u9", pairs(8), "n1", &all));
        assert_eq!(st.held_count(), 8);
        st.apply_claim(&claim("ns", "mine", "u1", pairs(1), "n1", &[]));
        let p = pod(
            json!([{"name": "a", "resourceClaimName": "mine"}]),
            json!([]),
        );
        let r = resolved(&st, &p);
        assert!(matches!(st.judge_node(&r, "n1"), DraNode::Reject(ref m) if m.contains("claim 0")));
        // The pod's own claim allocated to those devices (the pod scheduled again): they
        // are not counted against it.
        st.delete_claim(&("ns".into(), "theirs".into()));
        assert_eq!(st.held_count(), 0);
        st.apply_claim(&claim("ns", "mine", "u1", pairs(8), "n1", &all));
        let r = resolved(&st, &p);
        match st.judge_node(&r, "n1") {
            DraNode::Fit(f) => assert_eq!((f.ranks.len(), f.capacity_before), (8, 8)),
            other => panic!("{other:?}"),
        }
        // Deleting the claim frees its devices for everyone.
        st.retain_claims(&BTreeSet::new());
        assert_eq!((st.held_count(), st.claim_count()), (0, 0));
    }

    #[test]
    fn nodes_without_slices_and_exhausted_searches_are_neutral() {
        let mut st = state_with(&[("n1", "dgx-h100")]);
        st.apply_claim(&claim("ns", "mine", "u1", pairs(2), "n1", &[]));
        let p = pod(
            json!([{"name": "a", "resourceClaimName": "mine"}]),
            json!([]),
        );
        let r = resolved(&st, &p);
        assert_eq!(
            st.judge_node(&r, "elsewhere"),
            DraNode::Neutral(DraNeutral::NoSlices)
        );
        // A free node: 8 pairs before, 6 after the pod's two.
        assert!(matches!(
            st.judge_node(&r, "n1"),
            DraNode::Fit(f) if (f.capacity_before, f.capacity_after, f.gpus) == (8, 6, 2)
        ));
        // A budget too small for the search: no judgement, never a rejection.
        st.budget = 1;
        let v = st.judge_node(&r, "n1");
        assert!(
            matches!(v, DraNode::Neutral(DraNeutral::Budget(_))),
            "{v:?}"
        );
        assert_eq!(v.outcome(), "dra_budget");
        // Slices removed by a re-list: the node is no longer a topoalign node.
        st.budget = SEARCH_BUDGET;
        st.retain_slices(&BTreeSet::new());
        assert_eq!(st.node_count(), 0);
        assert_eq!(
            st.judge_node(&r, "n1"),
            DraNode::Neutral(DraNeutral::NoSlices)
        );
    }

    #[test]
    fn a_slice_with_an_unreadable_counter_is_neutral_and_named() {
        let mut st = state_with(&[("n1", "gb300-4")]);
        let mut bad = st.nodes["n1"].slices[0].clone();
        let set = bad
            .spec
            .shared_counters
            .as_mut()
            .unwrap()
            .first_mut()
            .unwrap();
        let (counter, value) = set.counters.iter_mut().next().unwrap();
        let counter = counter.clone();
        value.value.0 = "lots".into();
        st.apply_slice(&bad);
        st.apply_template(&{
            let mut t = topoalign_dra::claim_template(&ClaimSpec::pairs(1)).unwrap();
            t.metadata.namespace = Some("ns".into());
            t.metadata.name = Some("one".into());
            t
        });
        let p = pod(
            json!([{"name": "a", "resourceClaimTemplateName": "one"}]),
            json!([]),
        );
        let r = resolved(&st, &p);
        match st.judge_node(&r, "n1") {
            DraNode::Neutral(n @ DraNeutral::Error(_)) => {
                let why = n.why();
                let slice = bad.metadata.name.as_deref().unwrap();
                assert!(why.contains(slice) && why.contains(&counter), "{why}");
                assert_eq!(n.label(), "dra_error");
            }
            other => panic!("a bad counter must not judge the node: {other:?}"),
        }
    }

    #[test]
    fn the_shared_cache_follows_changes() {
        let shared = DraShared::new();
        {
            let mut st = shared.write();
            *st = state_with(&[("n1", "mi300x-8"), ("n2", "gb300-4")]);
            st.apply_claim(&claim("ns", "mine", "u1", pairs(1), "n1", &[]));
        }
        let p = pod(
            json!([{"name": "a", "resourceClaimName": "mine"}]),
            json!([]),
        );
        let PodClaims::Judge(r) = shared.resolve(&p) else {
            panic!()
        };
        let run = |r: &Resolved| {
            let mut out = Vec::new();
            shared.visit(r, &["n1", "n2", "n3"], None, |_, n, v| {
                out.push((n.to_string(), v.clone()))
            });
            out
        };
        let first = run(&r);
        // mi300x-8 has PIX pairs (rank 0), gb300-4 only NODE pairs (rank 3).
        assert!(matches!(&first[0].1, DraNode::Fit(f) if f.ranks == [0] && f.capacity_before == 8));
        assert!(matches!(&first[1].1, DraNode::Fit(f) if f.ranks == [3] && f.capacity_before == 4));
        assert_eq!(first[2].1, DraNode::Neutral(DraNeutral::NoSlices));
        assert_eq!(run(&r), first, "cached verdicts are the same");
        // n1's PIX pairs all taken by another claim: the cached verdict is not reused.
        let all = first_pairs(&shared.read(), "n1", 8);
        shared
            .write()
            .apply_claim(&claim("ns", "theirs", "u9", pairs(8), "n1", &all));
        let after = run(&r);
        assert!(matches!(&after[0].1, DraNode::Reject(_)), "{:?}", after[0]);
    }
    /// The fixture of other drivers' slices and classes (NVIDIA's GPU driver, dranet).
    fn foreign_state(drivers: Option<&[&str]>) -> DraState {
        let list: Value = serde_json::from_str(include_str!(
            "../../tests/fixtures/gb300-nvidia-dranet.json"
        ))
        .unwrap();
        let mut st = state_with(&[("n1", "gb300-4")]);
        st.keep_drivers(drivers.map(|d| d.iter().map(|s| s.to_string()).collect()));
        for item in list["items"].as_array().unwrap() {
            match item["kind"].as_str() {
                Some("ResourceSlice") => {
                    st.apply_slice(&serde_json::from_value(item.clone()).unwrap())
                }
                _ => st.apply_class(&serde_json::from_value(item.clone()).unwrap()),
            }
        }
        st
    }

    fn gpu_nic_claim(class_nic: &str) -> ResourceClaimSpec {
        serde_json::from_value(json!({"devices": {"requests": [
            {"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com"}},
            {"name": "nic", "exactly": {"deviceClassName": class_nic}}]}}))
        .unwrap()
    }

    #[test]
    fn claims_of_other_drivers_are_judged_on_their_slices() {
        let mut st = foreign_state(None);
        assert_eq!(st.node_count(), 3);
        st.apply_claim(&claim(
            "ns",
            "nv",
            "u1",
            gpu_nic_claim("dranet.net"),
            "n1",
            &[],
        ));
        let p = pod(json!([{"name": "a", "resourceClaimName": "nv"}]), json!([]));
        let r = resolved(&st, &p);
        assert!(r.foreign);
        // First fit on gb-new: GPU 0008 + NIC 0101, both NUMA 0: NODE.
        assert!(matches!(st.judge_node(&r, "gb-new"), DraNode::Fit(f) if f.ranks == [3]));
        // The older GPU driver publishes no NUMA node: neutral, counted as blind.
        let v = st.judge_node(&r, "gb-old");
        assert_eq!(v.outcome(), "dra_blind");
        // A topoalign node has no devices of these classes: the claim cannot be allocated.
        assert!(matches!(st.judge_node(&r, "n1"), DraNode::Reject(_)));
        assert_eq!(
            st.judge_node(&r, "nowhere"),
            DraNode::Neutral(DraNeutral::NoSlices)
        );
        // A class the cluster does not have (yet) beside a known one: not judged.
        st.apply_claim(&claim(
            "ns",
            "nv2",
            "u1",
            gpu_nic_claim("nope.example.com"),
            "n1",
            &[],
        ));
        let p = pod(
            json!([{"name": "a", "resourceClaimName": "nv2"}]),
            json!([]),
        );
        assert!(
            matches!(st.resolve(&p), PodClaims::Unjudged("dra_claim_unseen", ref w) if w.contains("DeviceClass nope.example.com"))
        );
        // topoalign's own claims still go their way (and are not judged on slices of
        // other drivers: a node with none of topoalign's slices is neutral).
        st.apply_claim(&claim("ns", "mine", "u1", pairs(1), "n1", &[]));
        let p = pod(
            json!([{"name": "a", "resourceClaimName": "mine"}]),
            json!([]),
        );
        let r = resolved(&st, &p);
        assert!(!r.foreign);
        assert!(matches!(st.judge_node(&r, "n1"), DraNode::Fit(_)));
        assert_eq!(
            st.judge_node(&r, "gb-new"),
            DraNode::Neutral(DraNeutral::NoSlices)
        );
    }

    #[test]
    fn only_the_drivers_named_are_kept() {
        // --dra-drivers gpu.nvidia.com: dranet's slices are dropped, the claim's NIC
        // cannot be found on the node.
        let mut st = foreign_state(Some(&["gpu.nvidia.com"]));
        st.apply_claim(&claim(
            "ns",
            "nv",
            "u1",
            gpu_nic_claim("dranet.net"),
            "n1",
            &[],
        ));
        let p = pod(json!([{"name": "a", "resourceClaimName": "nv"}]), json!([]));
        let r = resolved(&st, &p);
        assert!(matches!(st.judge_node(&r, "gb-new"), DraNode::Reject(_)));
        // topoalign.dev is always kept.
        assert!(st.nodes.contains_key("n1"));
    }
}
