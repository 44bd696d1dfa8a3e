//! What the slice controller must write to make the API server hold the desired pool: which
//! slices to apply, which to delete, and the pool generation. Pure (no I/O), so that the
//! generation rules are tested without a cluster.
//!
//! Rules (the `ResourcePool.generation` contract of `resource.k8s.io/v1`: consumers use
//! only the slices of a pool's highest generation, and `resourceSliceCount` tells them
//! whether they have seen them all):
//! * the generation is bumped when, and only when, the pool's published content differs
//!   from the desired one: a device, counter or attribute changed, a slice is missing or
//!   was edited, the slices disagree on their generation, or a slice that is no longer
//!   desired still claims the current generation; then every desired slice is applied
//!   with the new generation, which is above every generation seen and above the last
//!   one this process wrote;
//! * a difference in metadata only (labels, owner) is applied at the current generation;
//! * slices of this driver and node that are not desired are deleted (after the applies,
//!   so the pool is never empty in between); a slice whose immutable pool name differs is
//!   deleted before it is re-created.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::hash::{Hash, Hasher};

use k8s_openapi::api::resource::v1::ResourceSlice;
use serde_json::Value;

/// What this process last wrote for one slice: the `resourceVersion` the server answered
/// and the fingerprint of the desired content. An existing slice at that version holds
/// exactly what was applied, whatever the server normalised in it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Written {
    /// `metadata.resourceVersion` returned by the apply.
    pub resource_version: String,
    /// [`fingerprint`] of the desired slice that was applied.
    pub fingerprint: u64,
}

/// Slice name → what was last written to it.
pub type Memo = HashMap<String, Written>;

/// The writes that bring the API server to the desired pool.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct SyncPlan {
    /// The pool generation after the writes.
    pub generation: i64,
    /// Whether the generation is new (the pool's content changed).
    pub bumped: bool,
    /// Slices to delete before applying (their immutable pool name differs).
    pub delete_first: Vec<String>,
    /// Desired slices to apply, stamped with `generation`.
    pub apply: Vec<ResourceSlice>,
    /// Slices to delete after applying (not desired any more).
    pub delete: Vec<String>,
    /// Why the pool is being rewritten, for the log (empty when nothing changes).
    pub reasons: Vec<String>,
}

impl SyncPlan {
    /// Whether the API server already holds the desired pool.
    pub fn is_noop(&self) -> bool {
        self.delete_first.is_empty() && self.apply.is_empty() && self.delete.is_empty()
    }
}

/// Plans the writes for `desired` (the pool's slices; their generation is ignored) given
/// the slices of this driver and node that exist now, what this process last wrote
/// (`memo`), and `floor`, the highest generation this process has written (0 if none).
pub fn plan(
    desired: &[ResourceSlice],
    existing: &[ResourceSlice],
    memo: &Memo,
    floor: i64,
) -> SyncPlan {
    let by_name: BTreeMap<&str, &ResourceSlice> = existing
        .iter()
        .filter_map(|s| s.metadata.name.as_deref().map(|n| (n, s)))
        .collect();
    let desired_names: BTreeSet<&str> = desired
        .iter()
        .filter_map(|s| s.metadata.name.as_deref())
        .collect();
    let pools: BTreeSet<&str> = desired.iter().map(|s| s.spec.pool.name.as_str()).collect();

    let mut out = SyncPlan::default();
    let mut generations: BTreeSet<i64> = BTreeSet::new();
    let mut meta_only: Vec<&ResourceSlice> = Vec::new();
    for d in desired {
        let name = d.metadata.name.as_deref().unwrap_or_default();
        let Some(e) = by_name.get(name) else {
            out.reasons.push(format!("slice {name} is missing"));
            continue;
        };
        if e.spec.pool.name != d.spec.pool.name {
            out.reasons.push(format!(
                "slice {name} is in pool {:?}, not {:?}",
                e.spec.pool.name, d.spec.pool.name
            ));
            out.delete_first.push(name.to_string());
            continue;
        }
        generations.insert(e.spec.pool.generation);
        let remembered = memo.get(name).is_some_and(|w| {
            e.metadata.resource_version.as_deref() == Some(w.resource_version.as_str())
                && w.fingerprint == fingerprint(d)
        });
        if remembered {
            continue;
        }
        if normalized_spec(&d.spec) != normalized_spec(&e.spec) {
            out.reasons
                .push(format!("slice {name} differs from the topology"));
        } else if !metadata_holds(d, e) {
            meta_only.push(d);
        }
    }
    if generations.len() > 1 {
        out.reasons.push(format!(
            "slices disagree on the generation: {generations:?}"
        ));
    }
    let current = generations.iter().next_back().copied();
    for e in existing {
        let name = e.metadata.name.as_deref().unwrap_or_default();
        if desired_names.contains(name) {
            continue;
        }
        if pools.contains(e.spec.pool.name.as_str()) && Some(e.spec.pool.generation) >= current {
            out.reasons
                .push(format!("stale slice {name} claims the current generation"));
        }
        out.delete.push(name.to_string());
    }

    let seen_max = existing
        .iter()
        .map(|s| s.spec.pool.generation)
        .max()
        .unwrap_or(0);
    if out.reasons.is_empty() {
        out.generation = current.unwrap_or(floor);
        out.apply = meta_only
            .into_iter()
            .map(|d| stamped(d, out.generation))
            .collect();
    } else {
        out.generation = seen_max.max(floor) + 1;
        out.bumped = true;
        out.apply = desired.iter().map(|d| stamped(d, out.generation)).collect();
    }
    out
}

fn stamped(d: &ResourceSlice, generation: i64) -> ResourceSlice {
    let mut s = d.clone();
    s.spec.pool.generation = generation;
    s
}

/// A hash of the desired slice's content (spec without the generation, labels, owners),
/// stable within one process.
pub fn fingerprint(s: &ResourceSlice) -> u64 {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    normalized_spec(&s.spec).to_string().hash(&mut h);
    format!("{:?}", s.metadata.labels).hash(&mut h);
    format!("{:?}", s.metadata.owner_references).hash(&mut h);
    h.finish()
}

/// Whether every label and owner reference of `desired` is on `existing` (others may add
/// their own; server-side apply leaves those alone).
fn metadata_holds(desired: &ResourceSlice, existing: &ResourceSlice) -> bool {
    let labels_hold = desired
        .metadata
        .labels
        .iter()
        .flatten()
        .all(|(k, v)| existing.metadata.labels.as_ref().and_then(|l| l.get(k)) == Some(v));
    let owners_hold = desired.metadata.owner_references.iter().flatten().all(|o| {
        existing
            .metadata
            .owner_references
            .iter()
            .flatten()
            .any(|x| x.uid == o.uid && x.kind == o.kind && x.name == o.name)
    });
    labels_hold && owners_hold
}

/// The spec as the comparison sees it: JSON without the generation, without empty lists,
/// maps and nulls (the server omits them), with every quantity in canonical form (the
/// server rewrites `1024Mi` as `1Gi`).
pub(crate) fn normalized_spec(spec: &k8s_openapi::api::resource::v1::ResourceSliceSpec) -> Value {
    let mut v = serde_json::to_value(spec).unwrap_or(Value::Null);
    if let Some(pool) = v.get_mut("pool").and_then(Value::as_object_mut) {
        pool.remove("generation");
    }
    normalize(&mut v, None);
    v
}

fn normalize(v: &mut Value, parent: Option<&str>) {
    match v {
        Value::Object(map) => {
            for (k, child) in map.iter_mut() {
                normalize(child, Some(k.as_str()));
                if matches!(parent, Some("capacity" | "counters"))
                    && let Some(Value::String(q)) = child.get_mut("value")
                {
                    *q = canonical_quantity(q);
                }
            }
            map.retain(|_, c| !is_empty(c));
        }
        Value::Array(items) => {
            for item in items.iter_mut() {
                normalize(item, None);
            }
        }
        _ => {}
    }
}

fn is_empty(v: &Value) -> bool {
    match v {
        Value::Null => true,
        Value::Array(a) => a.is_empty(),
        Value::Object(o) => o.is_empty(),
        _ => false,
    }
}

/// The exact value of a quantity as text (`1Gi` and `1024Mi` give the same), or the text
/// itself when it is not a quantity.
fn canonical_quantity(q: &str) -> String {
    match q.parse::<topoalign_kube_types::Quantity>() {
        Ok(parsed) => format!("{parsed:?}"),
        Err(_) => q.to_string(),
    }
}

#[cfg(test)]
#[path = "diff_tests.rs"]
mod tests;
