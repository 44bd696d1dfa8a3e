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

/// `--mig`: stock first fit against topoalign's device order on MIG nodes, the same
/// numbers in table and JSON, and bad MIG options refused with the flag named.
#[test]
fn mig_compares_stock_and_topoalign() {
    let args = [
        "simulate", "--mig", "--nodes", "6", "--gpus", "4", "--pods", "400", "--seed", "5",
    ];
    let table = stdout_of(&args);
    assert!(
        table.contains("stock") && table.contains("topoalign") && table.contains("WHOLE"),
        "{table}"
    );
    assert!(
        table.contains("h100-80gb") && table.contains("1g.10gb=50"),
        "{table}"
    );
    assert_eq!(table, stdout_of(&args));
    let out = run_expecting(
        subcommand("simulate").args(&args[1..]).args(["-o", "json"]),
        0,
    );
    let v = json(&out.stdout);
    assert_eq!(v["model"], "h100-80gb");
    assert_eq!(
        (v["nodes"].as_u64(), v["gpusPerNode"].as_u64()),
        (Some(6), Some(4))
    );
    let policies = v["policies"].as_array().unwrap();
    assert_eq!(policies.len(), 2);
    for p in policies {
        let (placed, refused) = (
            p["placed"].as_u64().unwrap(),
            p["refused"].as_u64().unwrap(),
        );
        assert_eq!(placed + refused, 400);
        assert!(table.contains(&format!("{placed}")), "{table}");
        assert!(p["wholeGpusEnd"].as_u64().unwrap() <= 24);
    }
    let yaml = stdout_of(&[&args[..], &["-o", "yaml"]].concat());
    assert!(yaml.contains("wholeGpusMean"), "{yaml}");
    let a100 = stdout_of(&[
        "simulate",
        "--mig",
        "--mig-model",
        "a100-40gb",
        "--nodes",
        "2",
        "--pods",
        "50",
        "--mig-mix",
        "1g.5gb=3,3g.20gb=1",
    ]);
    assert!(a100.contains("3g.20gb=1,1g.5gb=3"), "{a100}");
    for (bad, want) in [
        (
            vec!["--mig", "--mig-model", "v100"],
            "--mig-model: unknown GPU model `v100`: expected one of a100-40gb",
        ),
        (
            vec!["--mig", "--mig-mix", "1g.5gb=2"],
            "--mig-mix: unknown profile `1g.5gb`",
        ),
        (vec!["--mig", "--gpus", "0"], "invalid --gpus"),
        (vec!["--mig", "--nodes", "0"], "invalid --nodes"),
        (vec!["--mig", "--load", "0"], "invalid --load"),
        (vec!["--mig", "--gangs", "2"], "--gangs"),
        (vec!["--gpus", "2"], "--mig"),
    ] {
        let out = run(subcommand("simulate").args(&bad));
        assert_eq!(out.code, 2, "{bad:?}: {}", out.stderr);
        assert!(out.stderr.contains(want), "{bad:?}: {}", out.stderr);
    }
    // --svg: one chart of the same run, the table unchanged beside it.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("mig.svg");
    let with_svg = stdout_of(&[&args[..], &["--svg", path.to_str().unwrap()]].concat());
    assert_eq!(with_svg, table);
    let svg = std::fs::read_to_string(&path).unwrap();
    assert!(svg.starts_with("<svg") || svg.starts_with("<?xml"), "{svg}");
    assert!(svg.contains("topoalign simulate --mig: 6 nodes x 4 GPUs h100-80gb"));
    let stock = &policies[0];
    let placed = format!(
        "data-row=\"stock\" data-segment=\"placed\" data-value=\"{}\"",
        stock["placed"]
    );
    assert!(svg.contains(&placed), "{placed} not in the chart");
    let out = run(subcommand("simulate")
        .args(&args[1..])
        .args(["--svg", dir.path().to_str().unwrap()]));
    assert_eq!(out.code, 2, "{}", out.stderr);
    assert!(
        out.stderr.contains("writing the SVG chart"),
        "{}",
        out.stderr
    );
}
