//! The integration tests of this crate, one binary (one link step) for all of them.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod amd_fixtures;
mod common;
mod fuzz_parsers;
mod malformed;
mod nccl_constructs;
mod neighbours;
mod nvidia_proc;
mod nvidia_smi_tool;
mod parsers;
mod parsers_amd_nccl;
mod parsers_props;
mod paste_tolerance;
mod real_topo;
mod roundtrip;
