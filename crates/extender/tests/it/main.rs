//! The integration tests of this crate, one binary (one link step) for all of them.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
mod cpu;
mod decide;
mod dra;
mod dra_kinds;
mod dra_rails;
mod judge_all;
mod kueue;
mod mig;
mod protocol;
mod replay;
mod responsive;
