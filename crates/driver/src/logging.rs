//! The driver's logs: JSON lines (one object per event: `timestamp`, `level`, `fields`,
//! `target`, `span`) or human text, on stderr, filtered by `TOPOALIGN_LOG` (default
//! [`DEFAULT_FILTER`]).

use tracing::Dispatch;
use tracing_subscriber::EnvFilter;

/// How log lines look.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum LogFormat {
    /// One JSON object per line (for log collectors).
    #[default]
    Json,
    /// Human-readable text.
    Text,
}

/// The default filter: `info`, without kube-client's own error lines (every failed call
/// is logged by the driver with what it was doing).
pub const DEFAULT_FILTER: &str = "info,kube_client=off";

/// The filter from `TOPOALIGN_LOG`, or [`DEFAULT_FILTER`] when it is unset or unreadable.
fn filter() -> EnvFilter {
    EnvFilter::try_from_env("TOPOALIGN_LOG").unwrap_or_else(|_| EnvFilter::new(DEFAULT_FILTER))
}

/// A tracing dispatcher writing `format` lines to stderr. The driver installs it for
/// every thread of its runtime (the CLI has already installed its own global one).
pub fn dispatch(format: LogFormat) -> Dispatch {
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter())
        .with_writer(std::io::stderr);
    match format {
        LogFormat::Json => Dispatch::new(
            builder
                .json()
                .flatten_event(false)
                .with_current_span(false)
                .finish(),
        ),
        LogFormat::Text => Dispatch::new(builder.with_ansi(false).finish()),
    }
}
