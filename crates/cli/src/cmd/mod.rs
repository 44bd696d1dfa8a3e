//! One module per subcommand: its arguments and its `run`.

pub(crate) mod agent;
pub(crate) mod claims;
pub(crate) mod demo;
pub(crate) mod discover;
pub(crate) mod draw;
pub(crate) mod driver;
pub(crate) mod explain;
pub(crate) mod extender;
pub(crate) mod gang;
pub(crate) mod kubelet_config;
pub(crate) mod lint;
pub(crate) mod matrix;
pub(crate) mod mig;
pub(crate) mod plan;
pub(crate) mod profile;
pub(crate) mod rails;
pub(crate) mod simulate;
pub(crate) mod tm;
pub(crate) mod verify;
pub(crate) mod vm;
pub(crate) mod webhook;
