//! profile → write_tree → sysfs::discover gives back the same topology, every fact of it,
//! for every built-in profile: NVIDIA NVLink and memory sizes travel in the saved
//! nvidia-smi outputs the tree carries (`sysfs::nvml`), AMD xGMI in the KFD io_links.
//! Without the saved outputs the NVIDIA fabric is unknown, and what remains is the
//! profile's `sysfs_view`.

use std::path::Path;

use topoalign_discover::sysfs::{discover, nvml};
use topoalign_discover::{DiscoverError, Source, load};
use topoalign_discover::{sysfs_view, write_tree};
use topoalign_profiles::{self as profiles, NAMES as PROFILE_NAMES};
use topoalign_topology::{FabricKind, FabricStatus, PcieClass};

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
        let mut want = profile.clone();
        want.canonicalize();
        assert_eq!(got, want, "{name}: discovered topology differs");
        assert_eq!(got.fabric_status(), want.fabric_status(), "{name}");
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
fn without_the_saved_nvml_outputs_nvlink_is_unknown_not_none() {
    for name in PROFILE_NAMES {
        let profile = profiles::get(name).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("root");
        write_tree(&profile, &root).unwrap();
        let saved = root.join("var/lib/topoalign");
        let nvidia = saved.exists();
        if nvidia {
            std::fs::remove_dir_all(&saved).unwrap();
        }
        let got = discover(&root).unwrap().topology;
        assert_eq!(got, sysfs_view(&profile), "{name}");
        if nvidia {
            assert_eq!(got.fabric_status(), FabricStatus::Unknown, "{name}");
        } else {
            assert_ne!(got.fabric_status(), FabricStatus::Unknown, "{name}");
        }
    }
}

#[test]
fn a_directory_that_is_not_a_sysfs_tree_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("notes.txt"), "x").unwrap();
    let err = discover(dir.path()).unwrap_err();
    assert!(matches!(err, DiscoverError::NotSysfs { .. }), "{err}");
    let msg = err.to_string();
    assert!(
        msg.contains("is not a sysfs tree") && msg.contains("profile write"),
        "{msg}"
    );
}

#[test]
fn nvlink_from_a_file_naming_devices_the_tree_lacks_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("root");
    // gb300-4 has 4 GPUs; the DGX H100 output names 8.
    write_tree(&profiles::get("gb300-4").unwrap(), &root).unwrap();
    let dgx = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/nvsmi_dgx_h100_old.txt");
    let err = load(&Source::Sysfs {
        root: root.clone(),
        nvlink_from: Some(dgx.clone()),
    })
    .unwrap_err()
    .to_string();
    assert!(
        err.contains("names GPU4, GPU5, GPU6, GPU7 which the discovered tree lacks"),
        "{err}"
    );
    assert!(err.contains("nvsmi_dgx_h100_old.txt"), "{err}");
    // An AMD tree has no NVIDIA GPU to match.
    let amd = dir.path().join("amd");
    write_tree(&profiles::get("mi300x-8").unwrap(), &amd).unwrap();
    let gb = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/nvsmi_gb300.txt");
    assert!(
        load(&Source::Sysfs {
            root: amd,
            nvlink_from: Some(gb)
        })
        .is_err()
    );
    // A corrupt saved file inside the tree is a warning naming it; NVLink stays unknown.
    std::fs::write(root.join(nvml::TOPO_FILE), "garbage\n").unwrap();
    let d = discover(&root).unwrap();
    assert!(
        d.warnings.iter().any(|w| w.contains(nvml::TOPO_FILE)),
        "{:?}",
        d.warnings
    );
    assert_eq!(d.topology.fabric_status(), FabricStatus::Unknown);
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
