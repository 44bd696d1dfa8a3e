//! `topoalign plan` end to end.

use crate::common::{json, run, run_expecting, subcommand, write_file};
use serde_json::Value;

/// `topoalign plan ARGS -o json`, which must succeed, parsed.
fn plan_json(args: &[&str]) -> Value {
    json(&run_expecting(subcommand("plan").args(args).args(["-o", "json"]), 0).stdout)
}

/// Runs `topoalign plan ARGS` and returns (exit code, stderr).
fn fails(args: &[&str]) -> (i32, String) {
    let out = run(subcommand("plan").args(args));
    (out.code, out.stderr)
}

fn classes(v: &Value) -> Vec<String> {
    v["pairs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["class"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn mi300x_four_gpus_get_four_pix_pairs_on_one_node() {
    let v = plan_json(&[
        "--profile",
        "mi300x-8",
        "--gpus",
        "4",
        "--nics-per-gpu",
        "1",
    ]);
    assert_eq!(classes(&v), vec!["PIX"; 4]);
    assert_eq!(v["numaNodes"].as_array().unwrap().len(), 1);
    assert_eq!(v["score"]["gdrPairs"], 4);
}

#[test]
fn mi300x_eight_gpus_get_eight_pix_pairs_across_both_nodes() {
    let v = plan_json(&[
        "--profile",
        "mi300x-8",
        "--gpus",
        "8",
        "--nics-per-gpu",
        "1",
    ]);
    assert_eq!(v["machine"], "mi300x-8");
    assert_eq!(classes(&v), vec!["PIX"; 8]);
    assert_eq!(v["numaNodes"], serde_json::json!([0, 1]));
}

#[test]
fn gb300_one_gpu_two_nics_takes_its_own_node_never_sys() {
    let v = plan_json(&["--profile", "gb300-4", "--gpus", "1", "--nics", "2"]);
    assert_eq!(classes(&v), vec!["NODE", "NODE"]);
    assert_eq!(v["gpus"], serde_json::json!(["0008:06:00.0"]));
    assert_eq!(
        v["nics"],
        serde_json::json!(["0101:00:00.0", "0102:00:00.0"])
    );
}

#[test]
fn used_devices_and_cpus_are_avoided() {
    let dir = tempfile::tempdir().unwrap();
    let used = write_file(
        dir.path(),
        "used.yaml",
        "gpus: [\"0000:11:00.0\"]\nnics: [\"0000:0c:00.0\"]\ncpus: \"0-7\"\n",
    );
    let v = plan_json(&[
        "--profile",
        "mi300x-8",
        "--gpus",
        "1",
        "--nics-per-gpu",
        "1",
        "--cpus",
        "4",
        "--used",
        used.to_str().unwrap(),
    ]);
    assert_ne!(v["gpus"][0], "0000:11:00.0");
    assert_eq!(classes(&v), vec!["PIX"]);
    assert_eq!(v["cpus"], "8-11");
}

#[test]
fn too_many_gpus_exits_1_naming_the_bound() {
    let (code, err) = fails(&["--profile", "mi300x-8", "--gpus", "9"]);
    assert_eq!(code, 1);
    assert!(
        err.contains("(gpus)") && err.contains("need 9 GPUs"),
        "{err}"
    );
}

#[test]
fn max_pair_pix_on_gb300_exits_1_with_the_relaxation() {
    let (code, err) = fails(&[
        "--profile",
        "gb300-4",
        "--gpus",
        "1",
        "--nics",
        "1",
        "--max-pair",
        "PIX",
    ]);
    assert_eq!(code, 1);
    assert!(
        err.contains("max-pair") && err.contains("worst pair NODE"),
        "{err}"
    );
}

#[test]
fn bad_used_files_exit_2_naming_the_problem() {
    let dir = tempfile::tempdir().unwrap();
    let unknown = write_file(dir.path(), "unknown.yaml", "gpus: [\"0000:99:00.0\"]\n");
    let (code, err) = fails(&["--gpus", "1", "--used", unknown.to_str().unwrap()]);
    assert_eq!(code, 2);
    assert!(
        err.contains("0000:99:00.0") && err.contains("gpus"),
        "{err}"
    );
    let garbage = write_file(dir.path(), "garbage.json", "{\"gpus\": [\"not-a-bdf\"]}");
    let (code, err) = fails(&["--gpus", "1", "--used", garbage.to_str().unwrap()]);
    assert_eq!(code, 2);
    assert!(
        err.contains("garbage.json") && err.contains("PCI address"),
        "{err}"
    );
}

#[test]
fn memory_is_a_kubernetes_quantity() {
    let v = plan_json(&["--profile", "dgx-h100", "--gpus", "1", "--memory", "64Gi"]);
    assert_eq!(v["memory"][0]["bytes"], 68_719_476_736_u64);
    let (code, err) = fails(&["--gpus", "1", "--memory", "64GB"]);
    assert_eq!(code, 2);
    assert!(err.contains("--memory") && err.contains("`64GB`"), "{err}");
    let (code, err) = fails(&["--gpus", "1", "--memory=0"]);
    assert_eq!(code, 2);
    assert!(err.contains("positive"), "{err}");
}

/// An unsatisfiable `plan -o json` used to print nothing on stdout: now a JSON error.
#[test]
fn unsatisfiable_json_prints_a_json_error() {
    let out = run(subcommand("plan").args(["--gpus", "9", "-o", "json"]));
    assert_eq!(out.code, 1);
    let v = json(&out.stdout);
    assert_eq!(v["unsatisfiable"], true);
    assert!(v["error"].as_str().unwrap().contains("GPU"), "{v}");
    let (code, err) = fails(&["--gpus", "-1"]);
    assert_eq!(code, 2);
    assert!(err.contains("not a count from 0 to 4096"), "{err}");
}

/// The table names devices, not only addresses.
#[test]
fn table_names_gpus_and_nics() {
    let out = run_expecting(
        subcommand("plan").args(["--profile", "mi300x-8", "--gpus", "1", "--nics", "1"]),
        0,
    )
    .stdout;
    assert!(out.starts_with("Machine:    mi300x-8\n"), "{out}");
    assert!(
        out.contains("GPU0 (0000:") && out.contains("mlx5_0"),
        "{out}"
    );
}

#[test]
fn nvlink_on_an_unknown_fabric_says_unknown_not_unsatisfiable() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("tree");
    run_expecting(
        subcommand("profile").args(["write", "dgx-h100", root.to_str().unwrap()]),
        0,
    );
    // Without the saved `nvidia-smi topo -m`, sysfs alone does not carry NVLink.
    let saved = root.join("var/lib/topoalign/nvidia-smi-topo-m.txt");
    assert!(saved.exists(), "profile write saves the NVLink source");
    std::fs::remove_file(&saved).unwrap();
    let (code, err) = fails(&[
        "--sysfs-root",
        root.to_str().unwrap(),
        "--gpus",
        "2",
        "--gpu-link",
        "nvlink",
    ]);
    assert_ne!(code, 0);
    assert!(err.contains("fabric is unknown"), "{err}");
    assert!(err.contains("--nvlink-from"), "{err}");
    assert!(!err.contains("unsatisfiable"), "{err}");
}

/// The hidden `--time-iterations N` (the e2e `speed` scenario's in-process figure): the
/// same plan with `timing` beside it, on success and on an unsatisfiable request alike.
#[test]
fn time_iterations_adds_in_process_timing_and_changes_nothing_else() {
    let args = [
        "--profile",
        "mi300x-8",
        "--gpus",
        "2",
        "--nics-per-gpu",
        "1",
    ];
    let plain = plan_json(&args);
    assert!(plain.get("timing").is_none(), "{plain}");
    let timed = plan_json(&[&args[..], &["--time-iterations", "3"]].concat());
    assert_eq!(classes(&timed), classes(&plain));
    assert_eq!(timed["timing"]["reps"], 3);
    for kind in ["newAndPlan", "planOnly"] {
        let t = &timed["timing"][kind];
        let ms = |k: &str| t[k].as_f64().unwrap();
        assert!(ms("minMs") > 0.0, "{t}");
        assert!(
            ms("minMs") <= ms("medianMs") && ms("medianMs") <= ms("maxMs"),
            "{t}"
        );
    }
    let out = run(subcommand("plan").args([
        "--profile",
        "mi300x-8",
        "--gpus",
        "9",
        "--time-iterations",
        "2",
        "-o",
        "json",
    ]));
    assert_eq!(out.code, 1);
    let v = json(&out.stdout);
    assert_eq!(
        (&v["unsatisfiable"], &v["timing"]["reps"]),
        (&true.into(), &2.into())
    );
    let (code, err) = fails(&["--gpus", "1", "--time-iterations", "0"]);
    assert_eq!(code, 2);
    assert!(err.contains("--time-iterations"), "{err}");
    let help = run_expecting(subcommand("plan").arg("--help"), 0).stdout;
    assert!(!help.contains("time-iterations"), "hidden from --help");
}
