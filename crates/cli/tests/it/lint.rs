//! `topoalign lint` end to end.

use crate::common::{json, run_expecting, subcommand, test_data};
use assert_cmd::Command;

/// `topoalign lint <fixture>` on a file of the lint crate's fixtures.
fn lint_fixture(name: &str) -> Command {
    let mut cmd = subcommand("lint");
    cmd.arg(test_data("lint", &format!("fixtures/{name}")))
        .args(["--profile", "mi300x-8"]);
    cmd
}

/// One rule for every command: with no topology source, lint, plan and discover all
/// describe this host, and say which machine that is.
#[test]
fn with_no_source_every_command_describes_this_host() {
    let host = crate::common::json(&crate::common::stdout_of(&["discover", "-o", "json"]));
    let name = host["name"].as_str().unwrap().to_string();
    let pod = test_data("lint", "fixtures/broken.yaml");
    let lint = crate::common::run(subcommand("lint").arg(&pod).args(["-o", "json"]));
    assert_eq!(
        crate::common::json(&lint.stdout)["topology"],
        name.as_str(),
        "{}",
        lint.stdout
    );
    let plan = crate::common::run(subcommand("plan").args(["--gpus", "1", "-o", "json"]));
    let text = format!("{}{}", plan.stdout, plan.stderr);
    assert!(
        text.contains(&name),
        "plan must name the machine `{name}`: {text}"
    );
    for cmd in ["plan", "lint", "tm", "matrix", "claims"] {
        let help = crate::common::stdout_of(&[cmd, "--help"]);
        assert!(
            help.contains("the default of every command"),
            "{cmd} --help must name the default source"
        );
    }
}

#[test]
fn warnings_only_exit_0_unless_warnings_as_errors() {
    let text = run_expecting(&mut lint_fixture("seed000-topology-test.yaml"), 0).stdout;
    assert!(
        text.contains("Pod/topology-test spec: warning [policy-none]"),
        "{text}"
    );
    assert!(text.contains("0 error(s), 1 warning(s)"), "{text}");
    run_expecting(
        lint_fixture("seed000-topology-test.yaml").arg("--warnings-as-errors"),
        1,
    );
}

#[test]
fn policy_from_kubelet_config() {
    let kubelet = test_data("kubelet", "golden/kubeadm-config.restricted.yaml");
    let out = run_expecting(
        lint_fixture("seed000-topology-test.yaml")
            .arg("--kubelet-config")
            .arg(kubelet)
            .args(["-o", "json"]),
        1,
    );
    let v = json(&out.stdout);
    assert_eq!(v["policy"], "restricted");
    assert_eq!(v["podScope"], true);
    assert_eq!(v["findings"][0]["rule"], "gpu-nic-qos");
    assert_eq!(v["findings"][0]["severity"], "error");
    assert_eq!(
        v["findings"][0]["path"],
        "spec.containers[0].resources.limits"
    );
}

#[test]
fn gb300_claims_and_stdin() {
    let text = std::fs::read_to_string(test_data("lint", "fixtures/gb300-claims.yaml")).unwrap();
    let out = run_expecting(
        subcommand("lint")
            .args(["-", "--profile", "gb300-4", "-o", "json"])
            .write_stdin(text),
        1,
    );
    let v = json(&out.stdout);
    assert_eq!(v["errors"], 1);
    let rules: Vec<&str> = v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["rule"].as_str().unwrap())
        .collect();
    assert!(rules.contains(&"dra-pcieroot-unsatisfiable"));
    assert_eq!(v["findings"][0]["file"], "-");
}

#[test]
fn single_numa_node_rejects_8_plus_8() {
    let text = run_expecting(
        lint_fixture("mi300x-workloads.yaml").args(["--policy", "single-numa-node"]),
        1,
    )
    .stdout;
    assert!(text.contains("Job/train-8x8 spec.template.spec.containers[0].resources.limits: error [single-numa-capacity]"), "{text}");
    assert!(text.contains("single-numa-node rejects the pod"), "{text}");
}

#[test]
fn bad_input_is_exit_2() {
    run_expecting(subcommand("lint").arg("/nonexistent/x.yaml"), 2);
    run_expecting(lint_fixture("broken.yaml").args(["--policy", "strict"]), 2);
    // Malformed documents are findings (exit 1), not crashes.
    run_expecting(&mut lint_fixture("broken.yaml"), 1);
}

/// Invalid quantities are errors at `file:line` of the field, with its path.
#[test]
fn invalid_quantities_point_at_their_line() {
    let out = run_expecting(&mut lint_fixture("invalid-quantities.yaml"), 1).stdout;
    assert!(
        out.contains("invalid-quantities.yaml:12 (document 1) Pod/bad-amounts spec.containers[0].resources.limits[\"amd.com/gpu\"]: error [invalid-quantity]"),
        "{out}"
    );
    assert!(out.contains("invalid-quantities.yaml:13 "), "{out}");
    assert!(out.contains("[node-capacity]"), "{out}");
}

/// The command lint suggests runs as printed (on a copy of a real KubeletConfiguration).
#[test]
fn suggested_fix_runs_as_printed() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("config.yaml");
    std::fs::copy(
        test_data("kubelet", "fixtures/kubeadm-config.yaml"),
        &config,
    )
    .unwrap();
    let out = run_expecting(
        lint_fixture("seed000-topology-test.yaml")
            .args(["--policy", "none", "--kubelet-config"])
            .arg(&config),
        0,
    )
    .stdout;
    let start = out.find("`topoalign ").unwrap() + 1;
    let command = &out[start..start + out[start..].find('`').unwrap()];
    let words: Vec<&str> = command.split_whitespace().collect();
    assert_eq!(words[0], "topoalign");
    // Run it with the state file pointed into the temp directory instead of /var/lib/kubelet.
    let state = dir.path().join("cpu_manager_state");
    let mut args: Vec<String> = words[1..].iter().map(|w| w.to_string()).collect();
    args.push(state.display().to_string());
    let done = run_expecting(crate::common::topoalign().args(&args), 0);
    assert!(done.stdout.contains("wrote"), "{}", done.stdout);
    let text = std::fs::read_to_string(&config).unwrap();
    assert!(text.contains("cpuManagerPolicy: static"), "{text}");
}
