//! Helpers shared by the parser test files (each file is its own test crate and uses
//! what it needs).
#![allow(dead_code)]

use std::path::{Path, PathBuf};

use topoalign_topology::{PcieClass, Topology};

/// The path of `tests/fixtures/<name>`.
pub(crate) fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

/// Asserts the GPU–NIC classes of an 8-GPU, 8-NIC two-socket node where NIC `i` shares a
/// switch with GPU `i`: PIX on the diagonal, NODE within a socket (GPUs/NICs 0-3 and 4-7),
/// SYS across sockets.
pub(crate) fn assert_one_nic_per_gpu_two_sockets(t: &Topology) {
    let c = t.classifier();
    for g in 0..8 {
        for n in 0..8 {
            let want = if g == n {
                PcieClass::Pix
            } else if (g < 4) == (n < 4) {
                PcieClass::Node
            } else {
                PcieClass::Sys
            };
            assert_eq!(c.gpu_nic(g, n).class, want, "GPU{g} NIC{n}");
        }
    }
}
