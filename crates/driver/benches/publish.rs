//! Publishing speed on the largest built-in profile (dgx-h100: 53 devices):
//! * `desired_slices`: the node's ResourceSlices computed from the topology (what every
//!   publishing round starts with), against the peer `serde_json_encode`, the JSON
//!   encoding of the same slices that kube-rs must do anyway to send them;
//! * `dry_run_objects`: DeviceClasses + slices, as `--dry-run` prints them;
//! * `plan_steady` / `plan_steady_memo`: the diff of a resync that finds the pool in
//!   sync (server-normalised copy; with and without the memo of our own writes), and
//!   `plan_changed`: one that finds a device changed.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use topoalign_dra::publish::PublishOptions;
use topoalign_driver::dry_run;
use topoalign_driver::{Memo, Written, fingerprint, sync_plan};

const PROFILE: &str = "dgx-h100";
const NODE: &str = "gpu-node-001";

fn bench(c: &mut Criterion) {
    let topo = topoalign_profiles::get(PROFILE).unwrap();
    let opts = PublishOptions::default();
    let mut desired = topoalign_dra::publish::resource_slices(&topo, NODE, &opts).unwrap();
    for s in &mut desired {
        s.spec.pool.generation = 0;
    }
    // The pool as the API server returns it: generation 3, a resourceVersion, GPU
    // memory rewritten in another unit.
    let served: Vec<_> = desired
        .iter()
        .enumerate()
        .map(|(i, s)| {
            let mut s = s.clone();
            s.spec.pool.generation = 3;
            s.metadata.resource_version = Some(format!("{}", 1000 + i));
            for d in s.spec.devices.iter_mut().flatten() {
                for cap in d.capacity.iter_mut().flat_map(|c| c.values_mut()) {
                    if let Some(mi) = cap.value.0.strip_suffix("Mi") {
                        let mi: u64 = mi.parse().unwrap();
                        if mi.is_multiple_of(1024) {
                            cap.value = Quantity(format!("{}Gi", mi / 1024));
                        }
                    }
                }
            }
            s
        })
        .collect();
    let memo: Memo = desired
        .iter()
        .zip(&served)
        .map(|(d, e)| {
            (
                d.metadata.name.clone().unwrap(),
                Written {
                    resource_version: e.metadata.resource_version.clone().unwrap(),
                    fingerprint: fingerprint(d),
                },
            )
        })
        .collect();
    assert!(sync_plan(&desired, &served, &Memo::new(), 0).is_noop());
    let mut changed = desired.clone();
    let last = changed.last_mut().unwrap();
    last.spec.devices.as_mut().unwrap().pop();
    assert!(sync_plan(&changed, &served, &Memo::new(), 0).bumped);

    let mut g = c.benchmark_group(format!("publish/{PROFILE}"));
    g.bench_function("desired_slices", |b| {
        b.iter(|| topoalign_dra::publish::resource_slices(black_box(&topo), NODE, &opts).unwrap())
    });
    g.bench_function("serde_json_encode", |b| {
        b.iter(|| serde_json::to_vec(black_box(&desired)).unwrap())
    });
    g.bench_function("dry_run_objects", |b| {
        b.iter(|| dry_run::objects(black_box(&topo), NODE, &opts, None).unwrap())
    });
    g.bench_function("plan_steady", |b| {
        b.iter(|| sync_plan(black_box(&desired), black_box(&served), &Memo::new(), 0))
    });
    g.bench_function("plan_steady_memo", |b| {
        b.iter(|| sync_plan(black_box(&desired), black_box(&served), &memo, 3))
    });
    g.bench_function("plan_changed", |b| {
        b.iter(|| sync_plan(black_box(&changed), black_box(&served), &Memo::new(), 0))
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
