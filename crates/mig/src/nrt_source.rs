//! A node's MIG devices from its Node object together with its NodeResourceTopology,
//! whose zones list `nvidia.com/mig-<profile>` resources (an agent such as NFD's topology
//! updater or topoalign's own writes them). The NRT's amounts are merged into the Node's
//! `status.allocatable` and the result read by the one reader of a Node's MIG state
//! ([`NodeMig::from_node`]), so the Node's labels (product, GPU count, strategy) still
//! name the model; a profile in the NRT that the model lacks is an error naming the NRT.

use std::collections::BTreeMap;

use serde_json::{Map, Value};
use topoalign_kube_types::Quantity;

use crate::device_plugin::unknown;
use crate::{DevicePluginError, NodeMig, profile_of_resource};

/// Which amount of an NRT resource counts, and how it meets the Node's own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NrtAmount {
    /// `allocatable` (else `capacity`), standing in where the Node gives no amount: what
    /// the node can ever offer (lint).
    Allocatable,
    /// `available`, over the Node's allocatable: what is free now (the extender).
    Available,
}

/// An NRT's `nvidia.com/mig-*` resources, summed over its zones; amounts that are not
/// whole quantities are skipped.
pub fn nrt_mig_counts(nrt: &Value, amount: NrtAmount) -> BTreeMap<String, u64> {
    let mut out: BTreeMap<String, u64> = BTreeMap::new();
    let zones = nrt.get("zones").and_then(Value::as_array);
    for zone in zones.into_iter().flatten() {
        let resources = zone.get("resources").and_then(Value::as_array);
        for r in resources.into_iter().flatten() {
            let Some(name) = r.get("name").and_then(Value::as_str) else {
                continue;
            };
            if profile_of_resource(name).is_none() {
                continue;
            }
            let value = match amount {
                NrtAmount::Allocatable => r.get("allocatable").or_else(|| r.get("capacity")),
                NrtAmount::Available => r.get("available"),
            };
            if let Some(n) = value.and_then(|v| Quantity::from_json(v).ok()?.whole_units()) {
                let total = out.entry(name.to_string()).or_default();
                *total = total.saturating_add(n);
            }
        }
    }
    out
}

/// Node `name`'s MIG state from its Node object (`None`: not seen yet) and the MIG
/// amounts of its NRT ([`nrt_mig_counts`], taken as `amount` says). `None` when neither
/// shows MIG.
pub fn node_mig_with_nrt(
    name: &str,
    node: Option<&Value>,
    counts: Option<&BTreeMap<String, u64>>,
    amount: NrtAmount,
) -> Option<Result<NodeMig, DevicePluginError>> {
    let mut node = node.cloned().unwrap_or_else(|| Value::Object(Map::new()));
    if let Some(c) = counts {
        merge_allocatable(&mut node, c, amount == NrtAmount::Available);
    }
    let mig = NodeMig::from_node(&node)?;
    Some(mig.and_then(|m| check_nrt(name, m, counts)))
}

/// The node's state unless its NRT names a MIG profile the node's model lacks (the
/// device plugin's own resources are the model's by construction; an NRT is another
/// writer's).
fn check_nrt(
    name: &str,
    node: NodeMig,
    counts: Option<&BTreeMap<String, u64>>,
) -> Result<NodeMig, DevicePluginError> {
    let (Some(model), Some(counts)) = (node.model, counts) else {
        return Ok(node);
    };
    for resource in counts.keys() {
        let Some(profile) = profile_of_resource(resource) else {
            continue;
        };
        if model.shape(&profile).is_none() {
            return Err(unknown(
                model,
                &profile,
                format!("NodeResourceTopology {name} resource {resource}"),
            ));
        }
    }
    Ok(node)
}

/// Adds `counts` to the Node's `status.allocatable`: over its own amounts when
/// `replace`, else only where it has none.
fn merge_allocatable(node: &mut Value, counts: &BTreeMap<String, u64>, replace: bool) {
    let Some(obj) = node.as_object_mut() else {
        return;
    };
    let status = obj
        .entry("status")
        .or_insert_with(|| Value::Object(Map::new()));
    let Some(status) = status.as_object_mut() else {
        return;
    };
    let alloc = status
        .entry("allocatable")
        .or_insert_with(|| Value::Object(Map::new()));
    let Some(alloc) = alloc.as_object_mut() else {
        return;
    };
    for (k, n) in counts {
        let v = Value::String(n.to_string());
        if replace {
            alloc.insert(k.clone(), v);
        } else {
            alloc.entry(k.clone()).or_insert(v);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn nrt() -> Value {
        json!({"kind": "NodeResourceTopology", "metadata": {"name": "a"}, "zones": [
            {"name": "node-0", "resources": [
                {"name": "nvidia.com/mig-3g.40gb", "capacity": "2", "allocatable": "2", "available": "1"},
                {"name": "cpu", "capacity": "64", "allocatable": "64", "available": "64"}]},
            {"name": "node-1", "resources": [
                {"name": "nvidia.com/mig-3g.40gb", "capacity": "2", "allocatable": 2, "available": "0"},
                {"name": "nvidia.com/mig-1g.10gb", "allocatable": "1.5"}]}
        ]})
    }

    #[test]
    fn counts_by_amount_and_only_whole_mig_resources() {
        let all = nrt_mig_counts(&nrt(), NrtAmount::Allocatable);
        assert_eq!(all, BTreeMap::from([("nvidia.com/mig-3g.40gb".into(), 4)]));
        let free = nrt_mig_counts(&nrt(), NrtAmount::Available);
        assert_eq!(free, BTreeMap::from([("nvidia.com/mig-3g.40gb".into(), 1)]));
    }

    #[test]
    fn available_overrides_the_nodes_allocatable_and_allocatable_only_fills_in() {
        let node = json!({"metadata": {"name": "a", "labels": {
            "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3", "nvidia.com/gpu.count": "2",
            "nvidia.com/mig.strategy": "mixed"}},
            "status": {"allocatable": {"nvidia.com/mig-3g.40gb": "3"}}});
        let free = nrt_mig_counts(&nrt(), NrtAmount::Available);
        let m = node_mig_with_nrt("a", Some(&node), Some(&free), NrtAmount::Available)
            .unwrap()
            .unwrap();
        assert_eq!(m.instances.get("3g.40gb"), Some(&1));
        let all = nrt_mig_counts(&nrt(), NrtAmount::Allocatable);
        let m = node_mig_with_nrt("a", Some(&node), Some(&all), NrtAmount::Allocatable)
            .unwrap()
            .unwrap();
        assert_eq!(
            m.instances.get("3g.40gb"),
            Some(&3),
            "the Node's own amount"
        );
        assert!(node_mig_with_nrt("a", None, None, NrtAmount::Available).is_none());
    }

    #[test]
    fn a_profile_the_model_lacks_names_the_nrt() {
        let node = json!({"metadata": {"name": "a", "labels": {
            "nvidia.com/gpu.product": "NVIDIA-A100-SXM4-40GB", "nvidia.com/gpu.count": "1"}}});
        let counts = BTreeMap::from([("nvidia.com/mig-3g.40gb".to_string(), 1)]);
        let e = node_mig_with_nrt("a", Some(&node), Some(&counts), NrtAmount::Available)
            .unwrap()
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("NodeResourceTopology a resource nvidia.com/mig-3g.40gb"),
            "{e}"
        );
    }
}
