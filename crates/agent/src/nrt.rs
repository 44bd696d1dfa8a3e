//! The NodeResourceTopology object (`topology.node.k8s.io/v1alpha2`) the agent applies:
//! one zone of type `Node` per NUMA node with per-resource capacity, allocatable and
//! available (so the upstream NodeResourceTopology scheduler plugin can read it), the
//! kubelet's Topology Manager policy and scope as attributes (upstream names) and in the
//! older `topologyPolicies` list, and topoalign's finer detail as annotations.

use serde_json::{Value, json};
use topoalign_kube_types::kubelet_settings::{Policy, Scope, Settings};
use topoalign_kube_types::labels::*;
use topoalign_kube_types::nrt::*;
use topoalign_topology::Topology;

use crate::report::Report;

/// The `topologyPolicies` value (`RestrictedContainerLevel`, …) of a policy and scope.
pub(crate) fn legacy_policy(policy: Policy, scope: Scope) -> &'static str {
    match (policy, scope) {
        (Policy::None, _) => "None",
        (Policy::BestEffort, Scope::Container) => "BestEffortContainerLevel",
        (Policy::BestEffort, Scope::Pod) => "BestEffortPodLevel",
        (Policy::Restricted, Scope::Container) => "RestrictedContainerLevel",
        (Policy::Restricted, Scope::Pod) => "RestrictedPodLevel",
        (Policy::SingleNumaNode, Scope::Container) => "SingleNUMANodeContainerLevel",
        (Policy::SingleNumaNode, Scope::Pod) => "SingleNUMANodePodLevel",
    }
}

fn zone_name(id: u32) -> String {
    format!("node-{id}")
}

/// `k=v,k=v` of the policy options.
pub(crate) fn options_text(settings: &Settings) -> String {
    settings
        .topology_manager_policy_options
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(",")
}

/// The object to apply for `node`, at `reported_at` (RFC 3339).
pub fn nrt_object(
    node: &str,
    topo: &Topology,
    report: &Report,
    settings: &Settings,
    reported_at: &str,
) -> Value {
    let mut zones = Vec::new();
    for (k, n) in topo.numa.iter().enumerate() {
        let mut resources = Vec::new();
        if let Some((alloc, avail)) = report.cpus.get(&n.id) {
            resources.push(json!({
                "name": "cpu",
                "capacity": n.cpus.len().to_string(),
                "allocatable": alloc.to_string(),
                "available": avail.to_string(),
            }));
        }
        for (res, by_numa) in &report.zones {
            if let Some(c) = by_numa.get(&i64::from(n.id)) {
                resources.push(json!({
                    "name": res,
                    "capacity": c.allocatable.to_string(),
                    "allocatable": c.allocatable.to_string(),
                    "available": c.available.to_string(),
                }));
            }
        }
        let costs: Vec<Value> = topo
            .numa
            .iter()
            .zip(n.distances.iter().copied().chain(std::iter::repeat(0)))
            .filter(|(_, d)| *d > 0)
            .map(|(m, d)| json!({"name": zone_name(m.id), "value": d}))
            .collect();
        let _ = k;
        zones.push(json!({
            "name": zone_name(n.id),
            "type": NRT_ZONE_NUMA,
            "costs": costs,
            "resources": resources,
        }));
    }
    let policy = settings.topology_manager_policy;
    let scope = settings.topology_manager_scope;
    let mut attributes = vec![
        json!({"name": NRT_POLICY_ATTRIBUTE, "value": policy.as_str()}),
        json!({"name": NRT_SCOPE_ATTRIBUTE, "value": scope.as_str()}),
        json!({"name": FABRIC_LABEL, "value": report.fabric}),
    ];
    if let Some(b) = report.best_pair {
        attributes.push(json!({"name": BEST_PAIR_LABEL, "value": b.as_str()}));
    }
    let compact = serde_json::to_string(topo).unwrap_or_default();
    // Devices in use and the exact CPUs pods hold exclusively (the zones' counts alone
    // cannot say which CPUs).
    let mut used = json!({"gpus": report.used.gpus, "nics": report.used.nics});
    if !report.used.cpus.is_empty() {
        used["cpus"] = report.used.cpus.to_string().into();
    }
    let used = used.to_string();
    let pods = serde_json::to_string(&report.pods).unwrap_or_default();
    let mut object = json!({
        "apiVersion": format!("{NRT_GROUP}/{NRT_VERSION}"),
        "kind": NRT_KIND,
        "metadata": {
            "name": node,
            "annotations": {
                TOPOLOGY_ANNOTATION: compact,
                USED_ANNOTATION: used,
                PODS_ANNOTATION: pods,
                REPORTED_AT_ANNOTATION: reported_at,
                SWITCH_GROUPS_ANNOTATION: report.switch_groups,
                PAIRS_ANNOTATION: report.free_pairs,
                POLICY_OPTIONS_ANNOTATION: options_text(settings),
            },
        },
        "topologyPolicies": [legacy_policy(policy, scope)],
        "attributes": attributes,
        "zones": zones,
    });
    if let (Some(reserved), Some(a)) = (
        &report.reserved_cpus,
        object
            .pointer_mut("/metadata/annotations")
            .and_then(Value::as_object_mut),
    ) {
        a.insert(RESERVED_CPUS_ANNOTATION.into(), reserved.to_string().into());
    }
    object
}

/// The rails as the NodeResourceTopology annotation holds them: each physical NIC's PCI
/// address to its rail, and how they were found.
pub(crate) fn rails_json(rails: &topoalign_fabric::NicRails) -> Value {
    #[derive(serde::Serialize)]
    struct Rails<'a> {
        rails: u32,
        source: &'a str,
        nics: std::collections::BTreeMap<String, u32>,
    }
    serde_json::to_value(Rails {
        rails: rails.rails,
        source: &rails.source,
        nics: rails
            .by_nic
            .iter()
            .map(|(b, r)| (b.to_string(), *r))
            .collect(),
    })
    .unwrap_or(Value::Null)
}

/// Adds the node's facts to an NRT object: each domain label written as an attribute
/// (its key and value), and each NIC's rail as the [`RAILS_ANNOTATION`] annotation.
pub(crate) fn add_facts(
    object: &mut Value,
    domains: &std::collections::BTreeMap<String, String>,
    rails: Option<&topoalign_fabric::NicRails>,
) {
    if let Some(a) = object.get_mut("attributes").and_then(Value::as_array_mut) {
        for (k, v) in domains {
            a.push(json!({"name": k, "value": v}));
        }
    }
    if let (Some(r), Some(a)) = (
        rails,
        object
            .pointer_mut("/metadata/annotations")
            .and_then(Value::as_object_mut),
    ) {
        a.insert(RAILS_ANNOTATION.into(), rails_json(r).to_string().into());
    }
}
