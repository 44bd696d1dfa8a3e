//! UTC timestamps for backup names (`jiff`).

use std::time::SystemTime;

/// Formats a time as `YYYYMMDDTHHMMSS.mmmZ` (UTC, sortable as text). Times before 1970
/// (a clock that is badly wrong) are written as the epoch.
pub(crate) fn format_utc(t: SystemTime) -> String {
    let ts = jiff::Timestamp::try_from(t)
        .ok()
        .filter(|ts| ts.as_second() >= 0)
        .unwrap_or(jiff::Timestamp::UNIX_EPOCH);
    format!(
        "{}.{:03}Z",
        ts.strftime("%Y%m%dT%H%M%S"),
        ts.subsec_millisecond()
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, UNIX_EPOCH};

    #[test]
    fn known_dates() {
        let at = |s: u64, ms: u64| format_utc(UNIX_EPOCH + Duration::from_millis(s * 1000 + ms));
        assert_eq!(at(0, 0), "19700101T000000.000Z");
        assert_eq!(at(951_782_400, 5), "20000229T000000.005Z"); // leap day
        assert_eq!(at(1_735_689_599, 999), "20241231T235959.999Z");
        assert_eq!(at(1_750_000_000, 0), "20250615T150640.000Z");
        assert_eq!(
            format_utc(UNIX_EPOCH - Duration::from_secs(5)),
            "19700101T000000.000Z"
        );
    }
}
