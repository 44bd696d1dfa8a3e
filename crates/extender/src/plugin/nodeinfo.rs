//! From API objects to [`NodeEntry`]: a node agent's NodeResourceTopology, or (when there
//! is none) the node's own labels and annotations — the declared form the end-to-end
//! harness uses for synthetic nodes.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;
use std::time::SystemTime;

use serde_json::Value;
use topoalign_kube_types::kubelet_settings::{CpuPolicy, Policy, Scope, Settings};
use topoalign_kube_types::labels::*;
use topoalign_kube_types::nrt::*;
use topoalign_topology::{CpuSet, NodeUsage, Topology};

use crate::plugin::node::{NodeEntry, NodeInfo, NodeTopology, Source, hash_of};

/// Why a node's declared topology cannot be read.
#[derive(Debug, thiserror::Error)]
pub enum TopologySourceError {
    /// The profile label names no built-in profile.
    #[error("label `{label}`: unknown profile `{0}` (expected one of {names})", label = PROFILE_LABEL, names = topoalign_profiles::NAMES.join(", "))]
    UnknownProfile(String),
    /// The topology annotation is not a topology's JSON.
    #[error("annotation `{TOPOLOGY_ANNOTATION}`: not a topology: {0}")]
    NotATopology(#[source] serde_json::Error),
    /// The topology annotation is a topology the model refuses.
    #[error("annotation `{TOPOLOGY_ANNOTATION}`: invalid topology: {0}")]
    Invalid(#[source] topoalign_topology::ModelError),
}

/// Topologies by source key, parsed once and shared by every node reporting the same.
#[derive(Debug, Default)]
pub struct Interner {
    by_key: HashMap<u64, Arc<NodeTopology>>,
}

impl Interner {
    /// The built-in profile `name`, or why not.
    pub fn profile(&mut self, name: &str) -> Result<Arc<NodeTopology>, TopologySourceError> {
        let key = format!("profile:{name}");
        let id = hash_of(&key);
        if let Some(t) = self.by_key.get(&id) {
            return Ok(t.clone());
        }
        let topo = topoalign_profiles::get(name)
            .ok_or_else(|| TopologySourceError::UnknownProfile(name.to_string()))?;
        let t = Arc::new(NodeTopology::new(key, topo));
        self.by_key.insert(id, t.clone());
        Ok(t)
    }

    /// A topology from its compact JSON, or why not.
    pub fn json(&mut self, text: &str) -> Result<Arc<NodeTopology>, TopologySourceError> {
        let key = format!("nrt:{:016x}", hash_of(text));
        let id = hash_of(&key);
        if let Some(t) = self.by_key.get(&id) {
            return Ok(t.clone());
        }
        let mut topo: Topology =
            serde_json::from_str(text).map_err(TopologySourceError::NotATopology)?;
        topo.canonicalize();
        topo.validate().map_err(TopologySourceError::Invalid)?;
        let t = Arc::new(NodeTopology::new(key, topo));
        self.by_key.insert(id, t.clone());
        Ok(t)
    }

    /// Number of distinct topologies held.
    pub fn len(&self) -> usize {
        self.by_key.len()
    }

    /// Whether none is held.
    pub fn is_empty(&self) -> bool {
        self.by_key.is_empty()
    }
}

fn str_map<'a>(obj: &'a Value, field: &str) -> BTreeMap<&'a str, &'a str> {
    obj.pointer(&format!("/metadata/{field}"))
        .and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .filter_map(|(k, v)| v.as_str().map(|v| (k.as_str(), v)))
                .collect()
        })
        .unwrap_or_default()
}

/// Reads `k=v,k=v` policy options.
fn policy_options(text: &str) -> Result<BTreeMap<String, String>, String> {
    let mut out = BTreeMap::new();
    for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (k, v) = part.split_once('=').ok_or_else(|| {
            format!("annotation `{POLICY_OPTIONS_ANNOTATION}`: `{part}`: expected name=value")
        })?;
        out.insert(k.trim().to_string(), v.trim().to_string());
    }
    Ok(out)
}

/// Reads used devices, dropping (and naming) addresses the topology does not have.
fn usage(text: Option<&str>, topo: &Topology, what: &str) -> Result<NodeUsage, String> {
    let Some(text) = text else {
        return Ok(NodeUsage::empty());
    };
    let mut u: NodeUsage = serde_json::from_str(text)
        .map_err(|e| format!("{what} `{USED_ANNOTATION}`: expected NodeUsage JSON: {e}"))?;
    if let Some(b) = u.gpus.iter().find(|b| topo.gpu_index(**b).is_none()) {
        return Err(format!(
            "{what} `{USED_ANNOTATION}`: GPU {b} is not on this node"
        ));
    }
    if let Some(b) = u.nics.iter().find(|b| topo.nic_index(**b).is_none()) {
        return Err(format!(
            "{what} `{USED_ANNOTATION}`: NIC {b} is not on this node"
        ));
    }
    if let Some(c) = u.cpus.ids().iter().find(|c| !on_node(topo, **c)) {
        return Err(format!(
            "{what} `{USED_ANNOTATION}`: CPU {c} is not on this node"
        ));
    }
    u.gpus.sort();
    u.gpus.dedup();
    u.nics.sort();
    u.nics.dedup();
    Ok(u)
}

fn on_node(topo: &Topology, cpu: u32) -> bool {
    topo.numa.iter().any(|n| n.cpus.contains(cpu))
}

/// The static CPU manager of a declared node: `reservedSystemCPUs` from
/// [`RESERVED_CPUS_ANNOTATION`] (default: one CPU).
fn declared_cpu_manager(
    policy: Option<&str>,
    reserved: Option<&str>,
    topo: &Topology,
    s: &mut Settings,
) -> Result<(), String> {
    let Some(p) = policy else {
        return Ok(());
    };
    s.cpu_manager_policy = p
        .parse::<CpuPolicy>()
        .map_err(|e| format!("label `{CPU_POLICY_LABEL}`: {e}"))?;
    if s.cpu_manager_policy != CpuPolicy::Static {
        return Ok(());
    }
    match reserved {
        Some(text) => s.reserved_system_cpus = Some(reserved_cpus(text, topo)?),
        None => s.reserved_cpu_millis = 1000,
    }
    Ok(())
}

/// Reads [`RESERVED_CPUS_ANNOTATION`]: a non-empty cpulist of this node's CPUs.
fn reserved_cpus(text: &str, topo: &Topology) -> Result<CpuSet, String> {
    let set: CpuSet = text.parse().map_err(|e| {
        format!(
            "annotation `{RESERVED_CPUS_ANNOTATION}`: `{text}`: expected a cpulist such as 0-1: {e}"
        )
    })?;
    if let Some(c) = set.ids().iter().find(|c| !on_node(topo, **c)) {
        return Err(format!(
            "annotation `{RESERVED_CPUS_ANNOTATION}`: CPU {c} is not on this node"
        ));
    }
    if set.is_empty() {
        return Err(format!(
            "annotation `{RESERVED_CPUS_ANNOTATION}`: empty (the static CPU manager needs reserved CPUs)"
        ));
    }
    Ok(set)
}

/// A number in an NRT zone resource (`"64"` or `64`).
fn zone_count(v: Option<&Value>, what: &str) -> Result<u64, String> {
    match v {
        Some(Value::Number(n)) => n.as_u64(),
        Some(Value::String(s)) => s.parse::<u64>().ok(),
        None => Some(0),
        _ => None,
    }
    .ok_or_else(|| format!("NodeResourceTopology {what}: expected a whole number of CPUs"))
}

/// The static CPU manager from an NRT's zones: the agent lists a zone `cpu` resource per
/// NUMA node whose `allocatable` is what the kubelet reports allocatable
/// (pod-resources `GetAllocatableResources`: CPUs only under the static policy) and
/// whose `available` leaves out CPUs held exclusively by pods. Returns the reserved CPUs
/// (per NUMA node, capacity − allocatable, lowest ids) and the held CPUs (allocatable −
/// available, next ids), or `None` when no CPU is allocatable (policy `none`).
pub(crate) fn nrt_cpu_manager(
    nrt: &Value,
    topo: &Topology,
) -> Result<Option<(CpuSet, CpuSet)>, String> {
    let Some(zones) = nrt.get("zones").and_then(Value::as_array) else {
        return Ok(None);
    };
    let (mut reserved, mut held, mut any) = (Vec::new(), Vec::new(), false);
    for (i, z) in zones.iter().enumerate() {
        let Some(cpu) = z.get("resources").and_then(Value::as_array).and_then(|r| {
            r.iter()
                .find(|x| x.get("name").and_then(Value::as_str) == Some(NRT_CPU_RESOURCE))
        }) else {
            continue;
        };
        let name = z.get("name").and_then(Value::as_str).unwrap_or("");
        let id = name
            .strip_prefix("node-")
            .and_then(|n| n.parse::<u32>().ok())
            .ok_or_else(|| {
                format!("NodeResourceTopology zones[{i}].name: `{name}`: expected node-<NUMA id>")
            })?;
        let numa = topo.numa.iter().find(|n| n.id == id).ok_or_else(|| {
            format!("NodeResourceTopology zones[{i}]: NUMA node {id} is not in the topology")
        })?;
        let field = |f: &str| format!("zones[{i}].resources[cpu].{f}");
        let alloc = zone_count(cpu.get("allocatable"), &field("allocatable"))?;
        let avail = zone_count(cpu.get("available"), &field("available"))?;
        let ids = numa.cpus.ids();
        let cap = ids.len() as u64;
        if alloc > cap || avail > alloc {
            return Err(format!(
                "NodeResourceTopology {}: {avail} available of {alloc} allocatable CPUs on NUMA node {id} with {cap} (expected available ≤ allocatable ≤ capacity)",
                field("available")
            ));
        }
        any |= alloc > 0;
        let r = (cap - alloc) as usize;
        let h = (alloc - avail) as usize;
        reserved.extend_from_slice(&ids[..r]);
        held.extend_from_slice(&ids[r..r + h]);
    }
    Ok(any.then(|| (CpuSet::from_ids(reserved), CpuSet::from_ids(held))))
}

fn settings(
    policy: Option<&str>,
    scope: Option<&str>,
    options: Option<&str>,
) -> Result<Settings, String> {
    let mut s = Settings::default();
    if let Some(p) = policy {
        s.topology_manager_policy = p
            .parse::<Policy>()
            .map_err(|e| format!("topology manager policy: {e}"))?;
    }
    if let Some(p) = scope {
        s.topology_manager_scope = p
            .parse::<Scope>()
            .map_err(|e| format!("topology manager scope: {e}"))?;
    }
    if let Some(o) = options {
        s.topology_manager_policy_options = policy_options(o)?;
    }
    Ok(s)
}

/// The declared form on a Node object: `None` when the node carries no
/// `topoalign.dev/profile` label (not a topoalign node).
pub fn from_node_labels(node: &Value, interner: &mut Interner) -> Option<NodeEntry> {
    let labels = str_map(node, "labels");
    let profile = labels.get(PROFILE_LABEL)?;
    let annotations = str_map(node, "annotations");
    let entry = (|| {
        let topology = interner.profile(profile).map_err(|e| e.to_string())?;
        let used = usage(
            annotations.get(USED_ANNOTATION).copied(),
            &topology.topology,
            "Node annotation",
        )?;
        let mut settings = settings(
            labels.get(POLICY_LABEL).copied(),
            labels.get(SCOPE_LABEL).copied(),
            annotations.get(POLICY_OPTIONS_ANNOTATION).copied(),
        )?;
        declared_cpu_manager(
            labels.get(CPU_POLICY_LABEL).copied(),
            annotations.get(RESERVED_CPUS_ANNOTATION).copied(),
            &topology.topology,
            &mut settings,
        )?;
        Ok::<_, String>(NodeInfo {
            topology,
            settings: Arc::new(settings),
            used,
            source: Source::Labels,
            reported_at: None,
            reported_pods: BTreeSet::new(),
        })
    })();
    Some(match entry {
        Ok(info) => NodeEntry::Known(info),
        Err(why) => NodeEntry::Broken(why),
    })
}

/// Maps an NRT `topologyPolicies` value (`RestrictedContainerLevel`, …) to policy and
/// scope names.
fn nrt_policy(v: &str) -> Option<(&'static str, &'static str)> {
    Some(match v {
        "SingleNUMANodeContainerLevel" => ("single-numa-node", "container"),
        "SingleNUMANodePodLevel" => ("single-numa-node", "pod"),
        "Restricted" | "RestrictedContainerLevel" => ("restricted", "container"),
        "RestrictedPodLevel" => ("restricted", "pod"),
        "BestEffort" | "BestEffortContainerLevel" => ("best-effort", "container"),
        "BestEffortPodLevel" => ("best-effort", "pod"),
        "None" => ("none", "container"),
        _ => return None,
    })
}

/// A NodeResourceTopology object written by topoalign's agent.
pub fn from_nrt(nrt: &Value, interner: &mut Interner) -> NodeEntry {
    let annotations = str_map(nrt, "annotations");
    let attr = |name: &str| {
        nrt.get("attributes")
            .and_then(Value::as_array)
            .and_then(|a| {
                a.iter()
                    .find(|x| x.get("name").and_then(Value::as_str) == Some(name))
            })
            .and_then(|x| x.get("value"))
            .and_then(Value::as_str)
    };
    let entry = (|| {
        let text = annotations.get(TOPOLOGY_ANNOTATION).ok_or_else(|| {
            format!("NodeResourceTopology: annotation `{TOPOLOGY_ANNOTATION}` missing (not written by topoalign's agent)")
        })?;
        let topology = interner.json(text).map_err(|e| e.to_string())?;
        let mut used = usage(
            annotations.get(USED_ANNOTATION).copied(),
            &topology.topology,
            "NodeResourceTopology annotation",
        )?;
        let from_list = nrt
            .get("topologyPolicies")
            .and_then(Value::as_array)
            .and_then(|a| a.first())
            .and_then(Value::as_str)
            .and_then(nrt_policy);
        let policy = attr(NRT_POLICY_ATTRIBUTE).or(from_list.map(|p| p.0));
        let scope = attr(NRT_SCOPE_ATTRIBUTE).or(from_list.map(|p| p.1));
        let mut settings = settings(
            policy,
            scope,
            annotations.get(POLICY_OPTIONS_ANNOTATION).copied(),
        )?;
        if let Some((reserved, held)) = nrt_cpu_manager(nrt, &topology.topology)? {
            settings.cpu_manager_policy = CpuPolicy::Static;
            // The agent names the reserved CPUs; without that (an upstream exporter)
            // they are the lowest ids of each zone's difference.
            let reserved = match annotations.get(RESERVED_CPUS_ANNOTATION) {
                Some(text) => reserved_cpus(text, &topology.topology)?,
                None => reserved,
            };
            settings.reserved_system_cpus = Some(reserved);
            if used.cpus.is_empty() {
                used.cpus = held;
            }
        }
        let reported_at = match annotations.get(REPORTED_AT_ANNOTATION) {
            None => None,
            Some(t) => Some(parse_time(t).map_err(|e| e.to_string())?),
        };
        let reported_pods: BTreeSet<String> = match annotations.get(PODS_ANNOTATION) {
            None => BTreeSet::new(),
            Some(t) => serde_json::from_str(t).map_err(|e| {
                format!(
                    "annotation `{PODS_ANNOTATION}`: expected a JSON list of namespace/name: {e}"
                )
            })?,
        };
        Ok::<_, String>(NodeInfo {
            topology,
            settings: Arc::new(settings),
            used,
            source: Source::Nrt,
            reported_at,
            reported_pods,
        })
    })();
    match entry {
        Ok(info) => NodeEntry::Known(info),
        Err(why) => NodeEntry::Broken(why),
    }
}

/// Why a node's data cannot be read.
#[derive(Debug, thiserror::Error)]
pub(crate) enum NodeDataError {
    /// The agent's report time is not an RFC 3339 time.
    #[error("annotation `{REPORTED_AT_ANNOTATION}`: `{text}` is not an RFC 3339 time")]
    ReportedAt {
        /// The annotation's value.
        text: String,
        /// Why it does not parse.
        #[source]
        source: jiff::Error,
    },
}

/// Parses an RFC 3339 time (as the agent writes it).
pub(crate) fn parse_time(text: &str) -> Result<SystemTime, NodeDataError> {
    let ts: jiff::Timestamp = text.parse().map_err(|source| NodeDataError::ReportedAt {
        text: text.to_string(),
        source,
    })?;
    Ok(ts.into())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::error::Error as _;
    use std::time::{Duration, UNIX_EPOCH};

    #[test]
    fn report_times_parse_or_name_the_annotation_with_the_cause_kept() {
        assert_eq!(
            parse_time("2026-01-02T03:04:05Z").ok(),
            Some(UNIX_EPOCH + Duration::from_secs(1_767_323_045))
        );
        let err = match parse_time("yesterday") {
            Err(e) => e,
            Ok(t) => panic!("`yesterday` parsed as {t:?}"),
        };
        assert_eq!(
            err.to_string(),
            format!("annotation `{REPORTED_AT_ANNOTATION}`: `yesterday` is not an RFC 3339 time")
        );
        assert!(
            err.source().is_some(),
            "the parser's error is kept as the source"
        );
    }
}
