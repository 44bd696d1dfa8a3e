//! The oracle of `simulate --mig`'s search: on one dynamic-MIG node, the placements
//! its own backtracking gives a pod are those the one model of the stock DRA allocator
//! (`topoalign_dra::alloc::first_fit`) gives the same pod's claim, over the ResourceSlices
//! `topoalign driver --mig-dynamic` publishes for the node, with the instances already
//! placed held by other claims.
//!
//! Only topoalign's order is published by the driver, so only [`MigPlacer::Topoalign`]
//! has an oracle (the stock order differs only in the starts it walks), and `1g+me`,
//! which the driver does not publish, is left out of the pods.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::resource::v1::{DeviceClaim, DeviceClass, ResourceClaimSpec};
use topoalign_dra::{
    DRIVER_NAME,
    alloc::{DeviceId, NodeDevices, first_fit},
    claim::{MigClaimSpec, mig_claim_spec},
    publish::{Inventory, NodeMig, PublishOptions, slices_for},
};
use topoalign_mig::{Model, SHAPES, Shape};
use topoalign_rng::Rng;

use crate::mig_sim::{PlacedInstance, place_on_node};
use crate::mig_spec::MigPlacer;

const NODE: &str = "mig-node";
/// Large enough that neither search is ever cut: a cut answer has no oracle.
const BUDGET: u64 = 50_000_000;

/// The node the driver publishes: dgx-h100 (8× H100 80GB) with every GPU in dynamic MIG.
struct Published {
    model: &'static Model,
    gpus: usize,
    devices: NodeDevices,
    classes: Vec<DeviceClass>,
    /// (GPU index, shape, start) → device name, and back.
    by_place: BTreeMap<(usize, Shape, u8), String>,
    by_name: BTreeMap<String, (usize, Shape, u8)>,
}

fn published() -> Published {
    let topo = topoalign_profiles::get("dgx-h100").unwrap();
    let model = topoalign_mig::lookup("h100-80gb").unwrap();
    let options = PublishOptions {
        mig: NodeMig::dynamic(&topo, None).unwrap(),
        ..PublishOptions::default()
    };
    let inventory = Inventory::new(&topo, &options);
    let slices = slices_for(&inventory, NODE, 1).unwrap();
    let devices = NodeDevices::gather(&slices, NODE).unwrap();
    let mut by_place = BTreeMap::new();
    let mut by_name = BTreeMap::new();
    for m in &inventory.migs {
        let shape = model.shape(&m.instance.profile).unwrap();
        let place = (m.gpu, shape, m.instance.start);
        by_place.insert(place, m.name.clone());
        by_name.insert(m.name.clone(), place);
    }
    Published {
        model,
        gpus: inventory.gpus.len(),
        devices,
        classes: topoalign_dra::publish::device_classes()
            .into_iter()
            .chain(topoalign_dra::publish::mig_device_classes())
            .collect(),
        by_place,
        by_name,
    }
}

impl Published {
    /// A pod's claim: one request per instance, in the pod's order.
    fn claim(&self, shapes: &[Shape]) -> ResourceClaimSpec {
        let mut requests = Vec::new();
        for (k, &shape) in shapes.iter().enumerate() {
            let spec = mig_claim_spec(&MigClaimSpec {
                profile: self.model.profile_name(shape).to_string(),
                count: 1,
                with_nic: false,
                max_rank: None,
            })
            .unwrap();
            let mut r = spec.devices.unwrap().requests.unwrap().remove(0);
            r.name = format!("mig-{k}");
            requests.push(r);
        }
        ResourceClaimSpec {
            devices: Some(DeviceClaim {
                requests: Some(requests),
                constraints: None,
                config: None,
            }),
        }
    }

    /// What the allocator model gives `shapes` with `held` taken by other claims.
    fn allocate(&self, held: &[PlacedInstance], shapes: &[Shape]) -> Option<Vec<PlacedInstance>> {
        let ids: BTreeSet<DeviceId> = held
            .iter()
            .map(|p| DeviceId {
                driver: DRIVER_NAME.to_string(),
                pool: NODE.to_string(),
                device: self.by_place[&(p.gpu, p.shape, p.start)].clone(),
            })
            .collect();
        let mut node = self.devices.clone();
        node.mark_in_use(&ids);
        let out = first_fit(&self.claim(shapes), &self.classes, &node, BUDGET).unwrap();
        assert!(!out.gave_up, "the allocator model's budget cut the search");
        out.allocation.map(|devices| {
            devices
                .iter()
                .map(|d| {
                    let (gpu, shape, start) = self.by_name[&d.device];
                    PlacedInstance { gpu, shape, start }
                })
                .collect()
        })
    }
}

/// A pod of one to three instances, `1g+me` left out.
fn pod(rng: &mut Rng) -> Vec<Shape> {
    let shapes: Vec<Shape> = SHAPES.into_iter().filter(|s| *s != Shape::OneMe).collect();
    (0..=rng.below(3))
        .map(|_| shapes[rng.below(shapes.len())])
        .collect()
}

#[test]
fn the_simulators_search_is_the_allocator_models_on_the_published_slices() {
    let node = published();
    let (mut placed, mut refused) = (0, 0);
    for seed in 1..=4 {
        let mut rng = Rng::derive(seed, "mig-oracle");
        let mut held: Vec<Vec<PlacedInstance>> = Vec::new();
        for _ in 0..120 {
            // Some pods leave, so the node is seen fragmented, not only filling up.
            if !held.is_empty() && rng.below(3) == 0 {
                let i = rng.below(held.len());
                held.swap_remove(i);
            }
            let shapes = pod(&mut rng);
            let now: Vec<PlacedInstance> = held.iter().flatten().copied().collect();
            let (sim, cut) = place_on_node(MigPlacer::Topoalign, node.gpus, &now, &shapes, BUDGET);
            assert!(!cut, "the simulator's budget cut the search");
            let model = node.allocate(&now, &shapes);
            assert_eq!(
                sim, model,
                "seed {seed}: pod {shapes:?} on a node holding {now:?}"
            );
            match sim {
                Some(v) => {
                    placed += 1;
                    held.push(v);
                }
                None => refused += 1,
            }
        }
    }
    // Both answers were asked of the oracle many times.
    assert!(
        placed > 100 && refused > 50,
        "placed {placed}, refused {refused}"
    );
}
