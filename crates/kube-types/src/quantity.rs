//! Kubernetes resource quantities (`64Gi`, `500m`, `2`, `1e3`), parsed exactly as
//! `k8s.io/apimachinery/pkg/api/resource` (`ParseQuantity`) reads them, held in nano-units.

use std::fmt;
use std::str::FromStr;

use serde_json::Value;

/// A quantity in units of 10⁻⁹ (exact for every suffix, including `Ei`). Parsing never
/// gives a negative one (no request, limit or reservation can be negative).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Quantity {
    nanos: i128,
}

const NANO: i128 = 1_000_000_000;
const MICRO_NANOS: i128 = 1_000_000;

/// What a quantity looks like, for error messages.
const EXPECTED: &str = "expected e.g. 2, 500m, 64Gi, 1.5G";

impl Quantity {
    /// A whole number of units.
    pub fn from_units(v: i64) -> Self {
        Quantity {
            nanos: i128::from(v) * NANO,
        }
    }

    /// `Quantity.Value()`: rounded up to an integer.
    pub fn value(&self) -> i128 {
        ceil_div(self.nanos, NANO)
    }

    /// `Quantity.MilliValue()`: rounded up to thousandths.
    pub fn milli_value(&self) -> i128 {
        ceil_div(self.nanos, MICRO_NANOS)
    }

    /// Whether it is a whole number (what the static CPU manager requires).
    pub fn is_integer(&self) -> bool {
        self.nanos % NANO == 0
    }

    /// The amount as a count of whole units: `Some` for a non-negative whole number
    /// (`2`, `2000m`), `None` for a fraction or a negative amount.
    pub fn whole_units(&self) -> Option<u64> {
        if self.is_integer() {
            u64::try_from(self.value()).ok()
        } else {
            None
        }
    }

    /// Whether it is zero.
    pub fn is_zero(&self) -> bool {
        self.nanos == 0
    }

    /// Whether it is above zero (`Cmp(zero) == 1`).
    pub fn is_positive(&self) -> bool {
        self.nanos > 0
    }

    /// The sum of two quantities (saturating; parsed quantities never come near the bound).
    pub fn saturating_add(self, other: Quantity) -> Quantity {
        Quantity {
            nanos: self.nanos.saturating_add(other.nanos),
        }
    }

    /// Reads a quantity from a decoded JSON/YAML value: a string (`"500m"`) or a number
    /// (`2`, `0.25`), as the API server accepts both.
    pub fn from_json(v: &Value) -> Result<Quantity, QuantityError> {
        match v {
            Value::String(s) => s.parse(),
            Value::Number(n) => n.to_string().parse(),
            other => Err(QuantityError {
                text: other.to_string(),
                reason: format!("a {}, not a string or number", json_kind(other)),
            }),
        }
    }

    /// Reads a CPU amount (`637m`, `1`, `0.5`, `2k`, or a JSON number): a quantity without
    /// a binary suffix. apimachinery would read `1Gi` of cpu as 2³⁰ cores; that is always a
    /// memory value in the wrong place, so it is refused here.
    pub fn cpu_from_json(v: &Value) -> Result<Quantity, QuantityError> {
        let q = Quantity::from_json(v)?;
        match v {
            Value::String(s) if s.trim_end().ends_with('i') => Err(QuantityError {
                text: s.clone(),
                reason: "a binary (Ki, Mi, Gi...) suffix on a CPU amount; cores are decimal"
                    .to_string(),
            }),
            _ => Ok(q),
        }
    }
}

fn json_kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "list",
        Value::Object(_) => "mapping",
    }
}

fn ceil_div(a: i128, b: i128) -> i128 {
    let q = a / b;
    if a % b > 0 { q + 1 } else { q }
}

/// Why a text is not a quantity: the text and what is wrong with it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{text}` is not a quantity ({reason}; {EXPECTED})")]
pub struct QuantityError {
    /// The text as given.
    pub text: String,
    /// What is wrong with it (`negative`, `unknown suffix `Gb``, ...).
    pub reason: String,
}

/// Scale of a suffix: value = digits × 10^decimal × 2^binary.
fn suffix_scale(suffix: &str) -> Result<(i32, u32), String> {
    Ok(match suffix {
        "" => (0, 0),
        "n" => (-9, 0),
        "u" => (-6, 0),
        "m" => (-3, 0),
        "k" => (3, 0),
        "M" => (6, 0),
        "G" => (9, 0),
        "T" => (12, 0),
        "P" => (15, 0),
        "E" => (18, 0),
        "Ki" => (0, 10),
        "Mi" => (0, 20),
        "Gi" => (0, 30),
        "Ti" => (0, 40),
        "Pi" => (0, 50),
        "Ei" => (0, 60),
        other => {
            let exp = other
                .strip_prefix(['e', 'E'])
                .ok_or_else(|| format!("unknown suffix `{other}`"))?;
            let e: i32 = exp.parse().map_err(|_| format!("bad exponent `{exp}`"))?;
            if !(-9..=18).contains(&e) {
                return Err("exponent out of range -9..18".to_string());
            }
            (e, 0)
        }
    })
}

fn parse_nanos(s: &str) -> Result<i128, String> {
    let text = s.trim();
    let text = text.strip_prefix('+').unwrap_or(text);
    if text.starts_with('-') {
        return Err("negative".to_string());
    }
    let num_end = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(text.len());
    let (number, suffix) = text.split_at(num_end);
    if number.is_empty() || number == "." || number.matches('.').count() > 1 {
        return Err("no number".to_string());
    }
    let (int_part, frac_part) = number.split_once('.').unwrap_or((number, ""));
    let (dec_exp, bin_exp) = suffix_scale(suffix)?;
    let digits = format!("{int_part}{frac_part}");
    let digits = digits.trim_start_matches('0');
    if digits.len() > 30 {
        return Err("too many digits".to_string());
    }
    let mantissa: i128 = if digits.is_empty() {
        0
    } else {
        digits.parse().map_err(|_| "not a number".to_string())?
    };
    // nanos = mantissa × 10^(dec_exp − frac_len + 9) × 2^bin_exp, rounded up to 1n.
    let frac_len = i32::try_from(frac_part.len()).map_err(|_| "too many digits".to_string())?;
    let pow10 = dec_exp - frac_len + 9;
    let scaled = if pow10 >= 0 {
        mantissa
            .checked_mul(10i128.pow(pow10.unsigned_abs()))
            .ok_or_else(|| "too large".to_string())?
    } else if pow10 < -38 {
        // 10^39 does not fit in i128; 30 digits over it is below 1n: rounds up.
        i128::from(mantissa > 0)
    } else {
        ceil_div(mantissa, 10i128.pow(pow10.unsigned_abs()))
    };
    let nanos = scaled
        .checked_mul(1i128 << bin_exp)
        .ok_or_else(|| "too large".to_string())?;
    if nanos > i128::from(i64::MAX) * NANO {
        return Err("too large".to_string());
    }
    Ok(nanos)
}

impl FromStr for Quantity {
    type Err = QuantityError;

    /// Parses `<number><suffix>`: number `12`, `1.5`, `.5`, `5.`; suffix one of the binary
    /// `Ki Mi Gi Ti Pi Ei`, the decimal `n u m k M G T P E` (or none), or an exponent
    /// `e3`/`E-2`. Precision below 1n rounds up, as apimachinery does. Negative quantities
    /// are refused (no request can be negative), and so are values above 2⁶³−1 (which
    /// apimachinery would silently cap).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        parse_nanos(s)
            .map(|nanos| Quantity { nanos })
            .map_err(|reason| QuantityError {
                text: s.to_string(),
                reason,
            })
    }
}

impl fmt::Display for Quantity {
    /// Exact and re-parsable: integers plain (`2`), else milli-units (`500m`), else
    /// nano-units (`1n`).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.is_integer() {
            write!(f, "{}", self.nanos / NANO)
        } else if self.nanos % MICRO_NANOS == 0 {
            write!(f, "{}m", self.nanos / MICRO_NANOS)
        } else {
            write!(f, "{}n", self.nanos)
        }
    }
}

impl serde::Serialize for Quantity {
    /// As its [`Display`](fmt::Display) text.
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

#[cfg(test)]
mod tests;
