//! The integration tests of this crate, one binary (one link step) for all of them.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod agent;
mod agent_extender;
mod claims;
mod common;
mod dashboard;
mod demo;
mod discover;
mod draw;
mod driver;
mod examples;
mod extender;
mod gang_rails;
mod kubelet_config;
mod lint;
mod matrix;
mod mig;
mod mig_view;
mod plan;
mod profile;
mod rails;
mod simulate;
mod tm;
mod verify;
mod vm;
mod webhook;
