//! The gang's claim on published slices, through the DRA model's allocator (the stock
//! allocator's search): every pod gets one pair per rail of the job's set, at the class
//! asked, and a node whose free GPUs have no pair on those rails is refused.

use std::collections::BTreeSet;

use k8s_openapi::api::resource::v1::ResourceSlice;
use topoalign_dra::{
    alloc::{DeviceId, NodeDevices, first_fit},
    publish::{Inventory, device_classes, slices_for},
};
use topoalign_fabric::{nic_rails, parse_rail_source};
use topoalign_gang::{gang_claim_template, parse_job};
use topoalign_profiles as profiles;

use crate::{JOB, job_with};

const BUDGET: u64 = 2_000_000;

fn slices(profile: &str, rails: Option<&str>) -> (Inventory, Vec<ResourceSlice>) {
    let topo = profiles::get(profile).unwrap();
    let mut inv = Inventory::from_topology(&topo);
    if let Some(text) = rails {
        let r = nic_rails(&topo, &parse_rail_source(text, "rails.yaml").unwrap()).unwrap();
        inv.set_rails(|b| r.rail_of(b));
    }
    let s = slices_for(&inv, "n1", 1).unwrap();
    (inv, s)
}

fn claim(job: &str) -> k8s_openapi::api::resource::v1::ResourceClaimSpec {
    let t = gang_claim_template(&parse_job(job, "job.yaml").unwrap()).unwrap();
    t.spec.unwrap().spec.unwrap()
}

/// The rails of the pairs the allocator picks, or `None` when it finds none.
fn picked_rails(inv: &Inventory, free: &NodeDevices, job: &str) -> Option<Vec<u32>> {
    let out = first_fit(&claim(job), &device_classes(), free, BUDGET).unwrap();
    assert!(!out.gave_up);
    let alloc = out.allocation?;
    Some(
        alloc
            .iter()
            .map(|a| {
                let d = inv.device(&a.device).unwrap();
                d.nic().unwrap().rail.unwrap()
            })
            .collect(),
    )
}

#[test]
fn every_pod_gets_one_pair_on_each_rail_of_the_set() {
    for profile in ["dgx-h100", "mi300x-8"] {
        let (inv, s) = slices(profile, Some("rule: nearest-gpu\n"));
        let free = NodeDevices::gather(&s, "n1").unwrap();
        let mut rails = picked_rails(&inv, &free, JOB).unwrap();
        rails.sort();
        assert_eq!(rails, [4, 5, 6, 7], "{profile}");
        // The pairs are at PXB or better: here each GPU's own NIC, PIX.
        let out = first_fit(&claim(JOB), &device_classes(), &free, BUDGET).unwrap();
        for a in out.allocation.unwrap() {
            let d = inv.device(&a.device).unwrap();
            let topoalign_dra::DeviceRef::Pair { pair, .. } = d else {
                panic!("{d:?}")
            };
            assert!(
                pair.path.class.rank() <= 1,
                "{profile}: {:?}",
                pair.path.class
            );
        }
    }
}

#[test]
fn a_node_whose_free_gpus_are_off_the_rails_is_refused() {
    let (inv, s) = slices("dgx-h100", Some("rule: nearest-gpu\n"));
    let mut free = NodeDevices::gather(&s, "n1").unwrap();
    // GPUs 4..7 (rails 4..7) in use: four GPUs are free, but not on the job's rails.
    let used: BTreeSet<DeviceId> = free
        .ids()
        .filter(|id| {
            inv.device(&id.device)
                .and_then(|d| d.gpu())
                .is_some_and(|g| g.index >= 4)
        })
        .cloned()
        .collect();
    free.mark_in_use(&used);
    assert_eq!(picked_rails(&inv, &free, JOB), None);
    // The same free GPUs serve a job on rails 0..3.
    let low = job_with("rails: [4, 5, 6, 7]", "rails: [0, 1, 2, 3]");
    let mut rails = picked_rails(&inv, &free, &low).unwrap();
    rails.sort();
    assert_eq!(rails, [0, 1, 2, 3]);
    // Without pinned rails the claim takes the free GPUs (rails 0..3): what a gang with
    // pods on rails 4..7 elsewhere would then mix.
    let any = job_with("rails: [4, 5, 6, 7]\n", "sameRails: false\n");
    assert_eq!(picked_rails(&inv, &free, &any).map(|r| r.len()), Some(4));
}

#[test]
fn a_node_without_a_rail_source_publishes_no_rail_and_serves_no_pinned_claim() {
    let (inv, plain) = slices("dgx-h100", None);
    let text = serde_json::to_string(&plain).unwrap();
    assert!(
        !text.contains("\"rail\""),
        "no rail attribute without a rail source"
    );
    let free = NodeDevices::gather(&plain, "n1").unwrap();
    // Refused, not an error: the selector tests that the attribute exists first.
    assert_eq!(picked_rails(&inv, &free, JOB), None);
    // With rails, the only change to the slices is the rail attribute.
    let (_, railed) = slices("dgx-h100", Some("rule: nearest-gpu\n"));
    let mut stripped = serde_json::to_value(&railed).unwrap();
    strip_rails(&mut stripped);
    assert_eq!(stripped, serde_json::to_value(&plain).unwrap());
}

fn strip_rails(v: &mut serde_json::Value) {
    match v {
        serde_json::Value::Object(m) => {
            m.remove("rail");
            m.values_mut().for_each(strip_rails);
        }
        serde_json::Value::Array(a) => a.iter_mut().for_each(strip_rails),
        _ => {}
    }
}
