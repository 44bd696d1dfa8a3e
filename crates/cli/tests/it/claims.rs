//! `topoalign claims` end to end.

use crate::common::{json, run, run_expecting, subcommand, test_data, write_file};
use serde_json::Value;

fn claims(args: &[&str], code: i32) -> crate::common::Outcome {
    run_expecting(subcommand("claims").args(args), code)
}

#[test]
fn default_is_a_template_in_yaml_with_one_pairs_request() {
    let out = claims(&["--pairs", "4"], 0);
    let v: Value = serde_saphyr::from_str(&out.stdout).unwrap();
    assert_eq!(v["apiVersion"], "resource.k8s.io/v1");
    assert_eq!(v["kind"], "ResourceClaimTemplate");
    assert_eq!(v["metadata"]["name"], "gpu-nic-pairs-4");
    let req = &v["spec"]["spec"]["devices"]["requests"][0];
    assert_eq!(req["name"], "pairs");
    assert_eq!(
        req["exactly"]["deviceClassName"],
        "gpu-nic-pair.topoalign.dev"
    );
    assert_eq!(req["exactly"]["count"], 4);
}

#[test]
fn claim_with_options_in_json() {
    let out = claims(
        &[
            "--pairs",
            "2",
            "--claim",
            "--name",
            "train",
            "--namespace",
            "ml",
            "--max-class",
            "PXB",
            "--require-gdr",
            "-o",
            "json",
        ],
        0,
    );
    let v = json(&out.stdout);
    assert_eq!(v["kind"], "ResourceClaim");
    assert_eq!(v["metadata"]["namespace"], "ml");
    let sel: Vec<&str> = v["spec"]["devices"]["requests"][0]["exactly"]["selectors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["cel"]["expression"].as_str().unwrap())
        .collect();
    assert_eq!(
        sel,
        vec![
            r#"device.attributes["topoalign.dev"]["rank"] <= 1"#,
            r#"device.attributes["topoalign.dev"]["gdr"]"#
        ]
    );
}

#[test]
fn ladder_and_table() {
    let out = claims(&["--pairs", "2", "--ladder", "-o", "table"], 0);
    assert!(out.stdout.contains("gpu-0/switch"), "{}", out.stdout);
    assert!(
        out.stdout
            .contains("match topoalign.dev/numaNode over gpu-0/numa, nic-0"),
        "{}",
        out.stdout
    );
}

#[test]
fn explain_on_a_profile_matches_the_planner() {
    let out = claims(
        &[
            "--pairs",
            "4",
            "--explain",
            "--profile",
            "mi300x-8",
            "-o",
            "json",
        ],
        0,
    );
    let v = json(&out.stdout);
    let e = &v["explanation"];
    assert_eq!(e["asGood"], true);
    assert_eq!(e["allocator"]["worst"], "PIX");
    assert_eq!(e["planner"]["worst"], "PIX");
    assert_eq!(v["claim"]["kind"], "ResourceClaimTemplate");
}

#[test]
fn explain_with_used_devices_and_table_output() {
    let dir = tempfile::tempdir().unwrap();
    let used = write_file(
        dir.path(),
        "used.yaml",
        "gpus: [\"0000:11:00.0\", \"0000:2f:00.0\"]\n",
    );
    let out = claims(
        &[
            "--pairs",
            "2",
            "--explain",
            "--profile",
            "mi300x-8",
            "--used",
            used.to_str().unwrap(),
            "-o",
            "table",
        ],
        0,
    );
    assert!(
        out.stdout
            .contains("stock allocator (first fit): worst PIX"),
        "{}",
        out.stdout
    );
    assert!(
        !out.stdout.contains("GPU 0000:11:00.0"),
        "a used GPU was chosen:\n{}",
        out.stdout
    );
    // An unknown device in --used is an error naming it.
    let bad = write_file(dir.path(), "bad.yaml", "gpus: [\"0000:99:00.0\"]\n");
    let out = claims(
        &[
            "--pairs",
            "1",
            "--explain",
            "--profile",
            "mi300x-8",
            "--used",
            bad.to_str().unwrap(),
        ],
        2,
    );
    assert!(out.stderr.contains("0000:99:00.0"), "{}", out.stderr);
}

#[test]
fn explain_reports_an_unsatisfiable_claim_as_a_finding() {
    let out = claims(
        &[
            "--pairs",
            "3",
            "--explain",
            "--profile",
            "pcie-2socket",
            "-o",
            "table",
        ],
        0,
    );
    assert!(
        out.stdout.contains("stock allocator: no solution"),
        "{}",
        out.stdout
    );
}

#[test]
fn seed001_slices_give_the_pinned_claim() {
    let slices = test_data("dra", "fixtures/seed001-gb300-slices.json");
    let out = claims(
        &[
            "--pairs",
            "1",
            "--from-slices",
            slices.to_str().unwrap(),
            "--node",
            "aks-gb300-0",
            "--profile",
            "gb300-4",
            "--nic-class",
            "dranet",
            "-o",
            "json",
        ],
        0,
    );
    let v = json(&out.stdout);
    let reqs = v["spec"]["spec"]["devices"]["requests"].as_array().unwrap();
    assert_eq!(reqs.len(), 2);
    assert_eq!(
        reqs[0]["exactly"]["selectors"][0]["cel"]["expression"],
        r#"device.attributes["resource.kubernetes.io"]["pciBusID"] == "0008:06:00.0""#
    );
    assert_eq!(reqs[1]["exactly"]["deviceClassName"], "dranet");
    assert!(
        out.stderr.contains("note: pinned to devices of node aks-gb300-0: gpu-0 + pci-0101-00-00-0 (NODE); it serves one pod at a time"),
        "{}",
        out.stderr
    );
    assert!(
        !out.stderr.contains('{'),
        "notes are sentences, not JSON: {}",
        out.stderr
    );
    // --explain: the stock allocator takes exactly the pinned devices.
    let out = claims(
        &[
            "--pairs",
            "1",
            "--from-slices",
            slices.to_str().unwrap(),
            "--node",
            "aks-gb300-0",
            "--profile",
            "gb300-4",
            "--explain",
            "-o",
            "json",
        ],
        0,
    );
    let v = json(&out.stdout);
    assert_eq!(v["explanation"]["allocator"]["worst"], "NODE");
    assert_eq!(v["explanation"]["asGood"], true);
    assert_eq!(
        v["claim"]["spec"]["spec"]["devices"]["requests"][1]["exactly"]["deviceClassName"],
        "dranet.net",
        "dranet users' class by default"
    );
}

/// The NVIDIA GPU driver (without its newest NUMA attribute) beside dranet: without the
/// node's topology, which NIC is near which GPU is unknown, so the claim is refused with
/// what is missing and the flags that supply it, on stderr only (stdout is for kubectl),
/// with or without --explain, in every format.
#[test]
fn pairing_blind_is_refused_and_names_the_flags() {
    let slices = test_data("dra", "fixtures/seed001-gb300-slices.json");
    for extra in [
        &[][..],
        &["--explain"][..],
        &["-o", "json", "--explain"][..],
    ] {
        let mut args = vec![
            "--pairs",
            "1",
            "--from-slices",
            slices.to_str().unwrap(),
            "--node",
            "aks-gb300-0",
        ];
        args.extend_from_slice(extra);
        let out = claims(&args, 2);
        assert_eq!(out.stdout, "", "nothing for kubectl to apply");
        for want in [
            "cannot tell which NICs are near which GPUs",
            "4 of 4 GPUs of gpu.nvidia.com",
            "--profile NAME",
            "--sysfs-root DIR",
            "--from-nvidia-smi FILE",
            "--from-nccl-xml FILE",
        ] {
            assert!(
                out.stderr.contains(want),
                "{want:?} missing:\n{}",
                out.stderr
            );
        }
    }
}

/// DeviceClasses saved beside the slices name the classes the claim uses.
#[test]
fn device_classes_in_the_slices_file_are_used() {
    let dir = tempfile::tempdir().unwrap();
    let slices =
        std::fs::read_to_string(test_data("dra", "fixtures/seed001-gb300-slices.json")).unwrap();
    let mut v = json(&slices);
    v["items"].as_array_mut().unwrap().push(serde_json::json!({
        "apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass",
        "metadata": {"name": "ib-nics"},
        "spec": {"selectors": [{"cel": {"expression": "device.driver == \"dra.net\""}}]}
    }));
    let f = write_file(dir.path(), "with-classes.json", &v.to_string());
    let out = claims(
        &[
            "--pairs",
            "1",
            "--from-slices",
            f.to_str().unwrap(),
            "--node",
            "aks-gb300-0",
            "--profile",
            "gb300-4",
            "-o",
            "json",
        ],
        0,
    );
    let v = json(&out.stdout);
    assert_eq!(
        v["spec"]["spec"]["devices"]["requests"][1]["exactly"]["deviceClassName"],
        "ib-nics"
    );
}

#[test]
fn bad_input_gets_one_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let cases: Vec<(Vec<String>, &str)> = vec![
        (vec!["--pairs".into(), "0".into()], "at least 1"),
        (vec!["--pairs".into(), "40".into()], "at most 32"),
        (
            vec![
                "--pairs".into(),
                "2".into(),
                "--max-class".into(),
                "SYS".into(),
            ],
            "not published",
        ),
        (
            vec![
                "--pairs".into(),
                "2".into(),
                "--max-class".into(),
                "FOO".into(),
            ],
            "--max-class",
        ),
        (
            vec![
                "--pairs".into(),
                "2".into(),
                "--name".into(),
                "Bad_Name".into(),
            ],
            "Bad_Name",
        ),
        (
            vec![
                "--pairs".into(),
                "1".into(),
                "--from-slices".into(),
                write_file(
                    dir.path(),
                    "pod.yaml",
                    "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\n",
                )
                .display()
                .to_string(),
                "--node".into(),
                "n".into(),
            ],
            "expected ResourceSlice",
        ),
        (
            vec![
                "--pairs".into(),
                "1".into(),
                "--from-slices".into(),
                write_file(dir.path(), "broken.yaml", "kind: [unclosed\n")
                    .display()
                    .to_string(),
                "--node".into(),
                "n".into(),
            ],
            "broken.yaml",
        ),
        (
            vec![
                "--pairs".into(),
                "1".into(),
                "--from-slices".into(),
                test_data("dra", "fixtures/seed001-gb300-slices.json")
                    .display()
                    .to_string(),
                "--node".into(),
                "other-node".into(),
            ],
            "other-node",
        ),
    ];
    for (args, want) in cases {
        let out = run(subcommand("claims").args(&args));
        assert_eq!(out.code, 2, "{args:?}: {}", out.stderr);
        assert!(
            out.stderr.contains(want),
            "{args:?}: {} lacks {want}",
            out.stderr
        );
        assert!(!out.stderr.contains("panicked"), "{}", out.stderr);
    }
}

/// The DaemonSet in deploy/ passes only flags `topoalign driver` knows.
#[test]
fn deploy_daemonset_uses_real_driver_flags() {
    let help = run_expecting(subcommand("driver").arg("--help"), 0).stdout;
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../deploy/daemonset.yaml");
    let ds: Value = serde_saphyr::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let args = ds["spec"]["template"]["spec"]["containers"][0]["args"]
        .as_array()
        .unwrap();
    assert_eq!(args[0], "driver");
    for a in &args[1..] {
        let flag = a.as_str().unwrap().split('=').next().unwrap();
        assert!(
            help.contains(flag),
            "{flag} is not a flag of topoalign driver"
        );
    }
}

/// The node-independent template for other drivers: no device or node named; with
/// slices (several files, stdin) what the allocator gives each pair on every node.
#[test]
fn the_vendor_template_names_no_device_and_reports_each_node() {
    let out = claims(
        &[
            "--pairs",
            "2",
            "--gpu-class",
            "gpu.nvidia.com",
            "--nic-class",
            "dranet.net",
            "-o",
            "json",
        ],
        0,
    );
    let v = json(&out.stdout);
    let devices = &v["spec"]["spec"]["devices"];
    let reqs = devices["requests"].as_array().unwrap();
    assert_eq!(reqs.len(), 4);
    let subs: Vec<&str> = reqs[1]["firstAvailable"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["name"].as_str().unwrap())
        .collect();
    assert_eq!(subs, ["root", "numa"]);
    assert!(!out.stdout.contains("pciBusID\"] =="), "nothing pinned");
    assert_eq!(
        devices["constraints"].as_array().unwrap().last().unwrap()["distinctAttribute"],
        "resource.kubernetes.io/pciBusID"
    );
    let h100 = test_data("dra", "fixtures/vendor/nvidia-v05-dranet-h100.yaml");
    let cpu = test_data("dra", "fixtures/vendor/dra-cpu.yaml");
    let out = claims(
        &[
            "--pairs",
            "1",
            "--from-slices",
            h100.to_str().unwrap(),
            cpu.to_str().unwrap(),
        ],
        0,
    );
    assert!(
        out.stdout.contains("kind: ResourceClaimTemplate"),
        "{}",
        out.stdout
    );
    for want in [
        "node h100-a: fits",
        "pair 0: gpu-1 (0000:2c:00.0) + mlx5_0: rung root, PHB",
        "pci-0000-c1-00-0 left out: publishes no NUMA node",
    ] {
        assert!(
            out.stderr.contains(want),
            "{want:?} missing:\n{}",
            out.stderr
        );
    }
    // stdin, --explain, JSON: the nodes in the output.
    let text = std::fs::read_to_string(&h100).unwrap();
    let out = run_expecting(
        subcommand("claims")
            .args([
                "--pairs",
                "4",
                "--from-slices",
                "-",
                "--explain",
                "-o",
                "json",
            ])
            .write_stdin(text),
        0,
    );
    let v = json(&out.stdout);
    let node = &v["nodes"][0];
    assert_eq!(node["node"], "h100-a");
    assert_eq!(node["worst"], "PHB");
    let gpus: Vec<&str> = node["pairs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["gpu"].as_str().unwrap())
        .collect();
    assert_eq!(gpus, ["gpu-1", "gpu-3", "gpu-5", "gpu-7"]);
    // AMD and SR-IOV: no NUMA rung can apply (different NUMA keys).
    let amd = test_data("dra", "fixtures/vendor/amd-sriov-mi300x.yaml");
    let out = claims(
        &[
            "--pairs",
            "1",
            "--gpu-class",
            "gpu.amd.com",
            "--nic-class",
            "sriov-rdma",
            "--nic-driver",
            "sriovnetwork.k8snetworkplumbingwg.io",
            "--from-slices",
            amd.to_str().unwrap(),
            "-o",
            "table",
        ],
        0,
    );
    assert!(
        out.stderr.contains("the NUMA rungs never apply here: the GPUs publish their NUMA node as gpu.amd.com/numaNode and the NICs as dra.net/numaNode"),
        "{}",
        out.stderr
    );
    assert!(out.stderr.contains("rung root"), "{}", out.stderr);
}

#[test]
fn vendor_template_input_errors() {
    let dir = tempfile::tempdir().unwrap();
    let h100 = test_data("dra", "fixtures/vendor/nvidia-v05-dranet-h100.yaml");
    let changed =
        std::fs::read_to_string(&h100)
            .unwrap()
            .replacen("generation: 1", "generation: 2", 1);
    let late = write_file(dir.path(), "late.yaml", &changed);
    let cpu = test_data("dra", "fixtures/vendor/dra-cpu.yaml");
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (
            vec!["--pairs", "1", "--gpu-class", "gpu.nvidia.com", "--explain"],
            "--explain with --gpu-class/--nic-class needs the nodes' slices",
        ),
        (
            vec![
                "--pairs",
                "1",
                "--from-slices",
                h100.to_str().unwrap(),
                late.to_str().unwrap(),
            ],
            "with different content",
        ),
        (
            vec!["--pairs", "1", "--from-slices", cpu.to_str().unwrap()],
            "no node has devices of both gpu.nvidia.com and dra.net",
        ),
        (
            vec!["--pairs", "11", "--gpu-class", "gpu.nvidia.com"],
            "at most 10 pairs",
        ),
        (
            vec!["--pairs", "1", "--from-slices", "-", "-"],
            "given twice",
        ),
        (
            vec![
                "--pairs",
                "2",
                "--gpu-class",
                "gpu.nvidia.com",
                "--cpus",
                "0",
            ],
            "--cpus must be at least 1",
        ),
        (
            vec![
                "--pairs",
                "2",
                "--gpu-class",
                "gpu.nvidia.com",
                "--cpus",
                "64",
                "--cpu-mode",
                "individual",
            ],
            "--cpu-mode grouped",
        ),
        (
            vec![
                "--pairs",
                "1",
                "--gpu-class",
                "gpu.nvidia.com",
                "--cpus",
                "4",
                "--node",
                "h100-a",
                "--from-slices",
                h100.to_str().unwrap(),
            ],
            "--cpus with --node",
        ),
    ];
    for (args, want) in cases {
        let out = run(subcommand("claims").args(&args));
        assert_eq!(out.code, 2, "{args:?}: {}", out.stderr);
        assert!(
            out.stderr.contains(want),
            "{args:?}: {} lacks {want}",
            out.stderr
        );
        assert_eq!(out.stdout, "", "{args:?}");
    }
}
