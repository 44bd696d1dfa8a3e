#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Discovery and classification speed on the largest built-in profile.
//!
//! (a) `sysfs::discover` over the profile's sysfs tree (written once to a temp dir);
//! (b) classifying every pair: `PairMatrix::build` with VFs, and the raw GPU×NIC table.
//!
//! Peer measured in the same run: `raw_tree_read`, a plain recursive walk of the same tree
//! that reads every file and every link once, with no parsing. The ratio
//! `sysfs_discover / raw_tree_read` is the walker's overhead over touching the tree at all.

use std::hint::black_box;
use std::path::Path;

use criterion::{Criterion, criterion_group, criterion_main};
use topoalign_discover::sysfs::discover;
use topoalign_discover::write_tree;
use topoalign_profiles::{self as profiles, NAMES as PROFILE_NAMES};
use topoalign_topology::MatrixOptions;
use topoalign_topology::{PairMatrix, Topology};

/// The profile with the most PCI functions.
fn largest() -> Topology {
    PROFILE_NAMES
        .iter()
        .filter_map(|n| profiles::get(n))
        .max_by_key(|t| t.pci.len())
        .unwrap()
}

/// Reads every regular file and every symlink target under `dir` (without following
/// links), returning the bytes seen so the work cannot be optimised away.
fn raw_tree_read(dir: &Path) -> usize {
    let mut total = 0;
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).unwrap() {
            let entry = entry.unwrap();
            let ty = entry.file_type().unwrap();
            let path = entry.path();
            if ty.is_symlink() {
                total += std::fs::read_link(&path).unwrap().as_os_str().len();
            } else if ty.is_dir() {
                stack.push(path);
            } else {
                total += std::fs::read(&path).unwrap().len();
            }
        }
    }
    total
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
    c.bench_function(&format!("raw_tree_read/{name}"), |b| {
        b.iter(|| black_box(raw_tree_read(black_box(&root))))
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
