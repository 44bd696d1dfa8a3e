//! The integration tests of this crate, one binary (one link step) for all of them.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
mod crash;
mod grpc;
mod kubelet_authority;
mod mig_cdi;
mod mig_dynamic;
mod overlap;
mod vendor_cdi;
