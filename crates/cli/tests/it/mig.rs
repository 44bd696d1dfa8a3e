//! `topoalign mig plan`: the geometry in every output format, the fleet form, what
//! cannot be placed, and bad input (clear errors naming the flag, exit 2, no panic).

use crate::common::{json, run, run_args, run_expecting, stdout_of, subcommand, write_file};

fn mig_plan(extra: &[&str]) -> Vec<String> {
    let mut args = vec!["mig".to_string(), "plan".to_string()];
    args.extend(extra.iter().map(|s| s.to_string()));
    args
}

#[test]
fn json_is_the_documented_shape() {
    let args = mig_plan(&[
        "--model",
        "h100-80gb",
        "--gpus",
        "2",
        "--want",
        "3g.40gb=2,1g.10gb=4",
        "-o",
        "json",
    ]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let v = json(&stdout_of(&args));
    assert_eq!(v["model"], "h100-80gb");
    assert_eq!(v["placed"], serde_json::json!({"3g.40gb": 2, "1g.10gb": 4}));
    assert_eq!(v["unplaced"], serde_json::json!({}));
    assert!(v.get("reasons").is_none());
    let gpus = v["gpus"].as_array().unwrap();
    assert_eq!(gpus.len(), 2);
    assert_eq!(
        gpus[0],
        serde_json::json!({"index": 0, "instances": [
            {"profile": "3g.40gb", "start": 0}, {"profile": "3g.40gb", "start": 4}
        ]})
    );
    assert_eq!(gpus[1]["instances"].as_array().unwrap().len(), 4);
    // The keys are in this order, always.
    let text = stdout_of(&args);
    let order: Vec<usize> = ["\"model\"", "\"gpus\"", "\"placed\"", "\"unplaced\""]
        .iter()
        .map(|k| text.find(k).unwrap())
        .collect();
    assert!(order.windows(2).all(|w| w[0] < w[1]), "{text}");
}

#[test]
fn table_shows_placements_and_nvidia_smi_commands() {
    let out = stdout_of(&[
        "mig",
        "plan",
        "--model",
        "a100-40gb",
        "--gpus",
        "1",
        "--want",
        "4g.20gb=1,2g.10gb=1,1g.5gb=1",
    ]);
    assert!(out.contains("4g.20gb@0 2g.10gb@4 1g.5gb@6"), "{out}");
    assert!(out.contains("nvidia-smi mig -i 0 -cgi 5:0 -C"), "{out}");
    assert!(out.contains("nvidia-smi mig -i 0 -cgi 14:4 -C"), "{out}");
    assert!(out.contains("nvidia-smi mig -i 0 -cgi 19:6 -C"), "{out}");
    assert!(out.contains("Unplaced:  none"), "{out}");
}

#[test]
fn yaml_and_mig_parted() {
    let base = [
        "mig",
        "plan",
        "--model",
        "gb300",
        "--gpus",
        "4",
        "--want",
        "4g.139gb=4,3g.139gb=4",
    ];
    let yaml = stdout_of(&[&base[..], &["-o", "yaml"]].concat());
    assert!(yaml.contains("model: gb300"), "{yaml}");
    assert!(yaml.contains("profile: 4g.139gb"), "{yaml}");
    let parted = stdout_of(&[&base[..], &["-o", "mig-parted", "--config-name", "mix"]].concat());
    assert_eq!(
        parted,
        "version: v1\nmig-configs:\n  mix:\n    - devices: all\n      mig-enabled: true\n      mig-devices:\n        \"4g.139gb\": 1\n        \"3g.139gb\": 1\n"
    );
}

#[test]
fn a_fleet_of_1000_nodes_plans_and_groups_nodes() {
    let out = run_expecting(
        subcommand("mig").args([
            "plan",
            "--model",
            "h100-80gb",
            "--gpus",
            "8",
            "--nodes",
            "1000",
            "--want",
            "7g.80gb=4000,3g.40gb=6000,1g.10gb=7",
        ]),
        0,
    )
    .stdout;
    assert!(out.contains("GPUs:      8000 (1000 nodes × 8)"), "{out}");
    assert!(out.contains("Nodes 0-499 (500 nodes):"), "{out}");
    let v = json(
        &run_expecting(
            subcommand("mig").args([
                "plan",
                "--model",
                "h100-80gb",
                "--gpus",
                "8",
                "--nodes",
                "1000",
                "--want",
                "7g.80gb=4000",
                "-o",
                "json",
            ]),
            0,
        )
        .stdout,
    );
    assert_eq!(v["nodes"], 1000);
    assert_eq!(v["gpus"].as_array().unwrap().len(), 8000);
    assert_eq!(
        v["gpus"][8],
        serde_json::json!({"node": 1, "index": 0, "instances": [{"profile": "7g.80gb", "start": 0}]})
    );
}

#[test]
fn what_cannot_be_placed_is_named_with_the_reason() {
    let out = run_args(&[
        "mig",
        "plan",
        "--model",
        "h100-80gb",
        "--gpus",
        "4",
        "--want",
        "3g.40gb=10",
        "-o",
        "json",
    ]);
    assert_eq!(out.code, 1, "{}", out.stderr);
    let v = json(&out.stdout);
    assert_eq!(v["placed"], serde_json::json!({"3g.40gb": 8}));
    assert_eq!(v["unplaced"], serde_json::json!({"3g.40gb": 2}));
    assert_eq!(
        v["reasons"][0],
        "2 × 3g.40gb: 4 GPUs hold at most 8 × 3g.40gb (2 per GPU), 10 wanted"
    );
    let table = run_args(&[
        "mig",
        "plan",
        "--model",
        "h100-80gb",
        "--gpus",
        "1",
        "--want",
        "1g.10gb+me=2",
    ]);
    assert_eq!(table.code, 1);
    assert!(
        table.stdout.contains("Unplaced:  1 × 1g.10gb+me"),
        "{}",
        table.stdout
    );
    assert!(table.stdout.contains("(1 per GPU)"), "{}", table.stdout);
}

#[test]
fn bad_input_names_the_flag_and_what_was_expected() {
    let cases: [(&[&str], &[&str]); 8] = [
        (
            &["--model", "v100", "--gpus", "1", "--want", "1g.5gb=1"],
            &["--model", "unknown GPU model `v100`", "a100-40gb"],
        ),
        (
            &[
                "--model",
                "gh200-144gb",
                "--gpus",
                "1",
                "--want",
                "1g.5gb=1",
            ],
            &["--model", "no built-in MIG profile table"],
        ),
        (
            &["--model", "h100-80gb", "--gpus", "1", "--want", "3g.20gb=1"],
            &[
                "--want",
                "unknown profile `3g.20gb` for h100-80gb",
                "7g.80gb",
            ],
        ),
        (
            &["--model", "h100-80gb", "--gpus", "1", "--want", "3g.40gb=0"],
            &["--want", "positive integer"],
        ),
        (
            &[
                "--model",
                "h100-80gb",
                "--gpus",
                "1",
                "--want",
                "3g.40gb=two",
            ],
            &["--want", "positive integer"],
        ),
        (
            &["--model", "h100-80gb", "--gpus", "1", "--want", "3g.40gb"],
            &["--want", "PROFILE=COUNT"],
        ),
        (
            &["--model", "h100-80gb", "--gpus", "0", "--want", "3g.40gb=1"],
            &["--gpus"],
        ),
        (
            &[
                "--model",
                "h100-80gb",
                "--gpus",
                "1",
                "--nodes",
                "0",
                "--want",
                "3g.40gb=1",
            ],
            &["--nodes"],
        ),
    ];
    for (args, needles) in cases {
        let out = run(subcommand("mig").arg("plan").args(args));
        assert_eq!(out.code, 2, "{args:?}\n{}", out.stderr);
        assert!(!out.stderr.contains("panicked"), "{}", out.stderr);
        for n in needles {
            assert!(
                out.stderr.contains(n),
                "{args:?}: `{n}` not in\n{}",
                out.stderr
            );
        }
    }
    // With JSON output a reader of stdout still gets a document.
    let out = run_args(&[
        "mig",
        "plan",
        "--model",
        "h100-80gb",
        "--gpus",
        "1",
        "--want",
        "9g.1gb=1",
        "-o",
        "json",
    ]);
    assert_eq!(out.code, 2);
    assert!(
        json(&out.stdout)["error"]
            .as_str()
            .unwrap()
            .contains("--want")
    );
}

#[test]
fn pods_each_sit_on_one_node() {
    let dir = tempfile::tempdir().unwrap();
    let yaml = "pods:\n- name: trainer\n  replicas: 3\n  want: {3g.40gb: 3}\n- name: tiny\n  want: 1g.10gb=7\n";
    let file = write_file(dir.path(), "pods.yaml", yaml);
    let f = file.to_str().unwrap();
    let base = [
        "mig",
        "plan",
        "--model",
        "h100-80gb",
        "--gpus",
        "4",
        "--nodes",
        "2",
        "--pods",
        f,
    ];
    let v = json(&stdout_of(&[&base[..], &["-o", "json"]].concat()));
    assert_eq!(v["placed"], serde_json::json!({"3g.40gb": 9, "1g.10gb": 7}));
    assert_eq!(
        v["pods"],
        serde_json::json!([
            {"name": "trainer-0", "node": 0}, {"name": "trainer-1", "node": 0},
            {"name": "trainer-2", "node": 1}, {"name": "tiny", "node": 0}
        ])
    );
    let table = stdout_of(&base);
    assert!(table.contains("trainer-2  1"), "{table}");
    // On one node the third trainer cannot sit beside the other two.
    let out = run_args(&[
        "mig",
        "plan",
        "--model",
        "h100-80gb",
        "--gpus",
        "4",
        "--pods",
        f,
        "-o",
        "json",
    ]);
    assert_eq!(out.code, 1, "{}", out.stderr);
    let v = json(&out.stdout);
    assert_eq!(v["pods"][2]["node"], serde_json::Value::Null);
    assert!(
        v["reasons"][0].as_str().unwrap().contains("pod trainer-2"),
        "{v}"
    );
    // Bad files name the flag, the file and the pod.
    let bad = write_file(
        dir.path(),
        "bad.yaml",
        "pods:\n- name: x\n  want: {3g.20gb: 1}\n",
    );
    let out = run_args(&[
        "mig",
        "plan",
        "--model",
        "h100-80gb",
        "--gpus",
        "1",
        "--pods",
        bad.to_str().unwrap(),
    ]);
    assert_eq!(out.code, 2);
    assert!(
        out.stderr.contains("--pods") && out.stderr.contains("pod `x`: unknown profile `3g.20gb`"),
        "{}",
        out.stderr
    );
    let shape = write_file(dir.path(), "shape.yaml", "- name: x\n");
    let out = run_args(&[
        "mig",
        "plan",
        "--model",
        "h100-80gb",
        "--gpus",
        "1",
        "--pods",
        shape.to_str().unwrap(),
    ]);
    assert_eq!(out.code, 2);
    assert!(out.stderr.contains("expected {pods: ["), "{}", out.stderr);
    let out = run_args(&[
        "mig",
        "plan",
        "--model",
        "h100-80gb",
        "--gpus",
        "1",
        "--pods",
        f,
        "--want",
        "3g.40gb=1",
    ]);
    assert_eq!(out.code, 2);
    let out = run_args(&["mig", "plan", "--model", "h100-80gb", "--gpus", "1"]);
    assert_eq!(out.code, 2);
    assert!(out.stderr.contains("--want"), "{}", out.stderr);
}
