//! Every object the driver would create for a node, for `topoalign driver --dry-run`:
//! the DeviceClasses it ships, then the node's ResourceSlices at generation 1, exactly as
//! the publisher computes them (without the owner reference to the Node, which needs a
//! cluster).

use k8s_openapi::api::resource::v1::{DeviceClass, ResourceSlice};
use serde::Serialize;
use topoalign_dra::PublishOptions;
use topoalign_topology::Topology;

use crate::error::DriverError;

/// One object the driver creates.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum DriverObject {
    /// A DeviceClass (cluster-wide; shipped with the driver).
    DeviceClass(DeviceClass),
    /// A ResourceSlice of the node's pool.
    ResourceSlice(ResourceSlice),
}

/// The DeviceClasses, then the node's ResourceSlices (pool generation 1).
pub fn objects(
    topo: &Topology,
    node_name: &str,
    options: &PublishOptions,
) -> Result<Vec<DriverObject>, DriverError> {
    let opts = PublishOptions {
        generation: 1,
        ..options.clone()
    };
    let slices = topoalign_dra::resource_slices(topo, node_name, &opts)?;
    Ok(topoalign_dra::device_classes()
        .into_iter()
        .map(DriverObject::DeviceClass)
        .chain(slices.into_iter().map(DriverObject::ResourceSlice))
        .collect())
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
            let objects = objects(&topo, "n1", &opts).unwrap();
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
    fn a_bad_node_name_is_refused() {
        let topo = topoalign_profiles::get("gb300-4").unwrap();
        let err = objects(&topo, "Node_1", &PublishOptions::default()).unwrap_err();
        assert!(err.to_string().contains("Node_1"), "{err}");
    }
}
