//! `topoalign demo` end to end.

use crate::common::{run, run_expecting, subcommand};

/// The stdout of `topoalign demo ARGS`, which must succeed.
fn demo(args: &[&str]) -> String {
    run_expecting(subcommand("demo").args(args), 0).stdout
}

#[test]
fn tells_the_seed_000_story() {
    let s = demo(&[]);
    // The matrix header of nvidia-smi topo -m.
    assert!(
        s.contains("GPU0") && s.contains("NIC0") && s.contains("CPU Affinity"),
        "{s}"
    );
    let line = |label: &str| {
        s.lines()
            .skip_while(|l| !l.starts_with("== One pod"))
            .find(|l| l.starts_with(label))
            .unwrap_or_else(|| panic!("no {label} line in\n{s}"))
            .to_string()
    };
    let ta = line("topoalign");
    assert_eq!(ta.matches("PIX+GDR").count(), 4, "{ta}");
    let restricted = line("restricted");
    assert_eq!(restricted.matches("PIX").count(), 1, "{restricted}");
    assert_eq!(restricted.matches("NODE").count(), 3, "{restricted}");
    // The summary line: restricted has fewer GDR pairs than topoalign.
    let summary = s.lines().find(|l| l.starts_with("GDR pairs")).unwrap();
    let count = |label: &str| -> usize {
        let part = summary.split('|').find(|p| p.contains(label)).unwrap();
        let frac = part.split_whitespace().last().unwrap();
        frac.split('/').next().unwrap().parse().unwrap()
    };
    assert!(count("restricted") < count("topoalign"), "{summary}");
    assert_eq!(count("topoalign"), 12, "{summary}");
    // It ends with what to deploy for the topoalign row, on both kinds of cluster.
    let tail: String = s.lines().rev().take(5).collect::<Vec<_>>().join("\n");
    for want in [
        "helm install topoalign deploy/helm/topoalign",
        "topoalign claims --pairs 4",
        "kubelet-config set",
        "topoalign-extender",
    ] {
        assert!(
            tail.contains(want),
            "{want:?} missing from the end:\n{tail}"
        );
    }
    // One screen: at most 50 lines of at most 120 columns.
    let lines = s.lines().count();
    assert!((25..=50).contains(&lines), "{lines} lines");
    let widest = s.lines().map(|l| l.chars().count()).max().unwrap();
    assert!(widest <= 120, "{widest} columns");
}

#[test]
fn every_profile_fits_one_screen_and_the_full_matrix_is_behind_a_flag() {
    for p in ["mi300x-8", "gb300-4", "dgx-h100", "pcie-2socket"] {
        let s = demo(&["--profile", p]);
        assert!(s.lines().count() <= 50, "{p}: {} lines", s.lines().count());
        assert!(s.lines().all(|l| l.chars().count() <= 120), "{p}:\n{s}");
        assert!(!s.to_lowercase().contains("seed 0"), "{p}");
    }
    assert!(demo(&["--matrix"]).contains("NIC Legend:"));
    assert!(!demo(&[]).contains("NIC Legend:"));
}

#[test]
fn is_deterministic_per_seed_and_rejects_unknown_profiles() {
    assert_eq!(demo(&["--seed", "5"]), demo(&["--seed", "5"]));
    assert!(demo(&["--profile", "dgx-h100"]).contains("topoalign"));
    let out = run(subcommand("demo").args(["--profile", "nope"]));
    assert_eq!(out.code, 2);
    assert!(out.stderr.contains("unknown profile `nope`"));
}

#[test]
fn json_output_has_the_numbers() {
    let out = run_expecting(subcommand("demo").args(["-o", "json"]), 0).stdout;
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["node"], "mi300x-8");
    assert_eq!(v["gdrPairs"][2], serde_json::json!(["topoalign", 12, 12]));
    assert_eq!(v["bigPod"][2]["gdr"], 4);
}
