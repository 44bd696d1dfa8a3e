//! MIG instances in `discover`, `matrix`, `draw` and `profile show`: from a profile's
//! geometry, saved `nvidia-smi` output (`--mig-state`) and a planned mix (`--mig-want`),
//! each under its GPU with the parent's path and classes; the plain output unchanged
//! without MIG; clear errors for bad input.

use crate::common::{json, run_args, stdout_of, write_file};

/// `-lgi` of GPUs 0 and 1 (no UUIDs: joined by index).
const LGI: &str = "\
+-------------------------------------------------------+
| GPU instances:                                        |
| GPU   Name             Profile  Instance   Placement  |
|                          ID       ID       Start:Size |
|=======================================================|
|   0  MIG 3g.40gb          9        2          4:4     |
+-------------------------------------------------------+
|   0  MIG 4g.40gb          5        1          0:4     |
+-------------------------------------------------------+
|   1  MIG 7g.80gb          0        0          0:8     |
+-------------------------------------------------------+
";

#[test]
fn a_mig_profile_shows_its_instances_under_their_gpus_in_every_view() {
    let table = stdout_of(&["discover", "--profile", "dgx-a100-mig"]);
    let section = table.split("MIG instances\n").nth(1).unwrap();
    let rows: Vec<&str> = section
        .lines()
        .skip(1)
        .take_while(|l| l.starts_with("  MIG"))
        .collect();
    assert_eq!(rows.len(), 16, "{section}");
    assert!(
        rows[8].contains("GPU1") && rows[8].contains("3g.20gb"),
        "{}",
        rows[8]
    );
    assert!(
        rows[8].contains("4-7") && rows[8].contains("mlx5_1 PIX"),
        "{}",
        rows[8]
    );
    for line in table.lines() {
        assert!(line.chars().count() <= 100, "too wide: {line}");
    }

    let v = json(&stdout_of(&[
        "discover",
        "--profile",
        "dgx-h100-mig",
        "-o",
        "json",
    ]));
    let mig = v["mig"].as_array().unwrap();
    assert_eq!(mig.len(), 7 + 2 + 3 + 4);
    let last = &mig[15];
    assert_eq!(
        (
            &last["parent"],
            &last["profile"],
            &last["start"],
            &last["gi"]
        ),
        (&json("3"), &json("\"1g.10gb\""), &json("6"), &json("4"))
    );
    assert_eq!(last["parentBusId"], "0000:61:00.0");
    assert_eq!(last["closestNic"]["nic"], "mlx5_5");
    assert_eq!(last["closestNic"]["class"], "PIX");

    let yaml = stdout_of(&["profile", "show", "dgx-h100-mig", "-o", "yaml"]);
    assert!(
        yaml.contains("mig:") && yaml.contains("profile: 4g.40gb"),
        "{yaml}"
    );

    let m = json(&stdout_of(&[
        "matrix",
        "--profile",
        "dgx-a100-mig",
        "-o",
        "json",
    ]));
    let devices = m["devices"].as_array().unwrap().len();
    let rows = m["mig"].as_array().unwrap();
    assert_eq!(rows.len(), 16);
    assert_eq!(rows[7]["cells"].as_array().unwrap().len(), devices);
    let text = stdout_of(&["matrix", "--profile", "dgx-a100-mig"]);
    let gpu2 = text.lines().find(|l| l.starts_with("GPU2\t")).unwrap();
    let mig9 = text.lines().find(|l| l.starts_with("MIG9\t")).unwrap();
    assert_eq!(gpu2["GPU2".len()..], mig9["MIG9".len()..]);
    assert!(text.contains("MIG Legend:\n\n  MIG0: GPU0 1g.5gb @0 (GI 1, CI 0)\n"));

    let svg = stdout_of(&["draw", "--profile", "dgx-a100-mig"]);
    assert_eq!(svg.matches("class=\"mig-instance\"").count(), 16);
    let dot = stdout_of(&["draw", "--profile", "dgx-a100-mig", "-o", "dot"]);
    assert_eq!(dot.matches("subgraph \"cluster_gpu").count(), 4);
}

#[test]
fn without_mig_the_documents_are_the_plain_ones() {
    // dgx-h100-mig is dgx-h100 plus a geometry: drop the `mig` list and the name, and
    // the documents agree.
    for cmd in ["discover", "matrix"] {
        let plain = json(&stdout_of(&[cmd, "--profile", "dgx-h100", "-o", "json"]));
        let mut with = json(&stdout_of(&[
            cmd,
            "--profile",
            "dgx-h100-mig",
            "-o",
            "json",
        ]));
        assert!(
            with.as_object_mut().unwrap().remove("mig").is_some(),
            "{cmd}"
        );
        if cmd == "discover" {
            with["name"] = plain["name"].clone();
        }
        assert_eq!(with, plain, "{cmd}");
    }
    let text = stdout_of(&["matrix", "--profile", "dgx-h100"]);
    assert!(!text.contains("MIG"));
    let summary = stdout_of(&["discover", "--profile", "dgx-h100"]);
    assert!(!summary.contains("MIG instances"));
    let svg = stdout_of(&["draw", "--profile", "dgx-h100"]);
    assert!(!svg.contains("mig-instance"));
}

#[test]
fn saved_nvidia_smi_output_and_a_planned_mix_are_sources_too() {
    let dir = tempfile::tempdir().unwrap();
    write_file(dir.path(), "lgi.txt", LGI);
    let d = dir.path().to_str().unwrap();
    let v = json(&stdout_of(&[
        "discover",
        "--profile",
        "dgx-h100",
        "--mig-state",
        d,
        "-o",
        "json",
    ]));
    let mig = v["mig"].as_array().unwrap();
    let got: Vec<(u64, &str, u64, u64)> = mig
        .iter()
        .map(|r| {
            (
                r["parent"].as_u64().unwrap(),
                r["profile"].as_str().unwrap(),
                r["start"].as_u64().unwrap(),
                r["gi"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        got,
        vec![
            (0, "4g.40gb", 0, 1),
            (0, "3g.40gb", 4, 2),
            (1, "7g.80gb", 0, 0)
        ]
    );
    assert_eq!(mig[2]["parentBusId"], "0000:43:00.0");
    // A saved state overrides the profile's own geometry.
    let v = json(&stdout_of(&[
        "matrix",
        "--profile",
        "dgx-h100-mig",
        "--mig-state",
        d,
        "-o",
        "json",
    ]));
    assert_eq!(v["mig"].as_array().unwrap().len(), 3);

    let dot = stdout_of(&[
        "draw",
        "--profile",
        "dgx-h100",
        "--mig-want",
        "3g.40gb=2",
        "-o",
        "dot",
    ]);
    assert!(
        dot.contains("3g.40gb @0") && dot.contains("3g.40gb @4"),
        "{dot}"
    );
}

#[test]
fn bad_mig_input_exits_2_with_a_reason() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap();
    let check = |args: &[&str], want: &[&str]| {
        let out = run_args(args);
        assert_eq!(out.code, 2, "{args:?}: {}", out.stdout);
        for w in want {
            assert!(out.stderr.contains(w), "{args:?}: {}", out.stderr);
        }
    };
    // Nothing saved in the directory.
    check(
        &["discover", "--profile", "dgx-h100", "--mig-state", d],
        &["none of list.txt", "lgi.txt"],
    );
    // Truncated output: a row cut in the middle.
    let cut = &LGI[..LGI.find("4:4").unwrap() + 1];
    write_file(dir.path(), "lgi.txt", cut);
    check(
        &["matrix", "--profile", "dgx-h100", "--mig-state", d],
        &["lgi.txt"],
    );
    // A profile the model lacks (an A100 name on an H100).
    write_file(dir.path(), "lgi.txt", &LGI.replace("3g.40gb", "3g.20gb"));
    check(
        &["draw", "--profile", "dgx-h100", "--mig-state", d],
        &["3g.20gb"],
    );
    // Instances on a GPU model without MIG (L40S).
    write_file(dir.path(), "lgi.txt", LGI);
    check(
        &["discover", "--profile", "pcie-2socket", "--mig-state", d],
        &["NVIDIA L40S", "no known MIG profile table"],
    );
    // MIG on GPUs without MIG, and an unknown profile in a mix.
    check(
        &[
            "discover",
            "--profile",
            "mi300x-8",
            "--mig-want",
            "1g.10gb=1",
        ],
        &["--mig-want", "no NVIDIA GPU"],
    );
    check(
        &[
            "discover",
            "--profile",
            "dgx-h100",
            "--mig-want",
            "5g.50gb=1",
        ],
        &["--mig-want", "5g.50gb"],
    );
    // One source at a time.
    check(
        &[
            "discover",
            "--profile",
            "dgx-h100",
            "--mig-state",
            d,
            "--mig-want",
            "1g.10gb=1",
        ],
        &["cannot be used with"],
    );
}

#[test]
fn mig_uuids_from_nvidia_smi_l_show_in_the_table_and_json() {
    let topo = json(&stdout_of(&[
        "discover",
        "--profile",
        "dgx-h100",
        "-o",
        "json",
    ]));
    let uuid = |i: usize| topo["gpus"][i]["uuid"].as_str().unwrap().to_string();
    let list = format!(
        "GPU 0: NVIDIA H100 80GB HBM3 (UUID: {})\n  MIG 4g.40gb     Device  0: (UUID: MIG-0a6e3c51-2b7d-5e48-9f13-6d2c8b4a7e01)\n  MIG 3g.40gb     Device  1: (UUID: MIG-1b7f4d62-3c8e-5f59-8a24-7e3d9c5b8f12)\nGPU 1: NVIDIA H100 80GB HBM3 (UUID: {})\n  MIG 7g.80gb     Device  0: (UUID: MIG-2c805e73-4d9f-506a-9b35-8f4e0d6c9023)\n",
        uuid(0),
        uuid(1)
    );
    let dir = tempfile::tempdir().unwrap();
    write_file(dir.path(), "lgi.txt", LGI);
    write_file(dir.path(), "list.txt", &list);
    let d = dir.path().to_str().unwrap();
    let table = stdout_of(&["discover", "--profile", "dgx-h100", "--mig-state", d]);
    let row = table.lines().find(|l| l.contains("3g.40gb")).unwrap();
    assert!(
        row.contains("MIG-1b7f4d62-3c8e-5f59-8a24-7e3d9c5b8f12") && row.contains("mlx5_0 PIX"),
        "{row}"
    );
    for line in table.lines() {
        assert!(line.chars().count() <= 100, "too wide: {line}");
    }
    let v = json(&stdout_of(&[
        "discover",
        "--profile",
        "dgx-h100",
        "--mig-state",
        d,
        "-o",
        "json",
    ]));
    let last = &v["mig"][2];
    assert_eq!(last["uuid"], "MIG-2c805e73-4d9f-506a-9b35-8f4e0d6c9023");
    assert_eq!(last["parentUuid"], uuid(1).as_str());
    // A GPU UUID the topology lacks is refused, naming it.
    let out = run_args(&["discover", "--profile", "dgx-a100-mig", "--mig-state", d]);
    assert_eq!(out.code, 2);
    assert!(out.stderr.contains(&uuid(0)), "{}", out.stderr);
}
