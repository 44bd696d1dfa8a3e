#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Discovery and classification speed on the largest built-in profile.
//!
//! (a) `sysfs::discover` over the profile's sysfs tree (written once to a temp dir);
//! (b) classifying every pair: `PairMatrix::build` with VFs, and the raw GPU×NIC table.

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use topoalign_discover::sysfs::discover;
use topoalign_discover::sysfs_write::write_tree;
use topoalign_discover::{PROFILE_NAMES, profiles};
use topoalign_topology::matrix::MatrixOptions;
use topoalign_topology::{PairMatrix, Topology};

/// The profile with the most PCI functions.
fn largest() -> Topology {
    PROFILE_NAMES
        .iter()
        .filter_map(|n| profiles::get(n))
        .max_by_key(|t| t.pci.len())
        .unwrap()
}

fn benches(c: &mut Criterion) {
    let topo = largest();
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("root");
    write_tree(&topo, &root).unwrap();
    let name = topo.name.clone();

    c.bench_function(&format!("sysfs_discover/{name}"), |b| {
        b.iter(|| black_box(discover(black_box(&root)).unwrap()))
    });
    let opts = MatrixOptions {
        include_vfs: true,
        include_non_rdma: true,
    };
    c.bench_function(&format!("pair_matrix_with_vfs/{name}"), |b| {
        b.iter(|| black_box(PairMatrix::build(black_box(&topo), opts)))
    });
    c.bench_function(&format!("gpu_nic_table/{name}"), |b| {
        b.iter(|| black_box(black_box(&topo).classifier().gpu_nic_table()))
    });
}

criterion_group!(discovery, benches);
criterion_main!(discovery);
