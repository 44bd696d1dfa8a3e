//! The node agent's log settings. The `topoalign` binary installs the one log subscriber
//! (stderr) with these: JSON lines (one object per event: `timestamp`, `level`, `fields`,
//! `target`, `span`) or human text, filtered by `TOPOALIGN_LOG` (default
//! [`DEFAULT_FILTER`]). The driver itself only emits `tracing` events.

/// How log lines look (`--log-format`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
pub enum LogFormat {
    /// One JSON object per line.
    #[default]
    Json,
    /// Human-readable text.
    Text,
}

/// The default filter: `info`, without kube-client's own error lines (every failed call
/// is logged by the driver with what it was doing).
pub const DEFAULT_FILTER: &str = "info,kube_client=off";
