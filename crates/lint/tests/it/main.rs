//! The integration tests of this crate, one binary (one link step) for all of them.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod cpus;
mod fixtures;
mod fuzz_manifests;
mod mig_nodes;
mod roce_and_nodes;
