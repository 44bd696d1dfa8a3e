//! `topoalign simulate` end to end.

use crate::common::{json, run, run_expecting, stdout_of, subcommand};

#[test]
fn table_lists_every_policy_and_is_deterministic() {
    let table = || stdout_of(&["simulate", "--nodes", "4", "--pods", "120", "--seed", "3"]);
    let a = table();
    for p in ["blind", "tm-restricted", "dra-first-fit", "topoalign"] {
        assert!(a.contains(p), "{a}");
    }
    assert!(a.contains("PIX") && a.contains("GDR"));
    assert_eq!(a, table());
}

#[test]
fn json_has_topoalign_ahead_and_svg_is_written() {
    let dir = tempfile::tempdir().unwrap();
    let svg = dir.path().join("fleet.svg");
    let out = run_expecting(
        subcommand("simulate")
            .args(["--fleet", "mi300x-8=4,dgx-h100=2", "--pods", "150"])
            .args(["--seed", "11", "-o", "json", "--svg"])
            .arg(&svg),
        0,
    );
    let v = json(&out.stdout);
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
        let out = run(subcommand("simulate").args(args).args(["--pods", "10"]));
        assert_eq!(out.code, 2, "{args:?}");
        let err = &out.stderr;
        assert!(err.contains(want), "{args:?}: {err}");
    }
}

/// Bounds name the flag at fault: a zero count in --fleet blames --fleet (not --nodes), a
/// --duration that would generate too many arrivals is refused before it runs.
#[test]
fn bounds_blame_the_right_flag() {
    for (args, want) in [
        (vec!["--fleet", "mi300x-8=0"], "invalid --fleet"),
        (vec!["--duration", "1e12"], "invalid --duration"),
        (vec!["--duration", "0"], "invalid --duration"),
        (vec!["--pods", "0"], "invalid --pods"),
        (vec!["--nodes", "1000000"], "invalid --nodes"),
    ] {
        let out = run(subcommand("simulate").args(&args));
        assert_eq!(out.code, 2, "{args:?}");
        assert!(out.stderr.contains(want), "{args:?}: {}", out.stderr);
    }
    // No progress bar when stderr is not a terminal (as here), nor with --quiet.
    let out = run(subcommand("simulate").args(["--nodes", "2", "--pods", "20", "-q"]));
    assert_eq!(out.code, 0);
    assert!(out.stderr.is_empty(), "{}", out.stderr);
}

/// `--gangs`: stock against topoalign, the same numbers in every format, the chart, the
/// pod-stream output untouched, and bad gangs refused with the flag named.
#[test]
fn gangs_compare_stock_and_topoalign() {
    let args = ["simulate", "--gangs", "30", "--nodes", "180", "--seed", "2"];
    let table = stdout_of(&args);
    assert!(
        table.contains("SAME-RAILS") && table.contains("stock"),
        "{table}"
    );
    assert_eq!(table, stdout_of(&args));
    let dir = tempfile::tempdir().unwrap();
    let svg = dir.path().join("gangs.svg");
    let out = run_expecting(
        subcommand("simulate")
            .args(&args[1..])
            .args(["-o", "json", "--svg"])
            .arg(&svg),
        0,
    );
    let v = json(&out.stdout);
    let t = v["policies"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["policy"] == "topoalign")
        .unwrap();
    assert_eq!(t["railConsistent"], t["placed"]);
    assert_eq!(v["spec"]["gangs"], 30);
    assert_eq!(v["fleet"][0][0], "gb300-4", "gb300-4 is the gang default");
    assert!(std::fs::read_to_string(&svg).unwrap().contains("Gangs"));
    for (bad, want) in [
        (vec!["--gangs", "2", "--gang-pods", "40"], "needs 20 nodes"),
        (vec!["--gangs", "0"], "invalid --gangs"),
        (vec!["--gangs", "2", "--profile", "mi300x-8"], "SR-IOV VFs"),
        (vec!["--gang-pairs", "2"], "--gangs"),
    ] {
        let out = run(subcommand("simulate").args(&bad));
        assert_eq!(out.code, 2, "{bad:?}");
        assert!(out.stderr.contains(want), "{bad:?}: {}", out.stderr);
    }
}
