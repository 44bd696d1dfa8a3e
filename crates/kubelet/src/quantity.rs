//! CPU quantities as Kubernetes writes them (`637m`, `1`, `0.5`, `2k`).

use serde_json::Value;

/// Parses a CPU quantity into millicores; `None` when it is not a valid quantity.
///
/// Accepts a decimal number (optionally signed, with a fraction) followed by nothing, the
/// `m` suffix (milli), or a decimal SI suffix `k`, `M`, `G`; JSON/YAML numbers too.
pub fn cpu_millis(v: &Value) -> Option<i64> {
    match v {
        Value::Number(n) => n
            .as_i64()
            .and_then(|i| i.checked_mul(1000))
            .or_else(|| n.as_f64().map(|f| (f * 1000.0).ceil() as i64)),
        Value::String(s) => parse_cpu_millis(s),
        _ => None,
    }
}

/// Parses a CPU quantity string into millicores (rounded up, as Kubernetes does).
pub fn parse_cpu_millis(text: &str) -> Option<i64> {
    let s = text.trim();
    let (number, scale_millis): (&str, f64) = if let Some(n) = s.strip_suffix('m') {
        (n, 1.0)
    } else if let Some(n) = s.strip_suffix('k') {
        (n, 1_000_000.0)
    } else if let Some(n) = s.strip_suffix('M') {
        (n, 1_000_000_000.0)
    } else if let Some(n) = s.strip_suffix('G') {
        (n, 1_000_000_000_000.0)
    } else {
        (s, 1000.0)
    };
    let digits = number.strip_prefix(['+', '-']).unwrap_or(number);
    let valid = !digits.is_empty()
        && digits.chars().all(|c| c.is_ascii_digit() || c == '.')
        && digits.chars().filter(|&c| c == '.').count() <= 1
        && digits != ".";
    if !valid {
        return None;
    }
    let value: f64 = number.parse().ok()?;
    Some((value * scale_millis).ceil() as i64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn parses_common_forms() {
        assert_eq!(parse_cpu_millis("637m"), Some(637));
        assert_eq!(parse_cpu_millis("1"), Some(1000));
        assert_eq!(parse_cpu_millis("0.5"), Some(500));
        assert_eq!(parse_cpu_millis("0"), Some(0));
        assert_eq!(parse_cpu_millis("0m"), Some(0));
        assert_eq!(parse_cpu_millis("2k"), Some(2_000_000));
        assert_eq!(cpu_millis(&json!(2)), Some(2000));
        assert_eq!(cpu_millis(&json!(0.25)), Some(250));
    }

    #[test]
    fn rejects_garbage() {
        for bad in ["", "m", "abc", "1.2.3", "1x", ".", "1Gi"] {
            assert_eq!(parse_cpu_millis(bad), None, "{bad}");
        }
        assert_eq!(cpu_millis(&json!(true)), None);
    }
}
