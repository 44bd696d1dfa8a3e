use super::*;
use proptest::prelude::*;
use serde_json::json;

fn q(s: &str) -> Quantity {
    s.parse().unwrap()
}

fn err(s: &str) -> String {
    s.parse::<Quantity>().unwrap_err().to_string()
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
fn parses_cpu_forms_in_millicores() {
    // Formerly topoalign-kubelet's own CPU parser.
    assert_eq!(q("637m").milli_value(), 637);
    assert_eq!(q("1").milli_value(), 1000);
    assert_eq!(q("0.5").milli_value(), 500);
    assert_eq!(q("0").milli_value(), 0);
    assert_eq!(q("0m").milli_value(), 0);
    assert_eq!(q("2k").milli_value(), 2_000_000);
    assert_eq!(q("100k").value(), 100_000);
    assert_eq!(q("+3").value(), 3);
    assert_eq!(q("5.").value(), 5);
}

#[test]
fn cpu_amounts_refuse_binary_suffixes() {
    let cpu = |v: Value| Quantity::cpu_from_json(&v).map(|q| q.milli_value());
    assert_eq!(cpu(json!("637m")), Ok(637));
    assert_eq!(cpu(json!("2k")), Ok(2_000_000));
    assert_eq!(cpu(json!(2)), Ok(2000));
    assert_eq!(cpu(json!(0.25)), Ok(250));
    for bad in ["", "m", "abc", "1.2.3", "1x", ".", "1Gi", "-1"] {
        assert!(cpu(json!(bad)).is_err(), "{bad}");
    }
    assert!(
        cpu(json!("1Gi"))
            .unwrap_err()
            .to_string()
            .contains("binary")
    );
    assert!(cpu(json!(true)).is_err());
}

#[test]
fn nano_and_micro_suffixes_and_rounding_up() {
    assert_eq!(q("1500000n").milli_value(), 2, "MilliValue rounds up");
    assert_eq!(q("250u").milli_value(), 1);
    assert_eq!(q("1000u").milli_value(), 1);
    assert!(q("1000000000n").is_integer());
    // Below 1n rounds up to 1n, as apimachinery does.
    assert_eq!(q("0.0000000001"), q("1n"));
    assert_eq!(
        q("0.00000000000000000000000000000000000000000000000001"),
        q("1n")
    );
    assert!(q("0.000").is_zero());
    assert!(q("1e-9").is_positive());
    assert_eq!(q("1E-2").milli_value(), 10);
}

#[test]
fn equal_amounts_compare_equal_whatever_the_form() {
    assert_eq!(q("1Gi"), q("1073741824"));
    assert_eq!(q("1.5"), q("1500m"));
    assert_eq!(q("1e3"), q("1k"));
    assert!(q("999m") < q("1"));
}

#[test]
fn refuses_garbage() {
    for bad in [
        "",
        "abc",
        "1.2.3",
        "5Gb",
        "-1",
        "1e",
        "1e99",
        "Gi",
        ".",
        "1 Gi",
        "m",
        "1x",
        "1ki",
        "1e1.5",
        "--1",
        "+-1",
        "1e19",
        "10000000000000000000",
    ] {
        assert!(bad.parse::<Quantity>().is_err(), "{bad}");
    }
}

#[test]
fn errors_name_the_text_and_what_was_expected() {
    let e = err("64Gb");
    assert!(e.contains("`64Gb`"), "{e}");
    assert!(e.contains("unknown suffix `Gb`"), "{e}");
    assert!(e.contains("expected e.g. 2, 500m, 64Gi"), "{e}");
    assert!(err("-500m").contains("negative"));
    assert!(err("1e99").contains("exponent out of range"));
    assert!(err("").contains("no number"));
    let parsed = "x1".parse::<Quantity>().unwrap_err();
    assert_eq!(parsed.text, "x1");
    assert_eq!(parsed.reason, "no number");
}

#[test]
fn reads_json_strings_and_numbers() {
    assert_eq!(Quantity::from_json(&json!(2)).unwrap().milli_value(), 2000);
    assert_eq!(
        Quantity::from_json(&json!(0.25)).unwrap().milli_value(),
        250
    );
    assert_eq!(
        Quantity::from_json(&json!("64Gi")).unwrap().value(),
        64 << 30
    );
    assert!(Quantity::from_json(&json!(-1)).is_err());
    let e = Quantity::from_json(&json!(true)).unwrap_err().to_string();
    assert!(e.contains("boolean, not a string or number"), "{e}");
    assert!(Quantity::from_json(&json!(null)).is_err());
    assert!(Quantity::from_json(&json!({"a": 1})).is_err());
}

#[test]
fn displays_and_serializes_canonically() {
    assert_eq!(q("64Gi").to_string(), "68719476736");
    assert_eq!(q("1.5").to_string(), "1500m");
    assert_eq!(q("2000m").to_string(), "2");
    assert_eq!(q("1500u").to_string(), "1500000n");
    assert_eq!(serde_json::to_value(q("500m")).unwrap(), json!("500m"));
}

#[test]
fn sums() {
    assert_eq!(q("500m").saturating_add(q("1.5")), q("2"));
}

const MAX_NANOS: i128 = (i64::MAX as i128) * NANO;

proptest! {
    #[test]
    fn never_panics(s in ".{0,24}") {
        let _ = s.parse::<Quantity>();
    }

    #[test]
    fn never_panics_on_quantity_like_text(s in "[-+]?[0-9.]{0,60}(e|E|Ki|Gi|Ei|n|u|m|k|G|E)?[-+]?[0-9]{0,4}") {
        if let Err(e) = s.parse::<Quantity>() {
            let named = format!("`{}`", s);
            prop_assert!(e.to_string().contains(&named));
        }
    }

    #[test]
    fn milli_round_trip(m in 0i64..10_000_000) {
        let t = format!("{m}m");
        prop_assert_eq!(q(&t).milli_value(), i128::from(m));
    }

    #[test]
    fn canonical_form_round_trips(nanos in 0i128..=MAX_NANOS) {
        let x = Quantity { nanos };
        let text = x.to_string();
        prop_assert_eq!(q(&text), x, "{}", text);
        prop_assert_eq!(q(&text).to_string(), text);
    }

    #[test]
    fn arithmetic_is_exact(units in 0i64..1_000_000_000, frac in 0u32..1000) {
        let u = i128::from(units);
        prop_assert_eq!(q(&format!("{units}")).milli_value(), u * 1000);
        prop_assert_eq!(q(&format!("{units}.{frac:03}")).milli_value(), u * 1000 + i128::from(frac));
        prop_assert_eq!(q(&format!("{units}k")).value(), u * 1000);
        prop_assert_eq!(q(&format!("{units}e3")), q(&format!("{units}k")));
        prop_assert_eq!(q(&format!("{units}Gi")).value(), u << 30);
        prop_assert_eq!(q(&format!("{units}Ki")).value(), u * 1024);
        let m = q(&format!("{units}m"));
        prop_assert_eq!(m.value(), (u + 999) / 1000, "Value rounds up");
        prop_assert_eq!(m.is_integer(), units % 1000 == 0);
        prop_assert_eq!(q(&format!("{units}")), Quantity::from_units(units));
    }

    #[test]
    fn negatives_are_refused(units in 0u64..u64::MAX, suffix in "(|m|k|Gi|e3)") {
        let text = format!("-{units}{suffix}");
        let e = text.parse::<Quantity>().unwrap_err();
        prop_assert_eq!(e.reason, "negative");
        prop_assert_eq!(e.text, text);
    }
}

#[test]
fn whole_units_only_for_non_negative_whole_amounts() {
    assert_eq!(q("2").whole_units(), Some(2));
    assert_eq!(q("2000m").whole_units(), Some(2));
    assert_eq!(q("0").whole_units(), Some(0));
    assert_eq!(q("1.5").whole_units(), None);
    assert_eq!(q("500m").whole_units(), None);
    assert_eq!(Quantity::from_units(-1).whole_units(), None);
}
