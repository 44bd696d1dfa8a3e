#![allow(clippy::unwrap_used, clippy::expect_used)]
//! profile → write_tree → sysfs::discover gives back the same topology, for every
//! built-in profile. NVIDIA NVLink and NVIDIA GPU memory sizes are not in sysfs (NVML
//! knows them), so the expected side is the profile's `sysfs_view`.

use std::path::Path;

use topoalign_discover::sysfs::discover;
use topoalign_discover::sysfs_write::{sysfs_view, write_tree};
use topoalign_discover::{PROFILE_NAMES, profiles};
use topoalign_topology::{FabricKind, PcieClass};

#[test]
fn every_profile_round_trips_through_a_sysfs_tree() {
    for name in PROFILE_NAMES {
        let profile = profiles::get(name).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("root");
        write_tree(&profile, &root).unwrap();
        let found = discover(&root).unwrap();
        let mut got = found.topology;
        got.canonicalize();
        let want = sysfs_view(&profile);
        assert_eq!(got, want, "{name}: discovered topology differs");
        assert!(
            found.warnings.is_empty(),
            "{name}: unexpected warnings {:?}",
            found.warnings
        );
        // The classification is the same as the profile's, pair by pair.
        let (a, b) = (got.classifier(), profile.classifier());
        assert_eq!(a.gpu_nic_table(), b.gpu_nic_table(), "{name}");
    }
}

#[test]
fn xgmi_comes_back_from_kfd_io_links() {
    let profile = profiles::get("mi300x-8").unwrap();
    let dir = tempfile::tempdir().unwrap();
    write_tree(&profile, dir.path()).unwrap();
    let t = discover(dir.path()).unwrap().topology;
    assert_eq!(t.gpu_links.len(), 28);
    assert!(
        t.gpu_links
            .iter()
            .all(|l| l.kind == FabricKind::Xgmi && l.weight == Some(15) && l.hops == Some(1))
    );
    assert_eq!(t.gpus[0].kfd_node, Some(2));
    assert_eq!(t.gpus[0].model.as_deref(), Some("AMD Instinct MI300X"));
}

#[test]
fn gb300_gpus_are_c2c_from_their_model_name() {
    let profile = profiles::get("gb300-4").unwrap();
    let dir = tempfile::tempdir().unwrap();
    write_tree(&profile, dir.path()).unwrap();
    let t = discover(dir.path()).unwrap().topology;
    assert!(t.gpus.iter().all(|g| g.c2c));
    assert!(t.nics.iter().all(|n| n.ib_only()));
    let c = t.classifier();
    assert_eq!(c.gpu_nic(0, 0).class, PcieClass::Node);
    assert!(c.gpu_nic(0, 0).gdr, "P2C keeps GDR on Grace");
}

#[test]
fn refuses_a_non_empty_target() {
    let profile = profiles::get("pcie-2socket").unwrap();
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("keep.txt"), "x").unwrap();
    let err = write_tree(&profile, dir.path()).unwrap_err().to_string();
    assert!(err.contains("not empty"), "{err}");
    assert!(err.contains(&dir.path().display().to_string()), "{err}");
    // Nothing was written beside the existing file.
    let entries: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
    assert_eq!(entries.len(), 1);
}

#[test]
fn the_development_host_is_discovered() {
    let found = discover(Path::new("/")).unwrap();
    assert!(!found.topology.numa.is_empty());
}
