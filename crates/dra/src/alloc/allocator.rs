//! What the stock scheduler's structured allocator picks for a claim on one node.
//!
//! The allocator's documented behaviour (REFERENCE §6, KEP-4381): it gathers the node's
//! pools (the highest generation of each, complete pools only), orders them by driver
//! and pool name, and for every request in claim order, every `firstAvailable`
//! alternative in order and every device the request still needs, walks pool → slice →
//! device in order, taking the first device that is free, matches the class and request
//! selectors, has the counters it consumes left and keeps every constraint. When a later
//! request cannot be met it backtracks; the first full solution wins (no scoring). Each
//! device of an `ExactCount` request is searched from the start of the order, which is
//! why an unsatisfiable claim can cost a search over every ordering: [`first_fit`]
//! counts the devices it tries and stops at a budget, as the scheduler's Filter timeout
//! would. [`ClaimSearch`] is the same search for a caller that asks one claim of one
//! node's devices many times with different devices in use (the fleet simulator): the
//! claim is worked out once, each search is told which devices are held.
//!
//! Selectors are evaluated with [`crate::alloc::cel`] (the CEL subset device selectors here
//! use); an expression outside it is an error, never a guess. Capacities are counted as
//! [`crate::alloc::capacity`] says: a device with `allowMultipleAllocations` (a dra-driver-cpu
//! CPU group) serves several requests and claims, each taking its share of the
//! capacities, and is never held whole; any other device is taken by one request.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use k8s_openapi::api::resource::v1::{Device, DeviceAttribute};
use k8s_openapi::api::resource::v1::{
    DeviceClass, DeviceConstraint, DeviceRequest, ResourceClaimSpec, ResourceSlice,
};
use serde::Serialize;
use topoalign_kube_types::Quantity;

use crate::DraError;
use crate::alloc::allocated::AllocatedDevice;
use crate::alloc::capacity::{Capacities, milli_text, requested};
use crate::alloc::cel::{Selector, lookup};
use crate::limits::MAX_DEVICES_PER_CLAIM;

/// One device's identity in the cluster: (driver, pool, device).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct DeviceId {
    /// Driver.
    pub driver: String,
    /// Pool.
    pub pool: String,
    /// Device name.
    pub device: String,
}

/// A share of a device that allows multiple allocations which an allocated claim holds:
/// one `consumedCapacity` entry of its allocation result (capacity name → quantity, as
/// written: [`NodeDevices::consume_capacity`] refuses one that is no quantity).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct Share {
    /// The shared device.
    pub device: DeviceId,
    /// The capacity's name (`dra.cpu/cpu`).
    pub capacity: String,
    /// The amount held, as written in the claim (`4`, `1500m`).
    pub quantity: String,
}

/// The node's devices as the allocator sees them.
#[derive(Debug, Clone)]
pub struct NodeDevices {
    devices: Vec<Cand>,
    /// (driver, pool, set, counter) → index into `available`.
    counter_index: BTreeMap<(String, String, String, String), usize>,
    /// Available milli-units per counter.
    available: Vec<i128>,
    /// Per device, per capacity: milli-units other claims hold of a device that allows
    /// multiple allocations ([`NodeDevices::consume_capacity`]).
    outside: Vec<Vec<i128>>,
}

#[derive(Debug, Clone)]
struct Cand {
    id: DeviceId,
    device: Device,
    /// (counter index, milli-units); `None` for a counter the pool does not define,
    /// which makes the device unallocatable.
    consumes: Vec<(Option<usize>, i128)>,
    /// `allowMultipleAllocations`: shared between requests by capacity, never taken
    /// whole.
    multi: bool,
    /// Its capacities.
    caps: Capacities,
}

fn milli(q: &str, slice: &str, what: &str) -> Result<i128, DraError> {
    q.parse::<Quantity>()
        .map(|q| q.milli_value())
        .map_err(|e| DraError::BadSlice {
            slice: slice.to_string(),
            what: format!("{what}: {e}"),
        })
}

impl NodeDevices {
    /// Gathers the pools of `node` from `slices` (those with `spec.nodeName == node` or
    /// `allNodes`): highest generation per pool; a pool whose slices at that generation
    /// are fewer than its `resourceSliceCount` is incomplete and skipped, as the
    /// allocator does. Pools are ordered by driver then name; slices keep their order.
    pub fn gather(slices: &[ResourceSlice], node: &str) -> Result<NodeDevices, DraError> {
        let mut pools: BTreeMap<(String, String), (i64, Vec<&ResourceSlice>)> = BTreeMap::new();
        for s in slices {
            let here = s.spec.node_name.as_deref() == Some(node) || s.spec.all_nodes == Some(true);
            if !here {
                continue;
            }
            let key = (s.spec.driver.clone(), s.spec.pool.name.clone());
            let entry = pools
                .entry(key)
                .or_insert((s.spec.pool.generation, Vec::new()));
            if s.spec.pool.generation > entry.0 {
                *entry = (s.spec.pool.generation, Vec::new());
            }
            if s.spec.pool.generation == entry.0 {
                entry.1.push(s);
            }
        }
        let mut devices = Vec::new();
        let mut counter_index = BTreeMap::new();
        let mut available = Vec::new();
        for ((driver, pool), (_, pslices)) in pools {
            let want = pslices
                .first()
                .map_or(0, |s| s.spec.pool.resource_slice_count);
            if (pslices.len() as i64) < want {
                continue;
            }
            for s in &pslices {
                let sname = s.metadata.name.clone().unwrap_or_default();
                for set in s.spec.shared_counters.iter().flatten() {
                    for (c, v) in &set.counters {
                        let value =
                            milli(&v.value.0, &sname, &format!("counter {}/{c}", set.name))?;
                        counter_index.insert(
                            (driver.clone(), pool.clone(), set.name.clone(), c.clone()),
                            available.len(),
                        );
                        available.push(value);
                    }
                }
            }
            for s in &pslices {
                let sname = s.metadata.name.clone().unwrap_or_default();
                for d in s.spec.devices.iter().flatten() {
                    let mut consumes = Vec::new();
                    for cc in d.consumes_counters.iter().flatten() {
                        for (c, v) in &cc.counters {
                            let key = (
                                driver.clone(),
                                pool.clone(),
                                cc.counter_set.clone(),
                                c.clone(),
                            );
                            consumes.push((
                                counter_index.get(&key).copied(),
                                milli(
                                    &v.value.0,
                                    &sname,
                                    &format!("device {} consumes {c}", d.name),
                                )?,
                            ));
                        }
                    }
                    let caps = Capacities::of(
                        d.capacity.as_ref(),
                        &format!("{sname}, device {}", d.name),
                    )?;
                    devices.push(Cand {
                        id: DeviceId {
                            driver: driver.clone(),
                            pool: pool.clone(),
                            device: d.name.clone(),
                        },
                        device: d.clone(),
                        consumes,
                        multi: d.allow_multiple_allocations == Some(true),
                        caps,
                    });
                }
            }
        }
        let outside = devices.iter().map(|c| vec![0; c.caps.len()]).collect();
        Ok(NodeDevices {
            devices,
            counter_index,
            available,
            outside,
        })
    }

    /// Marks devices as allocated to other claims: they are skipped and their counters
    /// consumed. Unknown ids are ignored, and so are devices that allow multiple
    /// allocations: other claims hold shares of those, told with
    /// [`NodeDevices::consume_capacity`].
    pub fn mark_in_use(&mut self, ids: &BTreeSet<DeviceId>) {
        let held = |c: &Cand| !c.multi && ids.contains(&c.id);
        for c in self.devices.iter().filter(|c| held(c)) {
            for (i, v) in &c.consumes {
                if let Some(avail) = i.and_then(|i| self.available.get_mut(i)) {
                    *avail -= v;
                }
            }
        }
        let keep: Vec<bool> = self.devices.iter().map(|c| !held(c)).collect();
        let mut k = keep.iter();
        self.devices.retain(|_| k.next().copied().unwrap_or(true));
        let mut k = keep.iter();
        self.outside.retain(|_| k.next().copied().unwrap_or(true));
    }

    /// Records that another claim holds `quantity` of capacity `capacity` of device
    /// `id` (a `consumedCapacity` entry of its allocation), for a device that allows
    /// multiple allocations. Refused: an amount that is no quantity. Unknown devices
    /// and capacities are ignored, as other claims' devices may be gone.
    pub fn consume_capacity(
        &mut self,
        id: &DeviceId,
        capacity: &str,
        quantity: &str,
    ) -> Result<(), DraError> {
        for (place, cap, m) in self.shared_held([(id, capacity, quantity)])?.0 {
            self.outside[place][cap] += m;
        }
        Ok(())
    }

    /// Consumes `units` of a counter, as an allocation outside the claim would.
    pub fn consume(&mut self, driver: &str, pool: &str, set: &str, counter: &str, units: i64) {
        let key = (
            driver.to_string(),
            pool.to_string(),
            set.to_string(),
            counter.to_string(),
        );
        if let Some(avail) = self
            .counter_index
            .get(&key)
            .and_then(|i| self.available.get_mut(*i))
        {
            *avail -= i128::from(units) * 1000;
        }
    }

    /// What other claims hold of shared devices (devices that allow multiple allocations),
    /// from their allocations' `consumedCapacity`: (device, capacity name, quantity).
    /// Devices and capacities the node does not have are skipped (other claims' devices
    /// may be gone); an amount that is no quantity is refused.
    pub fn shared_held<'a>(
        &self,
        held: impl IntoIterator<Item = (&'a DeviceId, &'a str, &'a str)>,
    ) -> Result<SharedHeld, DraError> {
        let mut out = Vec::new();
        for (id, capacity, quantity) in held {
            let m = quantity.parse::<Quantity>().map_err(|e| {
                DraError::BadClaim(format!(
                    "consumed capacity {capacity} of device {}: {e}",
                    id.device
                ))
            })?;
            let Some(place) = self.devices.iter().position(|c| c.id == *id) else {
                continue;
            };
            if let Some(i) = self.devices[place].caps.index(capacity) {
                out.push((place, i, m.milli_value()));
            }
        }
        Ok(SharedHeld(out))
    }

    /// A device as published, by identity.
    pub fn device(&self, id: &DeviceId) -> Option<&Device> {
        self.devices.iter().find(|c| c.id == *id).map(|c| &c.device)
    }

    /// The devices considered, in the allocator's order (pool by pool, slice by slice).
    pub fn ids(&self) -> impl ExactSizeIterator<Item = &DeviceId> {
        self.devices.iter().map(|c| &c.id)
    }

    /// The device at `place` in [`NodeDevices::ids`] order.
    pub fn id(&self, place: usize) -> Option<&DeviceId> {
        self.devices.get(place).map(|c| &c.id)
    }

    /// Number of devices considered.
    pub fn len(&self) -> usize {
        self.devices.len()
    }

    /// True when the node has no devices.
    pub fn is_empty(&self) -> bool {
        self.devices.is_empty()
    }
}

/// What other claims hold of a node's shared devices ([`NodeDevices::shared_held`]), for
/// [`ClaimSearch::search_held`]: (place, capacity, milli-units).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SharedHeld(Vec<(usize, usize, i128)>);

impl SharedHeld {
    /// True when other claims hold nothing shared.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Adds what `other` holds (of the same node's devices): a claim searched after
    /// another of the same pod sees that one's shares held.
    pub fn extend(&mut self, other: &SharedHeld) {
        self.0.extend_from_slice(&other.0);
    }
}

/// What the search found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Outcome {
    /// The first full solution, in request order; `None` when there is none (or the
    /// budget ran out first).
    pub allocation: Option<Vec<AllocatedDevice>>,
    /// Per device of `allocation`, the capacities its request took of it (capacity name
    /// → quantity, `10`, `1500m`), as the allocation's `consumedCapacity`: empty for a
    /// device taken whole (one that does not allow multiple allocations).
    pub consumed: Vec<BTreeMap<String, String>>,
    /// Devices tried.
    pub steps: u64,
    /// True when the search stopped at the budget without an answer.
    pub gave_up: bool,
}

/// A request as the claim states it, before it meets the node's devices.
struct Req {
    name: String,
    alts: Vec<ReqAlt>,
}

/// One way to fill a request: its `exactly`, or one `firstAvailable` subrequest.
struct ReqAlt {
    /// The name results carry (`req` or `req/sub`).
    result_name: String,
    count: usize,
    selectors: Vec<Selector>,
    /// `capacity.requests`, milli-units by capacity name.
    capacity: BTreeMap<String, i128>,
}

/// One way to fill a request, worked out against the node's devices.
#[derive(Debug, Clone)]
struct Alt {
    /// The name results carry (`req` or `req/sub`).
    result_name: String,
    count: usize,
    /// The devices that pass the class and request selectors and can serve its
    /// capacity requests, in the allocator's order.
    eligible: Vec<usize>,
    /// Per device of `eligible` that allows multiple allocations, what one device of
    /// this alternative takes of its capacities; empty for any other device.
    takes: Vec<Vec<i128>>,
    /// The constraints that apply to it, in claim order.
    cons: Vec<usize>,
    /// Per constraint: whether it applies.
    applies: Vec<bool>,
}

/// A `matchAttribute` or `distinctAttribute` constraint, worked out against the node's
/// devices.
#[derive(Debug, Clone)]
struct Con {
    distinct: bool,
    /// Per device: which of the attribute's distinct values it has (`None`: it does not
    /// publish the attribute), so that equal values have equal numbers.
    value: Vec<Option<usize>>,
}

/// A claim worked out against one node's devices: everything the search reads that does
/// not depend on which devices are in use.
#[derive(Debug, Clone)]
struct Plan {
    /// Per request, its alternatives.
    reqs: Vec<Vec<Alt>>,
    cons: Vec<Con>,
    /// Selectors that could not be evaluated on a device: (device, message), in the order
    /// the allocator evaluates them (request, alternative, device). A device with an
    /// error is eligible for no alternative; the search reports the first error whose
    /// device is free ([`Plan::first_error`]), as it would with the devices in use
    /// removed.
    errors: Vec<(usize, String)>,
}

fn class_selectors(classes: &[DeviceClass], name: &str) -> Result<Vec<Selector>, DraError> {
    let class = classes
        .iter()
        .find(|c| c.metadata.name.as_deref() == Some(name))
        .ok_or_else(|| DraError::BadClaim(format!("device class {name:?} is not known")))?;
    parse_selectors(class.spec.as_ref().and_then(|s| s.selectors.as_ref()))
}

fn parse_selectors(
    sel: Option<&Vec<k8s_openapi::api::resource::v1::DeviceSelector>>,
) -> Result<Vec<Selector>, DraError> {
    sel.into_iter()
        .flatten()
        .filter_map(|s| s.cel.as_ref())
        .map(|c| Selector::parse(&c.expression).map_err(|e| DraError::BadClaim(e.to_string())))
        .collect()
}

fn build_req(r: &DeviceRequest, classes: &[DeviceClass]) -> Result<Req, DraError> {
    let mut alts = Vec::new();
    let mode_ok = |m: &Option<String>, what: &str| match m.as_deref() {
        None | Some("ExactCount") => Ok(()),
        Some(other) => Err(DraError::BadClaim(format!(
            "{what}: allocationMode {other:?} is not simulated (only ExactCount)"
        ))),
    };
    if let Some(e) = &r.exactly {
        mode_ok(&e.allocation_mode, &r.name)?;
        let mut selectors = class_selectors(classes, &e.device_class_name)?;
        selectors.extend(parse_selectors(e.selectors.as_ref())?);
        alts.push(ReqAlt {
            result_name: r.name.clone(),
            count: e.count.unwrap_or(1).max(0) as usize,
            selectors,
            capacity: requested(
                e.capacity.as_ref().and_then(|c| c.requests.as_ref()),
                &r.name,
            )?,
        });
    }
    for s in r.first_available.iter().flatten() {
        mode_ok(&s.allocation_mode, &format!("{}/{}", r.name, s.name))?;
        let mut selectors = class_selectors(classes, &s.device_class_name)?;
        selectors.extend(parse_selectors(s.selectors.as_ref())?);
        let result_name = format!("{}/{}", r.name, s.name);
        alts.push(ReqAlt {
            capacity: requested(
                s.capacity.as_ref().and_then(|c| c.requests.as_ref()),
                &result_name,
            )?,
            result_name,
            count: s.count.unwrap_or(1).max(0) as usize,
            selectors,
        });
    }
    if alts.is_empty() {
        return Err(DraError::BadClaim(format!(
            "request {:?} has neither exactly nor firstAvailable",
            r.name
        )));
    }
    Ok(Req {
        name: r.name.clone(),
        alts,
    })
}

fn attr_value<'a>(c: &'a Cand, qualified: &str) -> Option<&'a DeviceAttribute> {
    let (domain, name) = qualified.split_once('/')?;
    lookup(c.device.attributes.as_ref()?, &c.id.driver, domain, name)
}

impl Plan {
    fn new(
        claim: &ResourceClaimSpec,
        classes: &[DeviceClass],
        node: &NodeDevices,
    ) -> Result<Plan, DraError> {
        let dc = claim.devices.as_ref();
        let reqs: Vec<Req> = dc
            .and_then(|d| d.requests.as_ref())
            .into_iter()
            .flatten()
            .map(|r| build_req(r, classes))
            .collect::<Result<_, _>>()?;
        let most: usize = reqs
            .iter()
            .map(|r| r.alts.iter().map(|a| a.count).max().unwrap_or(0))
            .sum();
        if most > MAX_DEVICES_PER_CLAIM {
            return Err(DraError::BadClaim(format!(
                "the claim asks for up to {most} devices; the allocator refuses more than {MAX_DEVICES_PER_CLAIM}"
            )));
        }
        let stated: Vec<(Option<Vec<String>>, String, bool)> = dc
            .and_then(|d| d.constraints.as_ref())
            .into_iter()
            .flatten()
            .map(
                |c: &DeviceConstraint| match (&c.match_attribute, &c.distinct_attribute) {
                    (Some(a), None) => Ok((c.requests.clone(), a.clone(), false)),
                    (None, Some(a)) => Ok((c.requests.clone(), a.clone(), true)),
                    _ => Err(DraError::BadClaim(
                        "a constraint needs exactly one of matchAttribute and distinctAttribute"
                            .into(),
                    )),
                },
            )
            .collect::<Result<_, _>>()?;
        let mut planned = Vec::with_capacity(reqs.len());
        let mut errors = Vec::new();
        for r in &reqs {
            let mut alts = Vec::with_capacity(r.alts.len());
            for a in &r.alts {
                let mut eligible = Vec::with_capacity(node.devices.len());
                let mut takes = Vec::new();
                for (i, c) in node.devices.iter().enumerate() {
                    let mut pass = true;
                    for s in &a.selectors {
                        match s.matches(&c.id.driver, &c.device) {
                            Ok(true) => {}
                            Ok(false) => {
                                pass = false;
                                break;
                            }
                            Err(e) => {
                                errors.push((i, e.to_string()));
                                pass = false;
                                break;
                            }
                        }
                    }
                    if !pass {
                        continue;
                    }
                    // A device taken whole for a request without capacity requests: a
                    // candidate as it is (no consumption to work out, the common case).
                    if !c.multi && a.capacity.is_empty() {
                        eligible.push(i);
                        takes.push(Vec::new());
                        continue;
                    }
                    // What the device gives this alternative: a device that cannot serve
                    // its capacity requests (or taken whole, more than it holds) is no
                    // candidate; a shared one is checked against its other shares as the
                    // search goes.
                    let Some(take) = c.caps.consumption(&a.capacity) else {
                        continue;
                    };
                    eligible.push(i);
                    takes.push(if c.multi { take } else { Vec::new() });
                }
                let applies: Vec<bool> = stated
                    .iter()
                    .map(|(requests, _, _)| match requests {
                        None => true,
                        Some(list) => list.iter().any(|n| *n == r.name || *n == a.result_name),
                    })
                    .collect();
                alts.push(Alt {
                    result_name: a.result_name.clone(),
                    count: a.count,
                    eligible,
                    takes,
                    cons: (0..applies.len()).filter(|&i| applies[i]).collect(),
                    applies,
                });
            }
            planned.push(alts);
        }
        let cons = stated
            .iter()
            .map(|(_, attribute, distinct)| {
                let mut seen: Vec<&DeviceAttribute> = Vec::new();
                let value = node
                    .devices
                    .iter()
                    .map(|c| {
                        let v = attr_value(c, attribute)?;
                        Some(seen.iter().position(|w| *w == v).unwrap_or_else(|| {
                            seen.push(v);
                            seen.len() - 1
                        }))
                    })
                    .collect();
                Con {
                    distinct: *distinct,
                    value,
                }
            })
            .collect();
        Ok(Plan {
            reqs: planned,
            cons,
            errors,
        })
    }

    /// The error the allocator stops at with the devices `in_use` marks removed (places
    /// past its end are free): the first selector that cannot be evaluated on a free
    /// device.
    fn first_error(&self, in_use: &[bool]) -> Result<(), DraError> {
        match self
            .errors
            .iter()
            .find(|(dev, _)| !in_use.get(*dev).copied().unwrap_or(false))
        {
            Some((_, e)) => Err(DraError::BadClaim(e.clone())),
            None => Ok(()),
        }
    }
}

struct Search<'a> {
    node: &'a NodeDevices,
    plan: &'a Plan,
    counters: Vec<i128>,
    taken: Vec<bool>,
    /// Per device, per capacity: milli-units held by other claims and this one so far
    /// (devices that allow multiple allocations).
    shares: Vec<Vec<i128>>,
    /// (request, alternative, device index, place in the alternative's eligible list)
    chosen: Vec<(usize, usize, usize, usize)>,
    steps: u64,
    budget: u64,
}

impl<'a> Search<'a> {
    /// A search with the devices marked in `in_use` taken from the start and their
    /// counters consumed, as [`NodeDevices::mark_in_use`] would.
    fn new(
        node: &'a NodeDevices,
        plan: &'a Plan,
        in_use: &[bool],
        held: &SharedHeld,
        budget: u64,
    ) -> Self {
        let mut s = Search {
            node,
            plan,
            counters: node.available.clone(),
            taken: vec![false; node.devices.len()],
            shares: node.outside.clone(),
            chosen: Vec::new(),
            steps: 0,
            budget,
        };
        for &(dev, cap, m) in &held.0 {
            if let Some(u) = s.shares.get_mut(dev).and_then(|c| c.get_mut(cap)) {
                *u += m;
            }
        }
        for (dev, _) in in_use.iter().enumerate().filter(|(_, used)| **used) {
            if dev < s.taken.len() && !node.devices[dev].multi {
                s.taken[dev] = true;
                s.consume(dev, 1);
            }
        }
        s
    }

    fn constraints_ok(&self, alt: &Alt, dev: usize) -> bool {
        for &ci in &alt.cons {
            let con = &self.plan.cons[ci];
            let Some(v) = con.value[dev] else {
                return false;
            };
            for &(r2, a2, d2, _) in &self.chosen {
                if !self.plan.reqs[r2][a2].applies[ci] {
                    continue;
                }
                let Some(w) = con.value[d2] else {
                    return false;
                };
                if con.distinct == (v == w) {
                    return false;
                }
            }
        }
        true
    }

    fn counters_ok(&self, dev: usize) -> bool {
        self.node.devices[dev].consumes.iter().all(|(i, v)| {
            i.and_then(|i| self.counters.get(i))
                .is_some_and(|avail| avail >= v)
        })
    }

    fn consume(&mut self, dev: usize, sign: i128) {
        for (i, v) in &self.node.devices[dev].consumes {
            if let Some(avail) = i.and_then(|i| self.counters.get_mut(i)) {
                *avail -= sign * v;
            }
        }
    }

    /// Takes (`sign` 1) or gives back (-1) device `dev` for one device of a request: a
    /// whole device is marked taken, a shared one takes `take` of its capacities; the
    /// counters are charged unless a share of it already charged them.
    fn hold(&mut self, dev: usize, take: &[i128], multi: bool, charged: bool, sign: i128) {
        if multi {
            for (u, t) in self.shares[dev].iter_mut().zip(take) {
                *u += sign * t;
            }
        } else {
            self.taken[dev] = sign > 0;
        }
        if !charged {
            self.consume(dev, sign);
        }
    }

    /// What each chosen device took of its capacities, by name (empty for a whole
    /// device).
    fn consumed(&self) -> Vec<BTreeMap<String, String>> {
        self.chosen
            .iter()
            .map(|&(ri, ai, dev, place)| {
                let caps = &self.node.devices[dev].caps;
                let take = &self.plan.reqs[ri][ai].takes[place];
                (take.iter().enumerate())
                    .map(|(i, m)| (caps.name(i).to_string(), milli_text(*m)))
                    .collect()
            })
            .collect()
    }

    /// What the chosen devices that allow multiple allocations took of their capacities.
    fn shares_taken(&self) -> SharedHeld {
        let mut out = Vec::new();
        for &(ri, ai, dev, place) in &self.chosen {
            if !self.node.devices[dev].multi {
                continue;
            }
            let take = &self.plan.reqs[ri][ai].takes[place];
            out.extend((take.iter().enumerate()).map(|(i, m)| (dev, i, *m)));
        }
        SharedHeld(out)
    }

    /// Fills request `ri` with alternative `ai` from its `k`-th device on.
    fn fill(&mut self, ri: usize, ai: Option<usize>, k: usize) -> Option<bool> {
        let plan = self.plan;
        let Some(alts) = plan.reqs.get(ri) else {
            return Some(true);
        };
        let Some(ai) = ai else {
            for a in 0..alts.len() {
                if self.fill(ri, Some(a), 0)? {
                    return Some(true);
                }
            }
            return Some(false);
        };
        let alt = &alts[ai];
        if k == alt.count {
            return self.fill(ri + 1, None, 0);
        }
        for (place, &dev) in alt.eligible.iter().enumerate() {
            if self.taken[dev] {
                continue;
            }
            self.steps += 1;
            if self.steps > self.budget {
                return None;
            }
            let multi = self.node.devices[dev].multi;
            let take = &alt.takes[place];
            if multi && !self.node.devices[dev].caps.fits(&self.shares[dev], take) {
                continue;
            }
            // A shared device already shared in this search has its counters charged.
            let charged = multi && self.chosen.iter().any(|c| c.2 == dev);
            if (!charged && !self.counters_ok(dev)) || !self.constraints_ok(alt, dev) {
                continue;
            }
            self.hold(dev, take, multi, charged, 1);
            self.chosen.push((ri, ai, dev, place));
            if self.fill(ri, Some(ai), k + 1)? {
                return Some(true);
            }
            self.chosen.pop();
            self.hold(dev, take, multi, charged, -1);
        }
        Some(false)
    }
}

/// Devices the allocator model may try for one claim on one node before it gives up,
/// for every caller that judges a claim as the scheduler would: the extender's DRA judge
/// (a node past it passes with a neutral score), `explain pod` and lint's claim fit. Well
/// below what the scheduler's 10 s Filter timeout allows on every built-in profile.
pub const DEFAULT_BUDGET: u64 = 200_000;

/// Runs the allocator's search for `claim` on `node`'s free devices, trying at most
/// `budget` devices ([`DEFAULT_BUDGET`] unless the caller has a reason). `classes` must hold every class the claim names.
pub fn first_fit(
    claim: &ResourceClaimSpec,
    classes: &[DeviceClass],
    node: &NodeDevices,
    budget: u64,
) -> Result<Outcome, DraError> {
    let plan = Plan::new(claim, classes, node)?;
    plan.first_error(&[])?;
    let mut s = Search::new(node, &plan, &[], &SharedHeld::default(), budget);
    let found = s.fill(0, None, 0);
    let allocation = (found == Some(true)).then(|| {
        s.chosen
            .iter()
            .map(|&(ri, ai, d, _)| {
                let id = &node.devices[d].id;
                AllocatedDevice {
                    request: plan.reqs[ri][ai].result_name.clone(),
                    driver: id.driver.clone(),
                    pool: id.pool.clone(),
                    device: id.device.clone(),
                }
            })
            .collect()
    });
    let consumed = match allocation {
        Some(_) => s.consumed(),
        None => Vec::new(),
    };
    Ok(Outcome {
        allocation,
        consumed,
        steps: s.steps,
        gave_up: found.is_none(),
    })
}

/// What [`ClaimSearch::search`] found: [`Outcome`] with each device as its place in
/// [`NodeDevices::ids`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Found {
    /// The first full solution, one device per place the claim asks for, in request
    /// order; `None` when there is none (or the budget ran out first).
    pub devices: Option<Vec<usize>>,
    /// Devices tried.
    pub steps: u64,
    /// True when the search stopped at the budget without an answer.
    pub gave_up: bool,
    /// What the solution takes of shared devices (devices that allow multiple
    /// allocations), for the searches of the pod's next claims
    /// ([`SharedHeld::extend`]); empty without a solution.
    pub shares: SharedHeld,
}

/// A claim worked out once against one node's devices, for a caller that asks it of the
/// same devices many times with different devices in use (the fleet simulator: one per
/// node type and claim size; the extender: one per node kind and pod claim in a call).
/// [`ClaimSearch::search`] with devices in use is [`first_fit`] after
/// [`NodeDevices::mark_in_use`] of the same devices: the same devices, the same steps,
/// the same verdict; [`ClaimSearch::try_search`] the same errors too.
#[derive(Debug, Clone)]
pub struct ClaimSearch {
    node: Arc<NodeDevices>,
    plan: Plan,
}

impl ClaimSearch {
    /// Checks `claim` as [`first_fit`] does with every device free (the same errors) and
    /// works out its requests, selectors and constraints against `node`'s devices.
    pub fn new(
        claim: &ResourceClaimSpec,
        classes: &[DeviceClass],
        node: &NodeDevices,
    ) -> Result<ClaimSearch, DraError> {
        let plan = Plan::new(claim, classes, node)?;
        plan.first_error(&[])?;
        Ok(ClaimSearch {
            plan,
            node: Arc::new(node.clone()),
        })
    }

    /// Works out `claim` against `node`'s devices (shared with the caller's other
    /// claims), keeping a selector that cannot be evaluated on a device for
    /// [`ClaimSearch::try_search`]: whether [`first_fit`] fails on it depends on which
    /// devices are in use. Fails as [`first_fit`] does on what does not depend on the
    /// devices (unknown class, unparsable selector, unsupported mode, too many devices,
    /// a bad constraint).
    pub fn deferred(
        claim: &ResourceClaimSpec,
        classes: &[DeviceClass],
        node: Arc<NodeDevices>,
    ) -> Result<ClaimSearch, DraError> {
        Ok(ClaimSearch {
            plan: Plan::new(claim, classes, &node)?,
            node,
        })
    }

    /// [`ClaimSearch::search`], first failing where [`first_fit`] would after
    /// [`NodeDevices::mark_in_use`] of the devices `in_use` marks: on the first selector
    /// that cannot be evaluated on a free device.
    pub fn try_search(&self, in_use: &[bool], budget: u64) -> Result<Found, DraError> {
        self.try_search_held(in_use, &SharedHeld::default(), budget)
    }

    /// [`ClaimSearch::try_search`] with what other claims hold of the node's shared
    /// devices ([`ClaimSearch::search_held`]).
    pub fn try_search_held(
        &self,
        in_use: &[bool],
        held: &SharedHeld,
        budget: u64,
    ) -> Result<Found, DraError> {
        self.plan.first_error(in_use)?;
        Ok(self.search_held(in_use, held, budget))
    }

    /// The devices the claim was prepared against.
    pub fn node(&self) -> &NodeDevices {
        &self.node
    }

    /// Runs the allocator's search with the devices at the places `in_use` marks true
    /// (places in [`NodeDevices::ids`] order; places past its end are free) held by
    /// other claims, trying at most `budget` devices. A claim prepared with
    /// [`ClaimSearch::deferred`] is searched with [`ClaimSearch::try_search`] (here a
    /// device whose selector could not be evaluated is only passed over).
    pub fn search(&self, in_use: &[bool], budget: u64) -> Found {
        self.search_held(in_use, &SharedHeld::default(), budget)
    }

    /// [`ClaimSearch::search`] with what other claims hold of the node's shared devices
    /// (dra-driver-cpu's CPU groups) besides the devices `in_use` marks.
    pub fn search_held(&self, in_use: &[bool], held: &SharedHeld, budget: u64) -> Found {
        let mut s = Search::new(&self.node, &self.plan, in_use, held, budget);
        let found = s.fill(0, None, 0);
        Found {
            devices: (found == Some(true)).then(|| s.chosen.iter().map(|c| c.2).collect()),
            steps: s.steps,
            gave_up: found.is_none(),
            shares: if found == Some(true) {
                s.shares_taken()
            } else {
                SharedHeld::default()
            },
        }
    }
}
