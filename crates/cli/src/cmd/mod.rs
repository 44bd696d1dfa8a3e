//! One module per subcommand: its arguments and its `run`.

pub mod agent;
pub mod claims;
pub mod demo;
pub mod discover;
pub mod draw;
pub mod driver;
pub mod explain;
pub mod extender;
pub mod gang;
pub mod kubelet_config;
pub mod lint;
pub mod matrix;
pub mod mig;
pub mod plan;
pub mod profile;
pub mod simulate;
pub mod tm;
pub mod verify;
pub mod vm;
