//! NVIDIA device numbers: the N of `/dev/nvidiaN` is the "Device Minor" of
//! `/proc/driver/nvidia/gpus/<BDF>/information`, not in sysfs. The writer puts those files
//! into a profile's tree and the walker reads them back by PCI address (never by order);
//! a GPU left without a number, and a malformed file, are warnings naming the GPU, the
//! file and the field.

use std::fs;
use std::path::{Path, PathBuf};

use topoalign_discover::sysfs::discover;
use topoalign_discover::sysfs::nvproc::{NVIDIA_PROC, parse_nvidia_information};
use topoalign_discover::write_tree;
use topoalign_profiles::{self as profiles, NAMES as PROFILE_NAMES};
use topoalign_topology::{Bdf, GpuVendor, Topology};

/// A fresh tree of `topo` in a temp dir; returns (guard, root).
fn tree_of(topo: &Topology) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("root");
    write_tree(topo, &root).unwrap();
    (dir, root)
}

fn info_file(root: &Path, bdf: &str) -> PathBuf {
    root.join(NVIDIA_PROC).join(bdf).join("information")
}

/// Replaces the value of `key` in an information file (the line must be there).
fn set_field(root: &Path, bdf: &str, key: &str, value: &str) {
    let path = info_file(root, bdf);
    let text = fs::read_to_string(&path).unwrap();
    let mut found = false;
    let out: Vec<String> = text
        .lines()
        .map(|l| match l.split_once(':') {
            Some((k, _)) if k.trim() == key => {
                found = true;
                format!("{key}: \t {value}")
            }
            _ => l.to_string(),
        })
        .collect();
    assert!(found, "{key} not in {}", path.display());
    fs::write(&path, out.join("\n") + "\n").unwrap();
}

/// The device numbers by PCI address.
fn minors(t: &Topology) -> Vec<(Bdf, Option<u32>)> {
    t.gpus
        .iter()
        .map(|g| (t.pci[g.pci].bdf, g.nvidia_minor))
        .collect()
}

fn warnings_with(warnings: &[String], parts: &[&str]) -> usize {
    warnings
        .iter()
        .filter(|w| parts.iter().all(|p| w.contains(p)))
        .count()
}

#[test]
fn the_writer_writes_the_driver_files_every_nvidia_gpu_reads_back_by_address() {
    let mut nvidia_profiles = 0;
    for name in PROFILE_NAMES {
        let profile = profiles::get(name).unwrap();
        if !profile.gpus.iter().any(|g| g.vendor == GpuVendor::Nvidia) {
            continue;
        }
        nvidia_profiles += 1;
        let (_g, root) = tree_of(&profile);
        for g in profile
            .gpus
            .iter()
            .filter(|g| g.vendor == GpuVendor::Nvidia)
        {
            let bdf = profile.pci[g.pci].bdf;
            let text = fs::read_to_string(info_file(&root, &bdf.to_string())).unwrap();
            let parsed = parse_nvidia_information(&text);
            assert!(
                parsed.problems.is_empty(),
                "{name} {bdf}: {:?}",
                parsed.problems
            );
            assert_eq!(parsed.bus, Some(bdf), "{name}");
            assert_eq!(parsed.info.minor, g.nvidia_minor, "{name} {bdf}");
            assert_eq!(parsed.info.uuid, g.uuid, "{name} {bdf}");
            for key in ["Video BIOS:", "DMA Mask:", "Bus Type:", "GPU Excluded:"] {
                assert!(text.contains(key), "{name} {bdf}: no {key} line:\n{text}");
            }
            if let Some(m) = g.nvidia_minor {
                assert!(
                    root.join(format!("dev/nvidia{m}")).is_file(),
                    "{name}: /dev/nvidia{m}"
                );
            }
        }
        let d = discover(&root).unwrap();
        assert_eq!(minors(&d.topology), minors(&profile), "{name}");
        assert!(d.warnings.is_empty(), "{name}: {:?}", d.warnings);
    }
    assert!(nvidia_profiles >= 2, "expected several NVIDIA profiles");
}

#[test]
fn minors_not_in_bus_order_follow_their_gpu() {
    let mut topo = profiles::get("dgx-h100").unwrap();
    // The driver numbers GPUs in probe order, which need not be bus order.
    let order = [5u32, 2, 7, 0, 3, 6, 1, 4];
    assert_eq!(topo.gpus.len(), order.len());
    let mut by_bus: Vec<usize> = (0..topo.gpus.len()).collect();
    by_bus.sort_by_key(|&i| topo.pci[topo.gpus[i].pci].bdf);
    for (k, &i) in by_bus.iter().enumerate() {
        topo.gpus[i].nvidia_minor = Some(order[k]);
    }
    let (_g, root) = tree_of(&topo);
    let d = discover(&root).unwrap();
    assert!(d.warnings.is_empty(), "{:?}", d.warnings);
    let got = &d.topology;
    for (k, &i) in by_bus.iter().enumerate() {
        let bdf = topo.pci[topo.gpus[i].pci].bdf;
        let gi = got.gpu_index(bdf).unwrap();
        assert_eq!(got.gpus[gi].nvidia_minor, Some(order[k]), "{bdf}");
        assert!(
            got.gpus[gi]
                .device_nodes()
                .contains(&format!("/dev/nvidia{}", order[k])),
            "{bdf}: {:?}",
            got.gpus[gi].device_nodes()
        );
    }
    let mut want = topo.clone();
    want.canonicalize();
    let mut got = d.topology.clone();
    got.canonicalize();
    assert_eq!(got, want);
}

#[test]
fn without_proc_driver_nvidia_every_gpu_is_named_in_a_warning() {
    let profile = profiles::get("dgx-h100").unwrap();
    let (_g, root) = tree_of(&profile);
    fs::remove_dir_all(root.join("proc/driver/nvidia")).unwrap();
    let d = discover(&root).unwrap();
    let t = &d.topology;
    assert_eq!(t.gpus.len(), 8, "the GPUs are still found in sysfs");
    for g in &t.gpus {
        let bdf = t.pci[g.pci].bdf.to_string();
        assert_eq!(g.nvidia_minor, None, "{bdf}");
        assert_eq!(g.model, None, "{bdf}");
        let expected = format!("proc/driver/nvidia/gpus/{bdf}/information");
        assert_eq!(
            warnings_with(
                &d.warnings,
                &[
                    &format!("NVIDIA GPU {bdf} has no device number"),
                    &expected,
                    "does not exist",
                    "not mounted"
                ],
            ),
            1,
            "{bdf}: {:#?}",
            d.warnings
        );
    }
}

#[test]
fn one_gpus_missing_file_is_named_and_the_others_keep_their_numbers() {
    let profile = profiles::get("dgx-h100").unwrap();
    let (_g, root) = tree_of(&profile);
    fs::remove_file(info_file(&root, "0000:1b:00.0")).unwrap();
    let d = discover(&root).unwrap();
    let t = &d.topology;
    let without: Vec<Bdf> = t
        .gpus
        .iter()
        .filter(|g| g.nvidia_minor.is_none())
        .map(|g| t.pci[g.pci].bdf)
        .collect();
    assert_eq!(without, vec!["0000:1b:00.0".parse().unwrap()]);
    assert_eq!(
        warnings_with(
            &d.warnings,
            &[
                "NVIDIA GPU 0000:1b:00.0 has no device number",
                "0000:1b:00.0/information is missing"
            ]
        ),
        1,
        "{:#?}",
        d.warnings
    );
    assert_eq!(
        d.warnings.len(),
        2,
        "the unreadable file and the GPU: {:#?}",
        d.warnings
    );
}

#[test]
fn a_malformed_device_minor_names_the_file_and_the_field() {
    let profile = profiles::get("dgx-h100").unwrap();
    let (_g, root) = tree_of(&profile);
    set_field(&root, "0000:43:00.0", "Device Minor", "three");
    set_field(&root, "0000:52:00.0", "GPU UUID", "not-a-uuid");
    let d = discover(&root).unwrap();
    let t = &d.topology;
    let g43 = &t.gpus[t.gpu_index("0000:43:00.0".parse().unwrap()).unwrap()];
    assert_eq!(g43.nvidia_minor, None);
    assert_eq!(
        g43.model.as_deref(),
        Some("NVIDIA H100 80GB HBM3"),
        "other fields still read"
    );
    let g52 = &t.gpus[t.gpu_index("0000:52:00.0".parse().unwrap()).unwrap()];
    assert_eq!(g52.uuid, None);
    assert!(g52.nvidia_minor.is_some());
    assert_eq!(
        warnings_with(
            &d.warnings,
            &[
                "0000:43:00.0/information",
                "field `Device Minor`",
                "`three` is not a device number"
            ]
        ),
        1,
        "{:#?}",
        d.warnings
    );
    assert_eq!(
        warnings_with(
            &d.warnings,
            &[
                "NVIDIA GPU 0000:43:00.0 has no device number",
                "no usable `Device Minor:` line"
            ]
        ),
        1,
        "{:#?}",
        d.warnings
    );
    assert_eq!(
        warnings_with(
            &d.warnings,
            &["0000:52:00.0/information", "field `GPU UUID`"]
        ),
        1,
        "{:#?}",
        d.warnings
    );
    assert_eq!(d.warnings.len(), 3, "{:#?}", d.warnings);
}

#[test]
fn a_file_whose_bus_location_is_another_gpu_is_not_trusted() {
    let profile = profiles::get("dgx-h100").unwrap();
    let (_g, root) = tree_of(&profile);
    set_field(&root, "0000:1b:00.0", "Bus Location", "0000:43:00.0");
    let d = discover(&root).unwrap();
    assert_eq!(
        warnings_with(
            &d.warnings,
            &[
                "0000:1b:00.0/information",
                "differs from the directory name"
            ]
        ),
        1,
        "{:#?}",
        d.warnings
    );
    let t = &d.topology;
    let g = &t.gpus[t.gpu_index("0000:1b:00.0".parse().unwrap()).unwrap()];
    assert_eq!(g.nvidia_minor, None);
    let g = &t.gpus[t.gpu_index("0000:43:00.0".parse().unwrap()).unwrap()];
    assert!(g.nvidia_minor.is_some(), "its own file still counts");
}

#[test]
fn two_gpus_with_one_device_number_lose_it_with_a_warning() {
    let profile = profiles::get("dgx-h100").unwrap();
    let (_g, root) = tree_of(&profile);
    let t = &profile;
    let first = t.pci[t.gpus[0].pci].bdf;
    let second = t.pci[t.gpus[1].pci].bdf;
    let m = t.gpus[0].nvidia_minor.unwrap();
    set_field(&root, &second.to_string(), "Device Minor", &m.to_string());
    let d = discover(&root).unwrap();
    let got = &d.topology;
    for b in [first, second] {
        assert_eq!(
            got.gpus[got.gpu_index(b).unwrap()].nvidia_minor,
            None,
            "{b}"
        );
    }
    assert_eq!(
        warnings_with(
            &d.warnings,
            &[
                &format!("{first}, {second}"),
                &format!("`Device Minor: {m}`"),
                "dropped"
            ]
        ),
        1,
        "{:#?}",
        d.warnings
    );
    assert_eq!(
        warnings_with(&d.warnings, &["has no device number"]),
        2,
        "{:#?}",
        d.warnings
    );
}

#[test]
fn a_gpu_without_a_number_round_trips_as_one_and_is_reported() {
    let mut topo = profiles::get("pcie-2socket").unwrap();
    let i = topo
        .gpus
        .iter()
        .position(|g| g.vendor == GpuVendor::Nvidia)
        .unwrap();
    let bdf = topo.pci[topo.gpus[i].pci].bdf;
    topo.gpus[i].nvidia_minor = None;
    let (_g, root) = tree_of(&topo);
    let text = fs::read_to_string(info_file(&root, &bdf.to_string())).unwrap();
    assert!(!text.contains("Device Minor"), "{text}");
    let d = discover(&root).unwrap();
    let mut got = d.topology.clone();
    got.canonicalize();
    let mut want = topo.clone();
    want.canonicalize();
    assert_eq!(got, want);
    assert_eq!(
        d.warnings,
        vec![format!(
            "NVIDIA GPU {bdf} has no device number (/dev/nvidiaN), so no container can be given its device node: expected `Device Minor:` in {f}; {f} has no usable `Device Minor:` line",
            f = info_file(&root, &bdf.to_string()).display()
        )]
    );
}
