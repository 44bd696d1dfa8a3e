//! Every object the driver would create for a node, for `topoalign driver --dry-run`:
//! the DeviceClasses it ships, then the node's ResourceSlices at generation 1, exactly as
//! the slice controller computes them (without the owner reference to the Node, which needs a
//! cluster), and with `--write-domain-labels` the Node patch of its domain labels
//! ([`domain_labels`](crate::dry_run::domain_labels)), as on a node that carries no domain label yet.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::Node;
use k8s_openapi::api::resource::v1::{DeviceClass, ResourceSlice};
use serde::Serialize;
use topoalign_dra::publish::PublishOptions;
use topoalign_fabric::{DomainLabels, NicRails};
use topoalign_node_facts::NodeFacts;
use topoalign_topology::Topology;

use crate::error::DriverError;
use crate::start::Start;

/// One object the driver creates.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum DriverObject {
    /// A DeviceClass (cluster-wide; shipped with the driver).
    DeviceClass(DeviceClass),
    /// A ResourceSlice of the node's pool.
    ResourceSlice(ResourceSlice),
    /// The Node with only its name and the domain labels the driver applies (a
    /// server-side apply patch under [`crate::LABEL_MANAGER`]).
    Node(Box<Node>),
}

/// The domain labels `facts` give a node that carries none yet (the dry run does not
/// read the cluster), and the Node patch that writes them (`None` when there is no label
/// to write). The notes say what would not be written and why.
pub fn domain_labels(node_name: &str, facts: &NodeFacts) -> (Option<DriverObject>, DomainLabels) {
    let labels = facts.labels(&BTreeMap::new(), &BTreeSet::new());
    let patch = (!labels.write.is_empty()).then(|| {
        DriverObject::Node(Box::new(crate::domain_labels::node_patch(
            node_name,
            &labels.write,
        )))
    });
    (patch, labels)
}

/// The DeviceClasses (the MIG classes too where the node has MIG instances), then the
/// node's ResourceSlices (pool generation 1), each NIC on the rail `rails` gives it.
pub fn objects(
    topo: &Topology,
    node_name: &str,
    options: &PublishOptions,
    rails: Option<&NicRails>,
) -> Result<Vec<DriverObject>, DriverError> {
    let opts = PublishOptions {
        generation: 1,
        ..options.clone()
    };
    let inventory = crate::inventory::inventory(topo, &opts, rails);
    let slices = topoalign_dra::publish::slices_for(&inventory, node_name, opts.generation)?;
    let mig_classes = if opts.mig.is_empty() {
        Vec::new()
    } else {
        topoalign_dra::publish::mig_device_classes()
    };
    Ok(topoalign_dra::publish::device_classes()
        .into_iter()
        .chain(mig_classes)
        .map(DriverObject::DeviceClass)
        .chain(slices.into_iter().map(DriverObject::ResourceSlice))
        .collect())
}

/// Every object the driver started as `start` would create on node `node_name`
/// ([`objects`]), then with `--write-domain-labels` the Node patch of its domain labels
/// ([`domain_labels`]); and the notes on the labels not written.
pub fn of_start(
    start: &Start,
    node_name: &str,
) -> Result<(Vec<DriverObject>, Vec<String>), DriverError> {
    let options = &start.config.options;
    let mut objects = objects(
        &start.topology,
        node_name,
        options,
        start.facts.rails.as_ref(),
    )?;
    if !start.config.write_domain_labels {
        return Ok((objects, Vec::new()));
    }
    let (patch, labels) = domain_labels(node_name, &start.facts);
    objects.extend(patch);
    Ok((objects, labels.notes))
}

/// The objects as one `v1` List (the `-o json` form).
pub fn list(objects: &[DriverObject]) -> serde_json::Value {
    serde_json::json!({ "apiVersion": "v1", "kind": "List", "items": objects })
}

/// One line per object: kind, name, and what it holds.
pub fn table(objects: &[DriverObject]) -> String {
    let mut out = format!("{:<14} {:<52} {}\n", "KIND", "NAME", "CONTENT");
    for o in objects {
        let (kind, name, content) = match o {
            DriverObject::DeviceClass(c) => ("DeviceClass", &c.metadata.name, String::new()),
            DriverObject::ResourceSlice(s) => {
                let devices = s.spec.devices.as_ref().map_or(0, Vec::len);
                let sets = s.spec.shared_counters.as_ref().map_or(0, Vec::len);
                let what = match sets {
                    0 => format!("{devices} devices"),
                    _ => format!("{sets} counter sets"),
                };
                let pool = &s.spec.pool;
                let content = format!("pool {} gen {}, {what}", pool.name, pool.generation);
                ("ResourceSlice", &s.metadata.name, content)
            }
            DriverObject::Node(n) => {
                let labels = n.metadata.labels.as_ref().map_or(String::new(), |l| {
                    l.iter()
                        .map(|(k, v)| format!("{k}={v}"))
                        .collect::<Vec<_>>()
                        .join(", ")
                });
                ("Node", &n.metadata.name, format!("labels {labels}"))
            }
        };
        let name = name.as_deref().unwrap_or_default();
        out.push_str(&format!("{kind:<14} {name:<52} {content}\n"));
    }
    out
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    #[test]
    fn classes_first_then_the_pool_at_generation_one() {
        for name in topoalign_profiles::NAMES {
            let topo = topoalign_profiles::get(name).unwrap();
            let opts = PublishOptions {
                generation: 7,
                ..Default::default()
            };
            let objects = objects(&topo, "n1", &opts, None).unwrap();
            let classes = objects
                .iter()
                .take_while(|o| matches!(o, DriverObject::DeviceClass(_)))
                .count();
            assert_eq!(classes, 3, "{name}");
            for o in &objects[classes..] {
                let DriverObject::ResourceSlice(s) = o else {
                    panic!("{name}: a DeviceClass after the slices");
                };
                assert_eq!(s.spec.pool.generation, 1, "{name}");
                assert_eq!(s.spec.node_name.as_deref(), Some("n1"));
            }
            let v = serde_json::to_value(&objects[0]).unwrap();
            assert_eq!(v["kind"], "DeviceClass", "untagged: the object itself");
        }
    }

    #[test]
    fn the_table_has_a_line_per_object_and_the_list_holds_them_all() {
        let topo = topoalign_profiles::get("mi300x-8").unwrap();
        let objects = objects(&topo, "n1", &PublishOptions::default(), None).unwrap();
        let table = table(&objects);
        assert_eq!(table.lines().count(), objects.len() + 1);
        assert!(table.starts_with("KIND           NAME"), "{table}");
        assert!(table.contains("pool n1 gen 1, "), "{table}");
        assert_eq!(
            list(&objects)["items"].as_array().unwrap().len(),
            objects.len()
        );
    }

    #[test]
    fn domain_labels_are_one_node_patch_after_the_slices() {
        use topoalign_mig::NodeClique;
        let facts = NodeFacts {
            clique: Some((
                NodeClique::One {
                    clique: "uuid.7".into(),
                },
                "q.txt".into(),
            )),
            operator: Some((
                BTreeMap::from([("fabric.topograph.run/tier-0".into(), "leaf-7".into())]),
                "d.yaml".into(),
            )),
            ..NodeFacts::default()
        };
        let (patch, labels) = domain_labels("n1", &facts);
        let patch = patch.unwrap();
        assert_eq!(labels.sources["nvidia.com/gpu.clique"], "nvidia-smi -q");
        let v = serde_json::to_value(&patch).unwrap();
        assert_eq!(
            v,
            serde_json::json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1",
                "labels": {"fabric.topograph.run/tier-0": "leaf-7", "nvidia.com/gpu.clique": "uuid.7"}}})
        );
        let topo = topoalign_profiles::get("dgx-h100").unwrap();
        let mut all = objects(&topo, "n1", &PublishOptions::default(), None).unwrap();
        all.push(patch);
        let t = table(&all);
        let last = t.lines().last().unwrap();
        assert!(last.starts_with("Node "), "{t}");
        assert!(
            last.ends_with(
                "labels fabric.topograph.run/tier-0=leaf-7, nvidia.com/gpu.clique=uuid.7"
            ),
            "{last}"
        );
        // No fact that gives a label: no patch, and the note says why.
        let registering = NodeFacts {
            clique: Some((
                NodeClique::Registering {
                    gpus: vec!["0000:01:00.0".into()],
                },
                "q.txt".into(),
            )),
            ..NodeFacts::default()
        };
        let (patch, labels) = domain_labels("n1", &registering);
        assert!(patch.is_none());
        assert!(
            labels.notes[0].starts_with("no NVLink clique from q.txt"),
            "{:?}",
            labels.notes
        );
    }

    #[test]
    fn a_bad_node_name_is_refused() {
        let topo = topoalign_profiles::get("gb300-4").unwrap();
        let err = objects(&topo, "Node_1", &PublishOptions::default(), None).unwrap_err();
        assert!(err.to_string().contains("Node_1"), "{err}");
    }
}
