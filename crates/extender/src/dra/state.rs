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

use k8s_openapi::api::core::v1::{PodResourceClaim, PodResourceClaimStatus};
use k8s_openapi::api::resource::v1::{
    DeviceClass, ResourceClaim, ResourceClaimSpec, ResourceClaimTemplate, ResourceSlice,
};
use serde_json::Value;
use topoalign_dra::{DRIVER_NAME, DeviceId};

use crate::dra::foreign::judge_foreign;
use crate::dra::judge::{
    CAPACITY_WEIGHT, DraVerdict, SEARCH_BUDGET, allocated_ids, judge_with_budget,
};
use crate::dra::verdict::{DraNeutral, DraNode, ObjKey, PodClaims, Resolved};

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
    /// The weight of the capacity a placement uses up (`capacity_penalty`).
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
    pub(crate) fn own_pools(&self, own: &BTreeSet<ObjKey>) -> BTreeSet<(String, String)> {
        own.iter()
            .filter_map(|k| self.claims.get(k))
            .flat_map(|c| c.held.iter())
            .map(|d| (d.driver.clone(), d.pool.clone()))
            .collect()
    }

    /// The verdict cache keys of `node` for the pod's claims, or the verdict when there is
    /// nothing to judge. Cheap: no device set is built (the held devices' fingerprints are
    /// kept per pool), unless the pod's own claims hold devices in the node's pools.
    pub(crate) fn keys(
        &self,
        claims: &Resolved,
        node: &str,
        own_pools: &BTreeSet<(String, String)>,
    ) -> Keyed {
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
    pub(crate) fn gather(&self, claims: &Resolved, node: &str) -> Gathered {
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
pub(crate) struct Keys {
    /// Shared by the nodes of one kind with the same devices held ([`crate::dra::verdict::shareable`]
    /// verdicts).
    pub(crate) shared: (u64, u64),
    /// The node's own (its name and slice revision too): verdicts that name what they
    /// could not read.
    pub(crate) own: (u64, u64),
}

pub(crate) enum Keyed {
    Done(DraNode),
    Keys(Keys),
}

/// One node's judgement, ready to run with no lock held.
pub(crate) struct Job {
    pub(crate) keys: Keys,
    node: String,
    slices: Arc<Vec<ResourceSlice>>,
    classes: Arc<Vec<DeviceClass>>,
    taken: BTreeSet<DeviceId>,
    budget: u64,
}

pub(crate) enum Gathered {
    Done(DraNode),
    Job(Job),
}

impl Job {
    pub(crate) fn judge(&self, claims: &Resolved) -> DraNode {
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

#[cfg(test)]
mod tests;
