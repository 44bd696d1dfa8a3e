//! Every example a user is shown runs: the commands in the README's tour table and every
//! `Examples:` line of every subcommand's `--help`. Placeholders (`FILE`, `manifests.yaml`,
//! `d.xml`, …) are replaced by real files written here; an example may report a finding
//! (exit 1) but never fail to run (exit 2, or a usage error).

use std::path::{Path, PathBuf};

use crate::common::{run, test_data, topoalign, write_file};

/// The files placeholders stand for, written into `dir`.
fn placeholders(dir: &Path) -> Vec<(&'static str, String)> {
    let s = |p: PathBuf| p.to_str().unwrap().to_string();
    let pod = "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  containers:\n  - name: c\n    image: x\n    resources:\n      limits: {amd.com/gpu: 4, nvidia.com/sriov-rdma-vf: 4, cpu: \"8\", memory: 32Gi}\n";
    let kubelet = "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\ntopologyManagerPolicy: restricted\n";
    let case = r#"{"id": "c1", "policy": "restricted", "scope": "container", "options": {}, "numaNodes": [0, 1], "distances": [[10, 20], [20, 10]], "providers": [null, {"gpu": [{"affinity": [0], "preferred": true}]}]}"#;
    let slices =
        std::fs::read_to_string(test_data("dra", "fixtures/seed001-gb300-slices.json")).unwrap();
    vec![
        ("FILE", s(write_file(dir, "kubelet-config.yaml", kubelet))),
        ("kubelet.yaml", s(write_file(dir, "kubelet.yaml", kubelet))),
        ("CASES.jsonl", s(write_file(dir, "cases.jsonl", case))),
        ("cases.jsonl", s(write_file(dir, "cases2.jsonl", case))),
        ("manifests.yaml", s(write_file(dir, "manifests.yaml", pod))),
        ("pod.yaml", s(write_file(dir, "pod.yaml", pod))),
        (
            "used.yaml",
            s(write_file(dir, "used.yaml", "gpus: [\"0000:11:00.0\"]\n")),
        ),
        ("slices.yaml", s(write_file(dir, "slices.json", &slices))),
        (
            "d.xml",
            s(test_data("vm", "fixtures/virt-launcher-mi300x.xml")),
        ),
        ("NAME", "mi300x-8".to_string()),
        ("DIR", s(dir.join("written-profile"))),
        ("m.svg", s(dir.join("m.svg"))),
        // The seed-001 slices name their node so.
        ("n1", "aks-gb300-0".to_string()),
    ]
}

/// Runs one example (`topoalign …` as shown), placeholders replaced, from the repository
/// root (examples name repository files such as `deploy/kubevirt/vmi-example.yaml`).
fn run_example(example: &str, dir: &Path) {
    let subs = placeholders(dir);
    let words: Vec<String> = example
        .split_whitespace()
        .skip(1)
        .filter(|w| *w != "…")
        .map(|w| {
            subs.iter()
                .find(|(k, _)| *k == w)
                .map_or_else(|| w.to_string(), |(_, v)| v.clone())
        })
        .collect();
    let root = test_data("cli", "../../..");
    let out = run(topoalign().args(&words).current_dir(root));
    assert!(
        out.code == 0 || out.code == 1,
        "example `{example}` exited {} (ran {words:?})\nstdout:\n{}\nstderr:\n{}",
        out.code,
        out.stdout,
        out.stderr
    );
    assert!(
        !out.stderr.contains("error:"),
        "example `{example}` printed an error:\n{}",
        out.stderr
    );
}

/// The commands of the README's tour table: every backticked command of the first
/// column (`profile list` / `show NAME` / `write NAME DIR` become three), optional parts
/// in brackets left out.
fn readme_examples() -> Vec<String> {
    let readme = std::fs::read_to_string(test_data("cli", "../../../README.md")).unwrap();
    let mut out = Vec::new();
    for line in readme.lines().filter(|l| l.starts_with("| `topoalign ")) {
        let cell = line
            .trim_start_matches('|')
            .split(" | ")
            .next()
            .unwrap_or("");
        let cell = cell.replace("\\|", "|");
        let parts: Vec<&str> = cell.split('`').skip(1).step_by(2).collect();
        let Some(first) = parts.first() else { continue };
        let prefix: Vec<&str> = first.split_whitespace().take(2).collect();
        for (i, p) in parts.iter().enumerate() {
            let full = if i == 0 {
                p.to_string()
            } else {
                format!("{} {p}", prefix.join(" "))
            };
            let mut plain = String::new();
            let mut depth = 0;
            for c in full.chars() {
                match c {
                    '[' => depth += 1,
                    ']' => depth -= 1,
                    c if depth == 0 => plain.push(c),
                    _ => {}
                }
            }
            out.push(plain.split_whitespace().collect::<Vec<_>>().join(" "));
        }
    }
    out
}

/// Long-running servers and commands that need a cluster or a kubelet: shown, not run here (the e2e
/// harness runs them against a real control plane).
const SERVERS: [&str; 5] = [
    "topoalign extender --kubeconfig K --listen 127.0.0.1:8888",
    "topoalign webhook --tls-cert tls.crt --tls-key tls.key",
    "topoalign agent --node N --once -o json",
    "topoalign explain pod NS/NAME --kubeconfig K",
    "topoalign explain --all --kubeconfig K",
];

#[test]
fn every_readme_example_runs() {
    let all = readme_examples();
    assert!(all.len() >= 18, "the tour table was not found: {all:?}");
    let skipped: Vec<&String> = all
        .iter()
        .filter(|e| SERVERS.contains(&e.as_str()))
        .collect();
    assert_eq!(skipped.len(), SERVERS.len(), "{all:?}");
    for example in all.iter().filter(|e| !SERVERS.contains(&e.as_str())) {
        let dir = tempfile::tempdir().unwrap();
        run_example(example, dir.path());
    }
}

#[test]
fn every_help_example_runs() {
    let top = run(topoalign().arg("--help"));
    let commands: Vec<String> = top
        .stdout
        .lines()
        .skip_while(|l| !l.starts_with("Commands:"))
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .filter_map(|l| l.split_whitespace().next())
        .filter(|c| *c != "help")
        .map(str::to_string)
        .collect();
    assert!(commands.len() >= 15, "{commands:?}");
    let mut ran = 0;
    for c in &commands {
        let help = run(topoalign().args([c.as_str(), "--help"]));
        let examples: Vec<&str> = help
            .stdout
            .lines()
            .skip_while(|l| l.trim() != "Examples:")
            .skip(1)
            .take_while(|l| l.starts_with("  "))
            .map(str::trim)
            .collect();
        for e in examples {
            assert!(e.starts_with("topoalign "), "{c}: example `{e}`");
            let dir = tempfile::tempdir().unwrap();
            run_example(e, dir.path());
            ran += 1;
        }
    }
    assert!(ran >= 10, "only {ran} help examples found");
}
