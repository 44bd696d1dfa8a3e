//! From API objects to [`NodeEntry`]: a node agent's NodeResourceTopology, or (when there
//! is none) the node's own labels and annotations — the declared form the end-to-end
//! harness uses for synthetic nodes.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;
use std::time::SystemTime;

use serde_json::Value;
use topoalign_tm::{Policy, Scope, Settings};
use topoalign_topology::{NodeUsage, Topology};

use crate::keys::*;
use crate::state::{NodeEntry, NodeInfo, NodeTopology, Source, hash_of};

/// Topologies by source key, parsed once and shared by every node reporting the same.
#[derive(Debug, Default)]
pub struct Interner {
    by_key: HashMap<u64, Arc<NodeTopology>>,
}

impl Interner {
    /// The built-in profile `name`, or why not.
    pub fn profile(&mut self, name: &str) -> Result<Arc<NodeTopology>, String> {
        let key = format!("profile:{name}");
        let id = hash_of(&key);
        if let Some(t) = self.by_key.get(&id) {
            return Ok(t.clone());
        }
        let topo = topoalign_profiles::get(name).ok_or_else(|| {
            format!(
                "label `{PROFILE_LABEL}`: unknown profile `{name}` (expected one of {})",
                topoalign_profiles::NAMES.join(", ")
            )
        })?;
        let t = Arc::new(NodeTopology::new(key, topo));
        self.by_key.insert(id, t.clone());
        Ok(t)
    }

    /// A topology from its compact JSON, or why not.
    pub fn json(&mut self, text: &str) -> Result<Arc<NodeTopology>, String> {
        let key = format!("nrt:{:016x}", hash_of(text));
        let id = hash_of(&key);
        if let Some(t) = self.by_key.get(&id) {
            return Ok(t.clone());
        }
        let mut topo: Topology = serde_json::from_str(text)
            .map_err(|e| format!("annotation `{TOPOLOGY_ANNOTATION}`: not a topology: {e}"))?;
        topo.canonicalize();
        topo.validate()
            .map_err(|e| format!("annotation `{TOPOLOGY_ANNOTATION}`: invalid topology: {e}"))?;
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
    u.gpus.sort();
    u.gpus.dedup();
    u.nics.sort();
    u.nics.dedup();
    Ok(u)
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
        let topology = interner.profile(profile)?;
        let used = usage(
            annotations.get(USED_ANNOTATION).copied(),
            &topology.topology,
            "Node annotation",
        )?;
        let settings = settings(
            labels.get(POLICY_LABEL).copied(),
            labels.get(SCOPE_LABEL).copied(),
            annotations.get(POLICY_OPTIONS_ANNOTATION).copied(),
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
        let topology = interner.json(text)?;
        let used = usage(
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
        let settings = settings(
            policy,
            scope,
            annotations.get(POLICY_OPTIONS_ANNOTATION).copied(),
        )?;
        let reported_at = match annotations.get(REPORTED_AT_ANNOTATION) {
            None => None,
            Some(t) => Some(parse_time(t)?),
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

/// Parses an RFC 3339 time (as the agent writes it).
pub fn parse_time(text: &str) -> Result<SystemTime, String> {
    let ts: jiff::Timestamp = text.parse().map_err(|_| {
        format!("annotation `{REPORTED_AT_ANNOTATION}`: `{text}` is not an RFC 3339 time")
    })?;
    Ok(ts.into())
}
