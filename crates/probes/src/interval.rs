//! The processes' interval flags (`--rescan-interval` of the driver and the agent): one
//! parser, one set of refusals.

use std::time::Duration;

/// A duration flag that is not one.
#[derive(Debug, thiserror::Error)]
pub enum IntervalError {
    /// Not a duration at all.
    #[error("{text:?} is not a duration (expected e.g. 60s, 5m, 500ms): {why}")]
    NotADuration {
        /// The text given.
        text: String,
        /// The parser's reason.
        why: jiff::Error,
    },
    /// Below zero.
    #[error("{0:?} is negative")]
    Negative(String),
    /// Under the 100 ms floor.
    #[error("{0:?} is too short (at least 100ms)")]
    TooShort(String),
}

/// Reads a duration flag: `60s`, `5m`, `1h 30m`, `500ms`, `PT1M`, or a bare number of
/// seconds (`60`); at least 100 ms. The one parser of the processes' interval flags.
pub fn parse_interval(text: &str) -> Result<Duration, IntervalError> {
    if let Ok(secs) = text.trim().parse::<u64>() {
        let d = Duration::from_secs(secs);
        return if d < Duration::from_millis(100) {
            Err(IntervalError::TooShort(text.to_string()))
        } else {
            Ok(d)
        };
    }
    let d: jiff::SignedDuration = text.parse().map_err(|why| IntervalError::NotADuration {
        text: text.to_string(),
        why,
    })?;
    let d = Duration::try_from(d).map_err(|_| IntervalError::Negative(text.to_string()))?;
    if d < Duration::from_millis(100) {
        return Err(IntervalError::TooShort(text.to_string()));
    }
    Ok(d)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn intervals_in_every_spelling_and_the_refusals_say_why() {
        assert_eq!(parse_interval("60s").unwrap(), Duration::from_secs(60));
        assert_eq!(parse_interval("1h 30m").unwrap(), Duration::from_secs(5400));
        assert_eq!(parse_interval("PT1M").unwrap(), Duration::from_secs(60));
        assert_eq!(parse_interval("500ms").unwrap(), Duration::from_millis(500));
        assert_eq!(
            parse_interval("60").unwrap(),
            Duration::from_secs(60),
            "bare seconds"
        );
        assert_eq!(
            parse_interval("0").unwrap_err().to_string(),
            "\"0\" is too short (at least 100ms)"
        );
        let e = parse_interval("soon").unwrap_err().to_string();
        assert!(
            e.starts_with("\"soon\" is not a duration (expected e.g. 60s"),
            "{e}"
        );
        assert_eq!(
            parse_interval("-5s").unwrap_err().to_string(),
            "\"-5s\" is negative"
        );
        assert_eq!(
            parse_interval("50ms").unwrap_err().to_string(),
            "\"50ms\" is too short (at least 100ms)"
        );
    }
}
