//! Tests of [`crate::read_state`] on the fixtures in `tests/data/` (hand-written in the
//! real `nvidia-smi` formats).

use crate::export::nvidia_smi_commands;
use crate::geometry::{GeometryError, Placement};
use crate::mix::parse_mix;
use crate::model::lookup;
use crate::planner::{GeometryRequest, plan};
use crate::read_state::{MigOutputs, MigState, model_for_name, read_state};
use crate::read_table::{ReadError, SavedOutput};

const H100_LIST: &str = include_str!("../tests/data/h100-mixed/list.txt");
const H100_LGI: &str = include_str!("../tests/data/h100-mixed/lgi.txt");
const H100_LCI: &str = include_str!("../tests/data/h100-mixed/lci.txt");
const H100_LGIPP: &str = include_str!("../tests/data/h100-mixed/lgipp.txt");

fn h100(lgi: &str) -> Result<MigState, ReadError> {
    read_state(&MigOutputs {
        list: Some(SavedOutput::new("L.txt", H100_LIST)),
        lgi: Some(SavedOutput::new("lgi.txt", lgi)),
        ..MigOutputs::default()
    })
}

/// The H100 `-lgi` fixture's header and one table holding `rows`.
fn lgi_table(rows: &[&str]) -> String {
    let mut t: Vec<&str> = H100_LGI.lines().take(5).collect();
    for r in rows {
        t.push(r);
        t.push("+-------------------------------------------------------+");
    }
    t.join("\n")
}

fn p(profile: &str, start: u8) -> Placement {
    Placement {
        profile: profile.into(),
        start,
    }
}

#[test]
fn mixed_h100_geometry_with_compute_instances_and_uuids() {
    let state = read_state(&MigOutputs {
        list: Some(SavedOutput::new("L.txt", H100_LIST)),
        lgi: Some(SavedOutput::new("lgi.txt", H100_LGI)),
        lci: Some(SavedOutput::new("lci.txt", H100_LCI)),
        lgipp: Some(SavedOutput::new("lgipp.txt", H100_LGIPP)),
        model: None,
    })
    .unwrap();
    assert_eq!(state.gpus.len(), 3);
    let g0 = state.gpu(0).unwrap();
    assert_eq!(g0.model.map(|m| m.name), Some("h100-80gb"));
    assert_eq!(
        g0.uuid.as_deref(),
        Some("GPU-3b1f6c2e-8d4a-4f7b-9e21-5c0d7a9b4e10")
    );
    assert_eq!(
        g0.placements(),
        [
            p("2g.20gb", 0),
            p("1g.10gb", 2),
            p("1g.10gb", 3),
            p("3g.40gb", 4)
        ]
    );
    let ids: Vec<_> = g0
        .instances
        .iter()
        .map(|i| (i.id, i.profile_id, i.size))
        .collect();
    assert_eq!(ids, [(3, 14, 2), (9, 19, 1), (10, 19, 1), (2, 9, 4)]);
    // One compute instance each; the 3g's fills it (3 compute slices).
    assert!(g0.instances.iter().all(|i| i.compute_instances.len() == 1));
    assert_eq!(g0.instances[3].compute_instances[0].placement, Some((0, 3)));
    // 3g.40gb and 2g.20gb are the only instances of their profile: their UUIDs match.
    // The two 1g.10gb devices could belong to either 1g.10gb instance: left unmatched.
    assert_eq!(
        g0.instances[3].mig_devices[0].uuid,
        "MIG-0a6e3c51-2b7d-5e48-9f13-6d2c8b4a7e01"
    );
    assert_eq!(g0.instances[0].mig_devices.len(), 1);
    assert!(g0.instances[1].mig_devices.is_empty());
    let unmatched: Vec<_> = g0.unmatched_devices.iter().map(|d| d.device).collect();
    assert_eq!(unmatched, [2, 3]);
    assert_eq!(g0.possible_placements.len(), 7);
    // GPU 1: the 3g.40gb instance holds two compute instances, and both MIG devices
    // (`1c.3g.40gb`, `2c.3g.40gb`) belong to it.
    let g1 = state.gpu(1).unwrap();
    let gi1 = g1.instances.iter().find(|i| i.id == 1).unwrap();
    let cis: Vec<_> = gi1
        .compute_instances
        .iter()
        .map(|c| (c.profile.as_str(), c.id))
        .collect();
    assert_eq!(cis, [("1c.3g.40gb", 0), ("2c.3g.40gb", 1)]);
    assert_eq!(gi1.mig_devices.len(), 2);
    assert_eq!(g1.unmatched_devices.len(), 2);
    // GPU 2: listed by -L, no MIG devices, no instances: an empty GPU.
    let g2 = state.gpu(2).unwrap();
    assert!(g2.instances.is_empty() && g2.unmatched_devices.is_empty());
    assert_eq!(g2.model.map(|m| m.name), Some("h100-80gb"));
    // Serializes with the model by name.
    let json = serde_json::to_value(&state).unwrap();
    assert_eq!(json["gpus"][0]["model"], "h100-80gb");
    assert_eq!(json["gpus"][0]["instances"][3]["profile"], "3g.40gb");
}

#[test]
fn a100_40gb_with_seven_1g_instances() {
    let state = read_state(&MigOutputs {
        list: Some(SavedOutput::new(
            "L.txt",
            include_str!("../tests/data/a100-40-7x1g/list.txt"),
        )),
        lgi: Some(SavedOutput::new(
            "lgi.txt",
            include_str!("../tests/data/a100-40-7x1g/lgi.txt"),
        )),
        lci: Some(SavedOutput::new(
            "lci.txt",
            include_str!("../tests/data/a100-40-7x1g/lci-old.txt"),
        )),
        ..MigOutputs::default()
    })
    .unwrap();
    let g = state.gpu(0).unwrap();
    assert_eq!(g.model.map(|m| m.name), Some("a100-40gb"));
    assert_eq!(
        g.placements(),
        (0..7).map(|s| p("1g.5gb", s)).collect::<Vec<_>>()
    );
    // Legacy `MIG-GPU-<uuid>/<gi>/<ci>` UUIDs name the instance: every device matches.
    assert!(g.unmatched_devices.is_empty());
    for (i, gi) in g.instances.iter().enumerate() {
        assert_eq!(gi.id, 7 + u32::try_from(i).unwrap());
        assert_eq!(gi.mig_devices.len(), 1);
        assert!(gi.mig_devices[0].uuid.ends_with(&format!("/{}/0", gi.id)));
        assert_eq!(gi.compute_instances[0].placement, None);
    }
}

#[test]
fn empty_and_disabled_gpus_have_no_instances() {
    let list = "GPU 0: NVIDIA H200 (UUID: GPU-9a0b1c2d-3e4f-4a5b-8c6d-7e8f9a0b1c2d)\n";
    for lgi in [
        "No GPU instances found: Not Found\n",
        "No MIG-enabled devices found.\n",
    ] {
        let state = read_state(&MigOutputs {
            list: Some(SavedOutput::new("L.txt", list)),
            lgi: Some(SavedOutput::new("lgi.txt", lgi)),
            lci: Some(SavedOutput::new(
                "lci.txt",
                "No compute instances found: Not Found",
            )),
            lgipp: Some(SavedOutput::new(
                "lgipp.txt",
                "No MIG-enabled devices found.",
            )),
            model: None,
        })
        .unwrap();
        assert_eq!(state.gpus.len(), 1);
        assert_eq!(state.gpus[0].model.map(|m| m.name), Some("h200-141gb"));
        assert!(state.gpus[0].instances.is_empty());
    }
    assert_eq!(
        read_state(&MigOutputs::default()),
        Ok(MigState { gpus: vec![] })
    );
}

#[test]
fn gpu_names_map_to_the_models_the_table_has() {
    let cases = [
        ("NVIDIA A100-SXM4-40GB", Some("a100-40gb")),
        ("A100-PCIE-40GB", Some("a100-40gb")),
        ("NVIDIA A100-SXM4-80GB", Some("a100-80gb")),
        ("NVIDIA A100 80GB PCIe", Some("a100-80gb")),
        ("NVIDIA H100 80GB HBM3", Some("h100-80gb")),
        ("NVIDIA H100 PCIe", Some("h100-80gb")),
        ("NVIDIA H100 NVL", Some("h100-94gb")),
        ("NVIDIA H200", Some("h200-141gb")),
        ("NVIDIA H200 NVL", Some("h200-141gb")),
        ("NVIDIA B200", Some("b200")),
        ("NVIDIA GB200", Some("gb200")),
        ("NVIDIA B300 SXM6 AC", Some("b300")),
        ("NVIDIA GB300", Some("gb300")),
        ("NVIDIA GH200 480GB", None),
        ("NVIDIA A30", None),
        ("NVIDIA A800-SXM4-80GB", None),
        ("NVIDIA RTX PRO 6000 Blackwell Server Edition", None),
    ];
    for (name, want) in cases {
        assert_eq!(model_for_name(name).map(|m| m.name), want, "{name}");
    }
}

#[test]
fn readings_that_break_the_rules_name_the_gpu_and_instance() {
    // 4g.40gb can only start at 0.
    let e = h100(&lgi_table(&[
        "|   0  MIG 3g.40gb          9        1          0:4     |",
        "|   0  MIG 4g.40gb          5        5          4:4     |",
    ]))
    .unwrap_err();
    assert_eq!(
        e.to_string(),
        "lgi.txt:8: GPU instance 5: GPU 0: 4g.40gb cannot start at memory slice 4: expected a start in 0"
    );
    // Overlap.
    let e = h100(&lgi_table(&[
        "|   1  MIG 3g.40gb          9        1          4:4     |",
        "|   1  MIG 2g.20gb         14        3          4:2     |",
    ]))
    .unwrap_err();
    assert!(
        matches!(
            &e,
            ReadError::Geometry {
                line: 8,
                instance: 3,
                error: GeometryError::Overlap { gpu: 1, .. },
                ..
            }
        ),
        "{e}"
    );
    // A profile of another model (A100-40GB's 3g.20gb on an H100).
    let e = h100(&lgi_table(&[
        "|   0  MIG 3g.20gb          9        1          0:4     |",
    ]))
    .unwrap_err();
    assert!(
        matches!(
            &e,
            ReadError::UnknownProfile {
                line: 6,
                gpu: 0,
                ..
            }
        ),
        "{e}"
    );
    assert!(e.to_string().contains("expected one of 1g.10gb+me"), "{e}");
    // The profile ID or the size disagree with the profile.
    let e = h100(&lgi_table(&[
        "|   0  MIG 3g.40gb          5        1          0:4     |",
    ]))
    .unwrap_err();
    assert!(
        matches!(
            &e,
            ReadError::Field {
                field: "Profile ID",
                ..
            }
        ),
        "{e}"
    );
    let e = h100(&lgi_table(&[
        "|   0  MIG 3g.40gb          9        1          0:2     |",
    ]))
    .unwrap_err();
    assert!(
        matches!(
            &e,
            ReadError::Field {
                field: "Placement",
                ..
            }
        ),
        "{e}"
    );
    // The same instance ID twice.
    let e = h100(&lgi_table(&[
        "|   0  MIG 1g.10gb         19        9          0:1     |",
        "|   0  MIG 1g.10gb         19        9          1:1     |",
    ]))
    .unwrap_err();
    assert!(
        matches!(
            &e,
            ReadError::Field {
                field: "Instance ID",
                line: 8,
                ..
            }
        ),
        "{e}"
    );
    // A GPU -L does not list.
    let e = h100(&lgi_table(&[
        "|   7  MIG 7g.80gb          0        0          0:8     |",
    ]))
    .unwrap_err();
    assert!(
        e.to_string()
            .contains("expected a GPU `nvidia-smi -L` lists (0, 1, 2)"),
        "{e}"
    );
}

#[test]
fn inconsistent_outputs_are_errors() {
    let list =
        "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-1)\n  MIG 3g.20gb Device 0: (UUID: MIG-2)\n";
    let e = read_state(&MigOutputs {
        list: Some(SavedOutput::new("L.txt", list)),
        ..MigOutputs::default()
    })
    .unwrap_err();
    assert_eq!(
        e.to_string(),
        "L.txt:2: GPU 0: unknown profile `3g.20gb` for h100-80gb: expected one of 1g.10gb+me, 1g.10gb, 1g.20gb, 2g.20gb, 3g.40gb, 4g.40gb, 7g.80gb"
    );
    // A compute instance of a GPU instance -lgi does not list.
    let e = read_state(&MigOutputs {
        lci: Some(SavedOutput::new("lci.txt", H100_LCI)),
        ..MigOutputs::default()
    })
    .unwrap_err();
    assert!(
        matches!(
            &e,
            ReadError::Field {
                field: "GPU instance ID",
                line: 7,
                ..
            }
        ),
        "{e}"
    );
    // A compute instance whose profile is not of its GPU instance, or listed twice.
    let lgi = lgi_table(&["|   0  MIG 3g.40gb          9        2          4:4     |"]);
    let lci_head: Vec<&str> = H100_LCI.lines().take(6).collect();
    let border = "+--------------------------------------------------------------------+";
    for (row, field) in [
        (
            "|   0      2       MIG 1c.2g.20gb       0         0          0:1     |",
            "Name",
        ),
        (
            "|   0      2       MIG 3g.40gb          2         0          0:3     |",
            "Instance ID",
        ),
    ] {
        let lci = format!(
            "{}\n|   0      2       MIG 1c.3g.40gb       0         0          0:1     |\n{border}\n{row}\n{border}\n",
            lci_head.join("\n")
        );
        let e = read_state(&MigOutputs {
            list: Some(SavedOutput::new("L.txt", H100_LIST)),
            lgi: Some(SavedOutput::new("lgi.txt", &lgi)),
            lci: Some(SavedOutput::new("lci.txt", &lci)),
            ..MigOutputs::default()
        })
        .unwrap_err();
        assert!(
            matches!(&e, ReadError::Field { field: f, line: 9, .. } if *f == field),
            "{e}"
        );
    }
    // -lgipp placements that disagree with the model's table.
    let e = read_state(&MigOutputs {
        lgipp: Some(SavedOutput::new(
            "lgipp.txt",
            "GPU  0 Profile ID  9 Placements: {0,2,4}:4\n",
        )),
        model: lookup("h100-80gb").ok(),
        ..MigOutputs::default()
    })
    .unwrap_err();
    assert_eq!(
        e.to_string(),
        "lgipp.txt:1: Placements: expected {0,4}:4 for 3g.40gb (ID 9) on h100-80gb, found `{0,2,4}:4`"
    );
    // Parse errors carry the input's name.
    let e = read_state(&MigOutputs {
        lgi: Some(SavedOutput::new("node-3/lgi.txt", &H100_LGI[..200])),
        ..MigOutputs::default()
    })
    .unwrap_err();
    assert!(e.to_string().starts_with("node-3/lgi.txt:"), "{e}");
}

/// The planner's geometry → the `nvidia-smi mig -cgi` commands the crate prints → the
/// `-lgi` listing those commands leave (hand-written fixture) → read back: the same
/// geometry, GPU by GPU.
#[test]
fn planned_geometry_round_trips_through_nvidia_smi() {
    let model = lookup("h100-80gb").unwrap();
    let want = parse_mix(model, "4g.40gb=1,3g.40gb=2,2g.20gb=2,1g.10gb=3").unwrap();
    let planned = plan(&GeometryRequest {
        model,
        gpus: 3,
        nodes: None,
        want,
    })
    .unwrap();
    assert!(planned.complete());
    let state = read_state(&MigOutputs {
        lgi: Some(SavedOutput::new(
            "round-trip/lgi.txt",
            include_str!("../tests/data/round-trip/lgi.txt"),
        )),
        model: Some(model),
        ..MigOutputs::default()
    })
    .unwrap();
    assert_eq!(state.gpus.len(), planned.gpus.len());
    for (g, read) in planned.gpus.iter().zip(&state.gpus) {
        assert_eq!(read.index, g.index);
        let mut want = g.instances.clone();
        want.sort_by_key(|p| p.start);
        assert_eq!(read.placements(), want, "GPU {}", g.index);
        // Each command `nvidia-smi mig -i G -cgi ID:START -C` made one listed instance.
        let mut made: Vec<(u32, u8)> = nvidia_smi_commands(model, g.index, &g.instances)
            .iter()
            .map(|c| {
                let arg = c.split_whitespace().nth(5).unwrap();
                let (id, start) = arg.split_once(':').unwrap();
                (id.parse().unwrap(), start.parse().unwrap())
            })
            .collect();
        made.sort_by_key(|&(_, s)| s);
        let listed: Vec<(u32, u8)> = read
            .instances
            .iter()
            .map(|i| (i.profile_id, i.start))
            .collect();
        assert_eq!(made, listed, "GPU {}", g.index);
    }
}

/// Every prefix of every fixture, and every fixture with one character replaced, reads
/// to a value or an error: never a panic.
#[test]
fn cut_and_damaged_outputs_never_panic() {
    let fixtures = [
        H100_LIST,
        H100_LGI,
        H100_LCI,
        H100_LGIPP,
        include_str!("../tests/data/a100-40-7x1g/list.txt"),
        include_str!("../tests/data/a100-40-7x1g/lci-old.txt"),
    ];
    let read_all = |text: &str| {
        let out = Some(SavedOutput::new("x", text));
        for o in [
            MigOutputs {
                list: out,
                ..MigOutputs::default()
            },
            MigOutputs {
                lgi: out,
                ..MigOutputs::default()
            },
            MigOutputs {
                lci: out,
                ..MigOutputs::default()
            },
            MigOutputs {
                lgipp: out,
                model: lookup("a100-40gb").ok(),
                ..MigOutputs::default()
            },
        ] {
            let _ = read_state(&o);
        }
    };
    for f in fixtures {
        for cut in (0..f.len()).filter(|&c| f.is_char_boundary(c)) {
            read_all(&f[..cut]);
        }
        for (at, _) in f.char_indices().step_by(3) {
            for with in ["x", "|", ":", "9", " ", "\n"] {
                let mut damaged = f.to_string();
                damaged.replace_range(at..at + 1, with);
                read_all(&damaged);
            }
        }
    }
}

/// A capture of other GPUs (RTX PRO 6000) read for an H100 node: said so, naming the GPU
/// and both models, instead of judging its profiles by the H100 table; without the
/// node's model the capture is read as it is (its GPUs have no table here).
#[test]
fn a_capture_of_other_gpus_is_not_the_nodes() {
    let list = include_str!("../tests/data/rtx-pro-6000/list.txt");
    let lgi = include_str!("../tests/data/rtx-pro-6000/lgi.txt");
    let h100 = lookup("h100-80gb").unwrap();
    let out = |model| MigOutputs {
        list: Some(SavedOutput::new("list.txt", list)),
        lgi: Some(SavedOutput::new("lgi.txt", lgi)),
        model,
        ..MigOutputs::default()
    };
    let e = read_state(&out(Some(h100))).unwrap_err();
    assert!(
        matches!(
            e,
            ReadError::OtherGpus {
                gpu: 0,
                line: 1,
                ..
            }
        ),
        "{e}"
    );
    assert!(
        e.to_string().starts_with(
            "list.txt:1: GPU 0 (GPU-7c2e9a14-5b3d-4e6f-8a21-0d9c4b7e1f35) is `NVIDIA RTX PRO 6000 Blackwell Server Edition`, not the node's h100-80gb"
        ),
        "{e}"
    );
    let state = read_state(&out(None)).unwrap();
    assert_eq!(state.gpus.len(), 2);
    assert!(state.gpus.iter().all(|g| g.model.is_none()));
    // An A100 capture on an H100 node: other GPUs too.
    let a100 = H100_LIST.replace("NVIDIA H100 80GB HBM3", "NVIDIA A100-SXM4-40GB");
    let e = read_state(&MigOutputs {
        list: Some(SavedOutput::new("L.txt", &a100)),
        model: Some(h100),
        ..MigOutputs::default()
    })
    .unwrap_err();
    assert!(e.to_string().contains("not the node's h100-80gb"), "{e}");
    // An H100 the table has no row for is read with the node's H100 table.
    let h100_96 = H100_LIST.replace("NVIDIA H100 80GB HBM3", "NVIDIA H100 96GB HBM3");
    let state = read_state(&MigOutputs {
        list: Some(SavedOutput::new("L.txt", &h100_96)),
        lgi: Some(SavedOutput::new("lgi.txt", H100_LGI)),
        model: Some(h100),
        ..MigOutputs::default()
    })
    .unwrap();
    assert_eq!(
        state.gpu(0).unwrap().model.map(|m| m.name),
        Some("h100-80gb")
    );
}
