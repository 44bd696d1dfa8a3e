//! The log settings of topoalign's long-running processes and the one log subscriber
//! (stderr): JSON lines (one object per event: `timestamp`, `level`, `fields`, `target`,
//! `span`) or human text, filtered by `TOPOALIGN_LOG`. The processes themselves only
//! emit `tracing` events; the binary installs the subscriber once its arguments are known.

/// The environment variable with the log filter (`tracing_subscriber::EnvFilter` syntax).
pub(crate) const FILTER_ENV: &str = "TOPOALIGN_LOG";

/// The driver's default filter: `info`, without kube-client's own error lines (every
/// failed call is logged by the driver with what it was doing).
pub const DEFAULT_FILTER: &str = "info,kube_client=off";

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

/// Installs the one log subscriber on stderr, filtered by `FILTER_ENV` (else
/// `default_filter`): lines as `format` asks, or, with no format (a one-shot command),
/// text coloured only on a terminal. Does nothing when a subscriber is already installed.
pub fn install(format: Option<LogFormat>, default_filter: &str) {
    let filter = tracing_subscriber::EnvFilter::try_from_env(FILTER_ENV)
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default_filter));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    // Fails only when a subscriber is already installed.
    let _ = match format {
        Some(LogFormat::Json) => builder
            .json()
            .flatten_event(false)
            .with_current_span(false)
            .try_init(),
        Some(LogFormat::Text) => builder.with_ansi(false).try_init(),
        // Colour only on a terminal: redirected logs keep no escape codes.
        None => builder
            .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
            .try_init(),
    };
}
