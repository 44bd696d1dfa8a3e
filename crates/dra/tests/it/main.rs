//! The integration tests of this crate, one binary (one link step) for all of them.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod cdi_vendor;
mod claims;
mod common;
mod cpus;
mod deploy;
mod limits;
mod mig;
mod mig_cdi;
mod mig_dynamic;
mod mig_pool;
mod prepare;
mod prepared;
mod roce;
mod slices;
mod vendor;
