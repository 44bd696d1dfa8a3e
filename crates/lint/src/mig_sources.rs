//! Where lint learns a node's MIG devices: its Node object (GFD labels, allocatable
//! `nvidia.com/mig-*` or, under the single strategy, `nvidia.com/gpu`) and its
//! NodeResourceTopology, whose zones list `nvidia.com/mig-<profile>` resources. Both are
//! read by the one reader of a Node's MIG state ([`NodeMig::from_node`]): an NRT's MIG
//! resources (zone amounts summed) stand in for allocatable amounts the Node does not
//! give, so the Node's labels (product, GPU count, strategy) still name the model.
//!
//! Objects arrive in any order; each arrival recomputes that node's state.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;
use topoalign_kube_types::Quantity;
use topoalign_kube_types::nrt::NRT_KIND;
use topoalign_mig::{DevicePluginError, NodeMig, NrtAmount, node_mig_with_nrt, nrt_mig_counts};

/// The whole-GPU resource of the NVIDIA device plugin.
const GPU_RESOURCE: &str = "nvidia.com/gpu";

/// The MIG inputs of the whole input, by node name.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct MigSources {
    /// Node objects.
    nodes: BTreeMap<String, Value>,
    /// `nvidia.com/mig-*` amounts of each NodeResourceTopology, summed over its zones.
    nrt: BTreeMap<String, BTreeMap<String, u64>>,
}

/// What the sources say about the nodes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct MigView {
    /// Nodes that show MIG, as read (a label that cannot be read is the error).
    pub mig_nodes: BTreeMap<String, Result<NodeMig, DevicePluginError>>,
    /// Nodes that offer whole NVIDIA GPUs (allocatable `nvidia.com/gpu`) and show no MIG.
    pub plain_gpu_nodes: BTreeSet<String>,
}

impl MigSources {
    /// Records a Node or a NodeResourceTopology; other kinds are ignored. Returns the
    /// node name whose state may have changed.
    pub(crate) fn add(&mut self, kind: &str, value: &Value) -> Option<String> {
        let name = value
            .pointer("/metadata/name")
            .and_then(Value::as_str)?
            .to_string();
        match kind {
            "Node" => {
                self.nodes.insert(name.clone(), value.clone());
            }
            k if k == NRT_KIND => {
                let counts = nrt_mig_counts(value, NrtAmount::Allocatable);
                if counts.is_empty() {
                    return None;
                }
                self.nrt.insert(name.clone(), counts);
            }
            _ => return None,
        }
        Some(name)
    }

    /// Node `name` as [`MigView`] sees it: `(MIG state, offers plain GPUs)`.
    pub(crate) fn judge(&self, name: &str) -> (Option<Result<NodeMig, DevicePluginError>>, bool) {
        let node = self.nodes.get(name);
        let mig = node_mig_with_nrt(name, node, self.nrt.get(name), NrtAmount::Allocatable);
        let plain = mig.is_none() && node.is_some_and(|n| allocatable_gpus(n) > 0);
        (mig, plain)
    }

    /// Updates `view` for node `name`.
    pub(crate) fn refresh(&self, name: &str, view: &mut MigView) {
        let (mig, plain) = self.judge(name);
        match mig {
            Some(m) => {
                view.mig_nodes.insert(name.to_string(), m);
            }
            None => {
                view.mig_nodes.remove(name);
            }
        }
        if plain {
            view.plain_gpu_nodes.insert(name.to_string());
        } else {
            view.plain_gpu_nodes.remove(name);
        }
    }
}

/// The Node's allocatable `nvidia.com/gpu` (0 when absent or not whole).
fn allocatable_gpus(node: &Value) -> u64 {
    node.pointer("/status/allocatable")
        .and_then(|a| a.get(GPU_RESOURCE))
        .and_then(|v| Quantity::from_json(v).ok()?.whole_units())
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn nrt(name: &str, zones: Value) -> Value {
        json!({"apiVersion": "topology.node.k8s.io/v1alpha2", "kind": NRT_KIND,
               "metadata": {"name": name}, "zones": zones})
    }

    #[test]
    fn nrt_mig_resources_make_a_mig_node_and_the_nodes_labels_name_its_model() {
        let mut s = MigSources::default();
        let mut view = MigView::default();
        let t = nrt(
            "a",
            json!([
                {"name": "node-0", "type": "Node", "resources": [
                    {"name": "nvidia.com/mig-3g.40gb", "capacity": "2", "allocatable": "2", "available": "1"},
                    {"name": "cpu", "capacity": "64", "allocatable": "64", "available": "64"}]},
                {"name": "node-1", "type": "Node", "resources": [
                    {"name": "nvidia.com/mig-3g.40gb", "capacity": "2", "allocatable": 2, "available": "2"}]}
            ]),
        );
        let name = s.add(NRT_KIND, &t).unwrap();
        s.refresh(&name, &mut view);
        let n = view.mig_nodes["a"].as_ref().unwrap();
        assert_eq!(n.instances.get("3g.40gb"), Some(&4));
        assert_eq!(n.model, None);
        // The Node arrives later: its labels name the model and GPU count.
        let node = json!({"kind": "Node", "metadata": {"name": "a", "labels": {
            "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3", "nvidia.com/gpu.count": "2"}}});
        let name = s.add("Node", &node).unwrap();
        s.refresh(&name, &mut view);
        let n = view.mig_nodes["a"].as_ref().unwrap();
        assert_eq!(n.model.map(|m| m.name), Some("h100-80gb"));
        assert_eq!((n.gpus, n.instances.get("3g.40gb")), (Some(2), Some(&4)));
        assert!(view.plain_gpu_nodes.is_empty());
    }

    #[test]
    fn plain_gpu_nodes_and_nrts_without_mig() {
        let mut s = MigSources::default();
        let mut view = MigView::default();
        let node = json!({"kind": "Node", "metadata": {"name": "g"},
                          "status": {"allocatable": {"nvidia.com/gpu": "8"}}});
        let name = s.add("Node", &node).unwrap();
        s.refresh(&name, &mut view);
        assert!(view.plain_gpu_nodes.contains("g") && view.mig_nodes.is_empty());
        let t = nrt(
            "g",
            json!([{"name": "node-0", "resources": [
            {"name": "nvidia.com/gpu", "allocatable": "8"}]}]),
        );
        assert_eq!(s.add(NRT_KIND, &t), None, "no MIG resource: not a source");
        assert_eq!(s.add("Pod", &node), None);
    }
}
