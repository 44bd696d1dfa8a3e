//! The integration tests of this crate, one binary (one link step) for all of them.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod fuzz_merge_cases;
mod lean;
mod merge_props;
mod prepared;
mod seed_matrix;
mod simulate;
