//! One module per subcommand: its arguments and its `run`.

pub mod demo;
pub mod discover;
pub mod draw;
pub mod kubelet_config;
pub mod lint;
pub mod matrix;
pub mod plan;
pub mod profile;
pub mod simulate;
pub mod tm;
pub mod verify;
