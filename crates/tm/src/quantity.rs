//! Kubernetes resource quantities (`64Gi`, `500m`, `2`, `1e3`), parsed exactly as
//! `k8s.io/apimachinery/pkg/api/resource` reads them, held in nano-units.

use std::fmt;
use std::str::FromStr;

/// A non-negative quantity in units of 10⁻⁹ (exact for every suffix, including `Ei`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Quantity {
    nanos: i128,
}

const NANO: i128 = 1_000_000_000;

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
        ceil_div(self.nanos, 1_000_000)
    }

    /// Whether it is a whole number (what the static CPU manager requires).
    pub fn is_integer(&self) -> bool {
        self.nanos % NANO == 0
    }

    /// Whether it is zero.
    pub fn is_zero(&self) -> bool {
        self.nanos == 0
    }
}

fn ceil_div(a: i128, b: i128) -> i128 {
    let q = a / b;
    if a % b > 0 { q + 1 } else { q }
}

/// Why a quantity did not parse.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QuantityError(pub String);

impl fmt::Display for QuantityError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl FromStr for Quantity {
    type Err = QuantityError;

    /// Parses `<number><suffix>`: number `12`, `1.5`, `.5`, `5.`; suffix one of the binary
    /// `Ki Mi Gi Ti Pi Ei`, the decimal `m k M G T P E` (or none), or an exponent `e3`/`E-2`.
    /// Negative quantities are refused (no request can be negative).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bad = |why: &str| {
            QuantityError(format!(
                "`{s}` is not a quantity ({why}; expected e.g. 2, 500m, 64Gi, 1.5G)"
            ))
        };
        let text = s.trim();
        let text = text.strip_prefix('+').unwrap_or(text);
        if text.starts_with('-') {
            return Err(bad("negative"));
        }
        let num_end = text
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(text.len());
        let (number, suffix) = text.split_at(num_end);
        if number.is_empty() || number == "." || number.matches('.').count() > 1 {
            return Err(bad("no number"));
        }
        let (int_part, frac_part) = number.split_once('.').unwrap_or((number, ""));
        // Scale: value = digits × 10^(dec_exp) × 2^(bin_exp).
        let (dec_exp, bin_exp): (i32, u32) = match suffix {
            "" => (0, 0),
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
                    .ok_or_else(|| bad(&format!("unknown suffix `{other}`")))?;
                let e: i32 = exp
                    .parse()
                    .map_err(|_| bad(&format!("bad exponent `{exp}`")))?;
                if !(-9..=18).contains(&e) {
                    return Err(bad("exponent out of range -9..18"));
                }
                (e, 0)
            }
        };
        let digits = format!("{int_part}{frac_part}");
        let digits = digits.trim_start_matches('0');
        if digits.len() > 30 {
            return Err(bad("too many digits"));
        }
        let mantissa: i128 = if digits.is_empty() {
            0
        } else {
            digits.parse().map_err(|_| bad("not a number"))?
        };
        // nanos = mantissa × 10^(dec_exp − frac_len + 9) × 2^bin_exp, rounded up.
        let pow10 = dec_exp - frac_part.len() as i32 + 9;
        let scaled = if pow10 >= 0 {
            mantissa
                .checked_mul(10i128.pow(pow10 as u32))
                .ok_or_else(|| bad("too large"))?
        } else {
            ceil_div(mantissa, 10i128.pow((-pow10) as u32))
        };
        let nanos = scaled
            .checked_mul(1i128 << bin_exp)
            .ok_or_else(|| bad("too large"))?;
        if nanos > i128::from(i64::MAX) * NANO {
            return Err(bad("too large"));
        }
        Ok(Quantity { nanos })
    }
}

impl fmt::Display for Quantity {
    /// Canonical-ish form: integers plain, else milli-units (`500m`).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.is_integer() {
            write!(f, "{}", self.value())
        } else {
            write!(f, "{}m", self.milli_value())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn q(s: &str) -> Quantity {
        s.parse().unwrap()
    }

    #[test]
    fn parses_the_usual_forms_exactly() {
        assert_eq!(q("64Gi").value(), 64 << 30);
        assert_eq!(q("500m").milli_value(), 500);
        assert_eq!(q("500m").value(), 1, "Value rounds up");
        assert!(!q("500m").is_integer());
        assert_eq!(q("2").value(), 2);
        assert!(q("2").is_integer());
        assert_eq!(q("1.5").milli_value(), 1500);
        assert_eq!(q("1e3").value(), 1000);
        assert_eq!(q("1.5G").value(), 1_500_000_000);
        assert_eq!(q(".5k").value(), 500);
        assert_eq!(q("2000m").value(), 2);
        assert!(q("2000m").is_integer());
        assert_eq!(q("637m").milli_value(), 637);
        assert_eq!(q("1Ei").value(), 1 << 60);
    }

    #[test]
    fn refuses_garbage() {
        for bad in [
            "", "abc", "1.2.3", "5Gb", "-1", "1e", "1e99", "Gi", ".", "1 Gi",
        ] {
            assert!(bad.parse::<Quantity>().is_err(), "{bad}");
        }
    }

    proptest! {
        #[test]
        fn never_panics(s in ".{0,24}") {
            let _ = s.parse::<Quantity>();
        }

        #[test]
        fn milli_round_trip(m in 0i64..10_000_000) {
            let t = format!("{m}m");
            prop_assert_eq!(q(&t).milli_value(), i128::from(m));
        }
    }
}
