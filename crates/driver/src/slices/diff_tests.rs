#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;

use k8s_openapi::api::resource::v1::{
    Counter, CounterSet, Device, DeviceAttribute, DeviceCapacity, ResourcePool, ResourceSlice,
    ResourceSliceSpec,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};

use super::*;

fn device(name: &str, numa: i64, memory: &str) -> Device {
    Device {
        name: name.into(),
        attributes: Some(BTreeMap::from([(
            "numaNode".to_string(),
            DeviceAttribute {
                int: Some(numa),
                ..Default::default()
            },
        )])),
        capacity: Some(BTreeMap::from([(
            "memory".to_string(),
            DeviceCapacity {
                value: Quantity(memory.into()),
                request_policy: None,
            },
        )])),
        consumes_counters: Some(vec![]),
        ..Default::default()
    }
}

fn slice(
    name: &str,
    pool: &str,
    generation: i64,
    count: i64,
    devices: Vec<Device>,
) -> ResourceSlice {
    ResourceSlice {
        metadata: ObjectMeta {
            name: Some(name.into()),
            labels: Some(BTreeMap::from([(
                "app.kubernetes.io/managed-by".to_string(),
                "topoalign".to_string(),
            )])),
            ..Default::default()
        },
        spec: ResourceSliceSpec {
            driver: "gpu.topoalign.dev".into(),
            node_name: Some("n1".into()),
            pool: ResourcePool {
                name: pool.into(),
                generation,
                resource_slice_count: count,
            },
            devices: Some(devices),
            ..Default::default()
        },
    }
}

fn counters(name: &str, generation: i64, count: i64) -> ResourceSlice {
    let mut s = slice(name, "n1", generation, count, vec![]);
    s.spec.devices = None;
    s.spec.shared_counters = Some(vec![CounterSet {
        name: "gpus-0".into(),
        counters: BTreeMap::from([(
            "gpu-0".to_string(),
            Counter {
                value: Quantity("1".into()),
            },
        )]),
    }]);
    s
}

/// The desired pool: a counter slice and a device slice (generation 0: the controller's
/// input carries none).
fn desired() -> Vec<ResourceSlice> {
    vec![
        counters("n1-counters-0", 0, 2),
        slice(
            "n1-devices-0",
            "n1",
            0,
            2,
            vec![device("gpu-a", 0, "192Gi")],
        ),
    ]
}

/// The pool as the API server returns it at `generation`: empty lists dropped, the
/// quantity rewritten in another unit, a resourceVersion and a label of someone else.
fn served(generation: i64) -> Vec<ResourceSlice> {
    desired()
        .into_iter()
        .map(|mut s| {
            s.spec.pool.generation = generation;
            for d in s.spec.devices.iter_mut().flatten() {
                d.consumes_counters = None;
                for c in d.capacity.iter_mut().flat_map(|c| c.values_mut()) {
                    c.value = Quantity("196608Mi".into());
                }
            }
            s.metadata.resource_version = Some(format!("rv-{generation}"));
            s.metadata
                .labels
                .get_or_insert_default()
                .insert("team".into(), "infra".into());
            s
        })
        .collect()
}

fn names(slices: &[ResourceSlice]) -> Vec<&str> {
    slices
        .iter()
        .map(|s| s.metadata.name.as_deref().unwrap())
        .collect()
}

#[test]
fn first_publish_writes_generation_one() {
    let p = plan(&desired(), &[], &Memo::new(), 0);
    assert!(p.bumped);
    assert_eq!(p.generation, 1);
    assert_eq!(names(&p.apply), ["n1-counters-0", "n1-devices-0"]);
    assert!(p.apply.iter().all(|s| s.spec.pool.generation == 1));
    assert!(p.delete.is_empty() && p.delete_first.is_empty());
}

#[test]
fn unchanged_pool_is_a_noop_despite_server_normalisation() {
    let p = plan(&desired(), &served(4), &Memo::new(), 0);
    assert!(p.is_noop(), "{p:?}");
    assert!(!p.bumped);
    assert_eq!(p.generation, 4);
    assert!(p.reasons.is_empty());
}

#[test]
fn a_changed_device_bumps_above_everything_seen_and_written() {
    let mut want = desired();
    want[1].spec.devices = Some(vec![device("gpu-a", 1, "192Gi")]);
    let p = plan(&want, &served(4), &Memo::new(), 0);
    assert!(p.bumped);
    assert_eq!(p.generation, 5);
    assert_eq!(
        p.apply.len(),
        2,
        "every slice of the pool carries the new generation"
    );
    assert!(p.apply.iter().all(|s| s.spec.pool.generation == 5));
    assert!(
        p.reasons.iter().any(|r| r.contains("n1-devices-0")),
        "{:?}",
        p.reasons
    );

    // A generation this process wrote earlier is never reused.
    assert_eq!(plan(&want, &served(4), &Memo::new(), 9).generation, 10);
}

#[test]
fn a_changed_quantity_is_a_change() {
    let mut want = desired();
    want[1].spec.devices = Some(vec![device("gpu-a", 0, "96Gi")]);
    assert!(plan(&want, &served(2), &Memo::new(), 0).bumped);
}

#[test]
fn a_deleted_slice_is_repaired_with_a_new_generation() {
    let mut have = served(3);
    have.remove(0);
    let p = plan(&desired(), &have, &Memo::new(), 0);
    assert!(p.bumped);
    assert_eq!(p.generation, 4);
    assert_eq!(names(&p.apply), ["n1-counters-0", "n1-devices-0"]);
    assert!(p.reasons.iter().any(|r| r.contains("missing")));
}

#[test]
fn an_edited_slice_is_repaired() {
    let mut have = served(3);
    have[1]
        .spec
        .devices
        .as_mut()
        .unwrap()
        .push(device("intruder", 0, "1"));
    let p = plan(&desired(), &have, &Memo::new(), 0);
    assert!(p.bumped);
    assert_eq!(p.generation, 4);
}

#[test]
fn slices_that_disagree_on_the_generation_are_rewritten() {
    let mut have = served(3);
    have[0].spec.pool.generation = 2;
    let p = plan(&desired(), &have, &Memo::new(), 0);
    assert!(p.bumped);
    assert_eq!(p.generation, 4);
}

#[test]
fn stale_slices_are_deleted_after_the_applies() {
    // The pool shrank from three slices to two; the third still says generation 3.
    let mut have = served(3);
    have.push(slice(
        "n1-devices-1",
        "n1",
        3,
        3,
        vec![device("gpu-b", 0, "1")],
    ));
    let p = plan(&desired(), &have, &Memo::new(), 0);
    assert!(
        p.bumped,
        "the old third slice claims the current generation"
    );
    assert_eq!(p.generation, 4);
    assert_eq!(p.delete, ["n1-devices-1"]);

    // A leftover of an older generation is deleted without a bump.
    let mut have = served(3);
    have.push(slice("n1-devices-1", "n1", 1, 3, vec![]));
    let p = plan(&desired(), &have, &Memo::new(), 0);
    assert!(!p.bumped);
    assert!(p.apply.is_empty());
    assert_eq!(p.delete, ["n1-devices-1"]);
}

#[test]
fn a_slice_in_another_pool_is_deleted_first_and_recreated() {
    let mut have = served(2);
    have[1].spec.pool.name = "old-pool".into();
    let p = plan(&desired(), &have, &Memo::new(), 0);
    assert_eq!(p.delete_first, ["n1-devices-0"]);
    assert!(p.bumped);
    assert_eq!(names(&p.apply), ["n1-counters-0", "n1-devices-0"]);
}

#[test]
fn metadata_only_changes_keep_the_generation() {
    let mut want = desired();
    for s in &mut want {
        s.metadata.owner_references = Some(vec![OwnerReference {
            api_version: "v1".into(),
            kind: "Node".into(),
            name: "n1".into(),
            uid: "u-1".into(),
            controller: Some(true),
            ..Default::default()
        }]);
    }
    let p = plan(&want, &served(6), &Memo::new(), 0);
    assert!(!p.bumped);
    assert_eq!(p.generation, 6);
    assert_eq!(p.apply.len(), 2);
    assert!(p.apply.iter().all(|s| s.spec.pool.generation == 6));
}

#[test]
fn a_remembered_write_is_trusted_whatever_the_server_normalised() {
    // The server answers with something the comparison cannot see through (here an
    // attribute it added); the memo of our own write keeps that from looping.
    let mut have = served(2);
    have[1].spec.devices.as_mut().unwrap()[0]
        .attributes
        .as_mut()
        .unwrap()
        .insert(
            "added".into(),
            DeviceAttribute {
                bool: Some(true),
                ..Default::default()
            },
        );
    let want = desired();
    let mut memo = Memo::new();
    for (d, e) in want.iter().zip(&have) {
        memo.insert(
            d.metadata.name.clone().unwrap(),
            Written {
                resource_version: e.metadata.resource_version.clone().unwrap(),
                fingerprint: fingerprint(d),
            },
        );
    }
    assert!(plan(&want, &have, &memo, 2).is_noop());

    // Another writer's edit changes the resourceVersion: the memo no longer vouches.
    have[1].metadata.resource_version = Some("rv-other".into());
    assert!(plan(&want, &have, &memo, 2).bumped);
}

#[test]
fn an_emptied_node_deletes_everything_without_a_bump() {
    let p = plan(&[], &served(3), &Memo::new(), 3);
    assert!(p.apply.is_empty());
    assert_eq!(p.delete, ["n1-counters-0", "n1-devices-0"]);
}

#[test]
fn normalisation_keeps_what_matters() {
    let a = desired();
    let mut b = desired();
    b[1].spec.devices.as_mut().unwrap()[0].name = "gpu-b".into();
    assert_ne!(normalized_spec(&a[1].spec), normalized_spec(&b[1].spec));
    assert_eq!(canonical_quantity("1Gi"), canonical_quantity("1024Mi"));
    assert_ne!(canonical_quantity("1G"), canonical_quantity("1Gi"));
    assert_eq!(canonical_quantity("not a quantity"), "not a quantity");
}
