//! The kubelet configuration files the tests edit, shared by this crate's tests and the
//! `topoalign kubelet-config` CLI tests (which include this file by path).
// Each including test file uses only some of the helpers.
#![allow(dead_code)]

use std::path::{Path, PathBuf};

/// `crates/kubelet/tests/<rel>` (e.g. `fixtures/kubeadm-config.yaml`,
/// `golden/oke-kubelet-config.seed000.json`). The path goes through `..` so that it is
/// right from every crate beside this one under `crates/`.
pub(crate) fn fixture(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../kubelet/tests")
        .join(rel)
}

/// Copies `fixtures/<name>` into a fresh temporary directory; returns the directory
/// (removed when dropped) and the copy's path.
pub(crate) fn staged(name: &str) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(name);
    std::fs::copy(fixture(&format!("fixtures/{name}")), &path).unwrap();
    (dir, path)
}
