#![allow(clippy::unwrap_used, clippy::expect_used)]
//! `topoalign simulate` end to end.

use assert_cmd::Command;

fn topoalign() -> Command {
    Command::cargo_bin("topoalign").unwrap()
}

#[test]
fn table_lists_every_policy_and_is_deterministic() {
    let run = || {
        let out = topoalign()
            .args(["simulate", "--nodes", "4", "--pods", "120", "--seed", "3"])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    };
    let a = run();
    for p in ["blind", "tm-restricted", "dra-first-fit", "topoalign"] {
        assert!(a.contains(p), "{a}");
    }
    assert!(a.contains("PIX") && a.contains("GDR"));
    assert_eq!(a, run());
}

#[test]
fn json_has_topoalign_ahead_and_svg_is_written() {
    let dir = tempfile::tempdir().unwrap();
    let svg = dir.path().join("fleet.svg");
    let out = topoalign()
        .args([
            "simulate",
            "--fleet",
            "mi300x-8=4,dgx-h100=2",
            "--pods",
            "150",
        ])
        .args(["--seed", "11", "-o", "json", "--svg"])
        .arg(&svg)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let policies = v["policies"].as_array().unwrap();
    assert_eq!(policies.len(), 4);
    let gdr = |name: &str| {
        policies.iter().find(|p| p["policy"] == name).unwrap()["pairs"]["gdr"]
            .as_u64()
            .unwrap()
    };
    assert!(gdr("topoalign") > gdr("tm-restricted"));
    assert!(gdr("topoalign") >= gdr("blind"));
    let text = std::fs::read_to_string(&svg).unwrap();
    assert!(text.starts_with("<svg") && text.contains("topoalign"));
    // Nothing but the chart is left in the directory (no temporary file).
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
}

#[test]
fn bad_parameters_exit_2_with_a_clear_message() {
    let cases: [(&[&str], &str); 6] = [
        (&["--nodes", "0"], "--nodes"),
        (&["--profile", "nope"], "unknown profile `nope`"),
        (&["--mix", "1=0,2=0"], "--mix"),
        (&["--arrival-rate", "-2"], "--arrival-rate"),
        (&["--policies", "blind,greedy"], "unknown policy `greedy`"),
        (&["--fleet", "mi300x-8"], "--fleet"),
    ];
    for (args, want) in cases {
        let out = topoalign()
            .arg("simulate")
            .args(args)
            .args(["--pods", "10"])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(want), "{args:?}: {err}");
    }
}
