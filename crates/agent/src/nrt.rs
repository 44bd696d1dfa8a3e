//! The NodeResourceTopology object (`topology.node.k8s.io/v1alpha2`) the agent applies:
//! one zone of type `Node` per NUMA node with per-resource capacity, allocatable and
//! available (so the upstream NodeResourceTopology scheduler plugin can read it), the
//! kubelet's Topology Manager policy and scope as attributes (upstream names) and in the
//! older `topologyPolicies` list, and topoalign's finer detail as annotations.

use serde_json::{Value, json};
use topoalign_extender::keys::*;
use topoalign_tm::{Policy, Scope, Settings};
use topoalign_topology::Topology;

use crate::report::Report;

/// The `topologyPolicies` value (`RestrictedContainerLevel`, …) of a policy and scope.
pub fn legacy_policy(policy: Policy, scope: Scope) -> &'static str {
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
pub fn options_text(settings: &Settings) -> String {
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

#[cfg(test)]
mod tests {
    use topoalign_extender::NodeEntry;
    use topoalign_extender::nodeinfo::{Interner, from_nrt};
    use topoalign_tm::settings::CpuPolicy;
    use topoalign_topology::CpuSet;

    use super::*;
    use crate::podresources::{Devices, KubeletView, PodDevices};
    use crate::report::build;

    /// The extender reads back exactly the CPUs the kubelet reserves and the CPUs pods
    /// hold, not sets guessed from the per-zone counts (which would say CPU 0 and
    /// CPUs 1-4 here).
    #[test]
    fn the_extender_reads_the_exact_reserved_and_held_cpus() {
        let topo = topoalign_profiles::get("mi300x-8").expect("built-in profile");
        let all: Vec<i64> = topo
            .numa
            .iter()
            .flat_map(|n| n.cpus.ids().iter().map(|c| i64::from(*c)))
            .collect();
        let reserved = [2_i64, 113];
        let gpu = topo.gpu_bdf(0).to_string();
        let view = KubeletView {
            allocatable: vec![Devices {
                resource: "amd.com/gpu".into(),
                ids: vec![gpu.clone()],
                numa: vec![0],
            }],
            allocatable_cpus: all
                .iter()
                .copied()
                .filter(|c| !reserved.contains(c))
                .collect(),
            pods: vec![PodDevices {
                namespace: "default".into(),
                name: "p".into(),
                devices: vec![Devices {
                    resource: "amd.com/gpu".into(),
                    ids: vec![gpu],
                    numa: vec![0],
                }],
                cpus: vec![40, 41, 120, 121],
            }],
        };
        let report = build(&topo, &view);
        let settings = Settings {
            topology_manager_policy: Policy::Restricted,
            ..Settings::default()
        };
        let object = nrt_object("n", &topo, &report, &settings, "2026-11-23T00:00:00Z");
        assert_eq!(
            object["metadata"]["annotations"][RESERVED_CPUS_ANNOTATION],
            "2,113"
        );
        let NodeEntry::Known(info) = from_nrt(&object, &mut Interner::default()) else {
            panic!("the agent's own object was refused");
        };
        assert_eq!(info.settings.cpu_manager_policy, CpuPolicy::Static);
        assert_eq!(
            info.settings.reserved_system_cpus,
            Some(CpuSet::from_ids([2, 113]))
        );
        assert_eq!(info.used.cpus, CpuSet::from_ids([40, 41, 120, 121]));
        // CPU manager `none`: nothing allocatable, nothing reserved is written.
        let none = KubeletView {
            allocatable_cpus: Vec::new(),
            ..view
        };
        let object = nrt_object(
            "n",
            &topo,
            &build(&topo, &none),
            &settings,
            "2026-11-23T00:00:00Z",
        );
        assert!(
            object["metadata"]["annotations"]
                .get(RESERVED_CPUS_ANNOTATION)
                .is_none()
        );
    }
}
