//! The log settings of topoalign's long-running processes and the one log subscriber
//! (stderr): JSON lines (one object per event: `timestamp`, `level`, `fields`, `target`,
//! `span`) or human text, filtered by `TOPOALIGN_LOG`. The processes themselves only
//! emit `tracing` events; the binary installs the subscriber once its arguments are known.

/// The environment variable with the log filter (`tracing_subscriber::EnvFilter` syntax).
pub(crate) const FILTER_ENV: &str = "TOPOALIGN_LOG";

/// The filter of one-shot commands (not a long-running process): warnings and errors.
pub const COMMAND_FILTER: &str = "warn";

/// How log lines look (`--log-format`; JSON by default in every process).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
pub enum LogFormat {
    /// One JSON object per line.
    #[default]
    Json,
    /// Human-readable text.
    Text,
}

/// Installs the one log subscriber of a one-shot command: text on stderr, coloured only
/// on a terminal, filtered by `TOPOALIGN_LOG` (else [`COMMAND_FILTER`]). A long-running
/// process installs its own from its flags (`ProcessArgs::install_logging`).
pub fn install_command_logging() {
    install(None, None, COMMAND_FILTER);
}

/// Installs the one log subscriber on stderr, filtered by `filter` (else `FILTER_ENV`,
/// else `default_filter`): lines as `format` asks, or, with no format (a one-shot
/// command), text coloured only on a terminal. Does nothing when a subscriber is already
/// installed.
pub(crate) fn install(format: Option<LogFormat>, filter: Option<&str>, default_filter: &str) {
    let filter = match filter {
        Some(f) => tracing_subscriber::EnvFilter::new(f),
        None => tracing_subscriber::EnvFilter::try_from_env(FILTER_ENV)
            .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default_filter)),
    };
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
