//! One container's device-plugin requests and what they become.
//!
//! Each container is rewritten on its own, as the device plugins served it and as the
//! scheduler turns a pod's extended resources into one claim request per container
//! (init containers reusing the long-lived containers' devices): N GPUs with N NICs
//! become N pairs; with kN NICs, N pairs and (k−1)N NICs not tied to a GPU; GPUs alone
//! become GPUs, NICs alone NICs; a shared RDMA pool becomes one NIC per GPU (one NIC
//! without GPUs); MIG instances keep their profile.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use topoalign_kube_types::Quantity;

use crate::names::{Class, Names, Source};
use crate::pod::{ContainerIn, Fields};

/// Where a container sits in the pod.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum ContainerKind {
    /// An init container that runs to completion before the others.
    Init,
    /// An init container with `restartPolicy: Always` (runs beside the others).
    Sidecar,
    /// A regular container.
    Container,
}

impl ContainerKind {
    /// The pod spec list it is in.
    pub(crate) fn list(self) -> &'static str {
        match self {
            ContainerKind::Init | ContainerKind::Sidecar => "initContainers",
            ContainerKind::Container => "containers",
        }
    }
}

/// What the webhook changes in one container.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ContainerChange {
    /// The container's name.
    pub container: String,
    /// Where it sits.
    pub kind: ContainerKind,
    /// The device-plugin resources removed, with their counts.
    pub from: BTreeMap<String, u64>,
    /// topoalign's resources written, with their counts.
    pub to: BTreeMap<String, u64>,
    /// What the owner should know (NICs not tied to a GPU, a shared pool made exclusive).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
    /// Its index in its list.
    #[serde(skip)]
    pub(crate) index: usize,
    /// The removed resources that were in `requests` too (topoalign's are written there
    /// as well when any was).
    #[serde(skip)]
    pub(crate) in_requests: Vec<String>,
    /// Whether a NIC resource (or shared pool) was among those removed.
    #[serde(skip)]
    pub(crate) had_nics: bool,
}

/// What to do with one container.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Planned {
    /// Nothing of the webhook's: leave it.
    Nothing,
    /// Rewrite it.
    Change(ContainerChange),
    /// It asks for device-plugin resources the webhook cannot rewrite: why.
    Cannot(Vec<String>),
}

/// One container of the pod, as decoded.
pub(crate) struct ContainerRef<'a> {
    pub(crate) kind: ContainerKind,
    pub(crate) index: usize,
    pub(crate) name: String,
    pub(crate) c: &'a ContainerIn,
}

/// An empty map, for containers without limits or requests.
static EMPTY: Fields = Fields::new();

/// A container's `resources.limits` and `resources.requests`.
type LimitsRequests<'a> = (&'a Fields, &'a Fields);

/// A container's `resources.limits` and `resources.requests` (empty when absent).
fn resource_maps<'a>(c: &ContainerRef<'a>) -> LimitsRequests<'a> {
    let r = c.c.resources.as_ref();
    (
        r.and_then(|r| r.limits.as_ref()).unwrap_or(&EMPTY),
        r.and_then(|r| r.requests.as_ref()).unwrap_or(&EMPTY),
    )
}

/// What the webhook does with one container.
pub(crate) fn plan_container(c: &ContainerRef<'_>, names: &Names) -> Planned {
    let (limits, requests) = resource_maps(c);
    let mut known: Vec<(&str, Source)> = Vec::new();
    let mut unknown: Vec<&str> = Vec::new();
    let mut targets_present: Vec<&str> = Vec::new();
    let all = limits
        .keys()
        .chain(requests.keys().filter(|k| !limits.contains_key(k.as_str())));
    for name in all {
        match names.classify(name) {
            Class::Known(s) => known.push((name, s)),
            Class::Unknown => unknown.push(name),
            Class::Other if is_target(names, name) => targets_present.push(name),
            Class::Other => {}
        }
    }
    if known.is_empty() {
        return Planned::Nothing;
    }
    let mut why = Vec::new();
    let mut counts: Vec<(&str, Source, u64)> = Vec::new();
    for (name, source) in known {
        match count(c, name, limits, requests) {
            Ok(n) => counts.push((name, source, n)),
            Err(e) => why.push(e),
        }
    }
    if why.is_empty() && counts.iter().all(|(_, _, n)| *n == 0) {
        return Planned::Nothing;
    }
    if !unknown.is_empty() {
        why.push(format!(
            "{}: {} is not a name the webhook knows (configure it as a GPU, NIC, shared RDMA or MIG resource)",
            c.name,
            unknown.join(", ")
        ));
    }
    if !targets_present.is_empty() {
        why.push(format!(
            "{}: it already asks for {}; the webhook does not add to it",
            c.name,
            targets_present.join(", ")
        ));
    }
    for (name, source, _) in &counts {
        if let Source::Mig { suffix } = source
            && let Err(e) = known_profile(suffix)
        {
            why.push(format!("{}: {name}: {e}", c.name));
        }
    }
    if !why.is_empty() {
        return Planned::Cannot(why);
    }
    match targets(c, names, &counts) {
        Ok((to, notes)) => Planned::Change(ContainerChange {
            container: c.name.clone(),
            kind: c.kind,
            from: counts
                .iter()
                .map(|(n, _, k)| ((*n).to_string(), *k))
                .collect(),
            to,
            notes,
            index: c.index,
            in_requests: counts
                .iter()
                .filter(|(n, _, _)| requests.contains_key(*n))
                .map(|(n, _, _)| (*n).to_string())
                .collect(),
            had_nics: counts
                .iter()
                .any(|(_, s, k)| *k > 0 && matches!(s, Source::Nic | Source::SharedRdma)),
        }),
        Err(e) => Planned::Cannot(vec![e]),
    }
}

fn is_target(names: &Names, name: &str) -> bool {
    let t = &names.targets;
    name == t.pair || name == t.gpu || name == t.nic || name.starts_with(&t.mig_prefix)
}

/// The count of one resource: its limit, a whole number, equal to its request if any.
fn count(
    c: &ContainerRef<'_>,
    name: &str,
    limits: &Fields,
    requests: &Fields,
) -> Result<u64, String> {
    let Some(limit) = limits.get(name) else {
        return Err(format!(
            "{}: {name} is requested without a limit (an extended resource needs a limit equal to its request)",
            c.name
        ));
    };
    let whole = |field: &str, v: &Value| -> Result<(Quantity, u64), String> {
        let q = Quantity::from_json(v).map_err(|e| format!("{}: {field}.{name}: {e}", c.name))?;
        let n = q.whole_units().ok_or_else(|| {
            format!(
                "{}: {field}.{name} is {v}, not a whole number of devices",
                c.name
            )
        })?;
        Ok((q, n))
    };
    let (lq, n) = whole("limits", limit)?;
    if let Some(r) = requests.get(name) {
        let (rq, _) = whole("requests", r)?;
        if rq != lq {
            return Err(format!(
                "{}: requests.{name} ({r}) differs from its limit ({limit}); an extended resource needs them equal",
                c.name
            ));
        }
    }
    Ok(n)
}

/// Whether a MIG profile suffix (`1g.10gb`, `1g.10gb.me`) names a profile some GPU model
/// has.
fn known_profile(suffix: &str) -> Result<(), String> {
    let profile = match suffix.strip_suffix(".me") {
        Some(base) => format!("{base}+me"),
        None => suffix.to_string(),
    };
    let known = topoalign_mig::MODELS
        .iter()
        .any(|m| m.profile_names().contains(&profile.as_str()));
    if known {
        Ok(())
    } else {
        Err(format!(
            "no GPU model has MIG profile `{profile}` (expected e.g. 1g.10gb, 3g.40gb, 7g.80gb)"
        ))
    }
}

/// topoalign's resources for the counts, and the notes for the owner.
fn targets(
    c: &ContainerRef<'_>,
    names: &Names,
    counts: &[(&str, Source, u64)],
) -> Result<(BTreeMap<String, u64>, Vec<String>), String> {
    let sum = |want: fn(&Source) -> bool| -> u64 {
        counts
            .iter()
            .filter(|(_, s, _)| want(s))
            .fold(0u64, |a, (_, _, n)| a.saturating_add(*n))
    };
    let gpus = sum(|s| matches!(s, Source::Gpu));
    let nics = sum(|s| matches!(s, Source::Nic));
    let shared: Vec<&str> = counts
        .iter()
        .filter(|(_, s, n)| *n > 0 && matches!(s, Source::SharedRdma))
        .map(|(name, _, _)| *name)
        .collect();
    let t = &names.targets;
    let mut to = BTreeMap::new();
    let mut notes = Vec::new();
    let mut put = |name: &str, n: u64| {
        if n > 0 {
            *to.entry(name.to_string()).or_insert(0) += n;
        }
    };
    let shared_note = |what: &str| {
        format!(
            "{}: {} (HCAs shared with other pods) became {what}, held by this pod alone",
            c.name,
            shared.join(", ")
        )
    };
    if gpus > 0 {
        if nics == 0 {
            if shared.is_empty() {
                put(&t.gpu, gpus);
            } else {
                put(&t.pair, gpus);
                notes.push(shared_note("one NIC per GPU, each the GPU's own"));
            }
        } else if nics % gpus == 0 {
            put(&t.pair, gpus);
            put(&t.nic, nics - gpus);
            if nics > gpus {
                notes.push(format!(
                    "{}: {} of its {nics} NICs ({}) are not tied to a GPU: each of the {gpus} GPUs has its own NIC ({}), the others are placed as plain NICs",
                    c.name,
                    nics - gpus,
                    t.nic,
                    t.pair
                ));
            }
            if !shared.is_empty() {
                notes.push(format!(
                    "{}: {} dropped: its {nics} NICs give it RDMA",
                    c.name,
                    shared.join(", ")
                ));
            }
        } else {
            return Err(format!(
                "{}: {gpus} GPUs and {nics} NICs do not pair (each GPU gets its own NIC, and extra NICs come in multiples of the GPUs: {gpus}, {}, …)",
                c.name,
                gpus.saturating_mul(2)
            ));
        }
    } else if nics > 0 {
        put(&t.nic, nics);
        if !shared.is_empty() {
            notes.push(format!(
                "{}: {} dropped: its {nics} NICs give it RDMA",
                c.name,
                shared.join(", ")
            ));
        }
    } else if !shared.is_empty() {
        put(&t.nic, 1);
        notes.push(shared_note("one NIC"));
    }
    let mut mig = 0u64;
    for (_, s, n) in counts {
        if let Source::Mig { suffix } = s {
            put(&names.mig_target(suffix), *n);
            mig = mig.saturating_add(*n);
        }
    }
    if mig > 0 && gpus == 0 && (nics > 0 || !shared.is_empty()) {
        notes.push(format!(
            "{}: its NICs are not tied to its MIG instances (a claim from `topoalign claims --mig PROFILE --with-nic` pairs them)",
            c.name
        ));
    }
    Ok((to, notes))
}

#[cfg(test)]
#[path = "container_tests.rs"]
mod tests;
