//! The walker on damaged or unusual trees: odd files become warnings naming the file,
//! a tree that cannot be walked (a symlink loop) is an error naming the path, nothing
//! panics.

use std::fs;
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};

use topoalign_discover::DiscoverError;
use topoalign_discover::sysfs::discover;
use topoalign_discover::write_tree;
use topoalign_profiles as profiles;
use topoalign_topology::{PciKind, Sriov};

/// A fresh tree of `profile` in a temp dir; returns (guard, root).
fn tree(profile: &str) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("root");
    write_tree(&profiles::get(profile).unwrap(), &root).unwrap();
    (dir, root)
}

/// The resolved sysfs directory of a PCI function.
fn dev_dir(root: &Path, bdf: &str) -> PathBuf {
    let link = root.join("sys/bus/pci/devices").join(bdf);
    let target = fs::read_link(&link).unwrap();
    link.parent().unwrap().join(target)
}

fn has_warning(warnings: &[String], parts: &[&str]) -> bool {
    warnings.iter().any(|w| parts.iter().all(|p| w.contains(p)))
}

#[test]
fn numa_node_minus_one_is_unknown_with_a_warning() {
    let (_g, root) = tree("mi300x-8");
    fs::write(dev_dir(&root, "0000:11:00.0").join("numa_node"), "-1\n").unwrap();
    let d = discover(&root).unwrap();
    let t = &d.topology;
    let gi = t.gpu_index("0000:11:00.0".parse().unwrap()).unwrap();
    assert_eq!(t.pci[t.gpus[gi].pci].numa_node, None);
    // The classifier still places it on NUMA 0 through its host bridge's bridges.
    assert_eq!(t.classifier().numa_of(t.gpus[gi].pci), Some(0));
    assert!(
        has_warning(&d.warnings, &["0000:11:00.0", "numa_node is -1"]),
        "{:?}",
        d.warnings
    );
}

#[test]
fn garbage_class_skips_the_device_and_names_the_file() {
    let (_g, root) = tree("pcie-2socket");
    fs::write(dev_dir(&root, "0000:01:00.0").join("class"), "banana\n").unwrap();
    let d = discover(&root).unwrap();
    assert_eq!(d.topology.gpus.len(), 3);
    assert!(
        has_warning(&d.warnings, &["0000:01:00.0/class", "not a hex class"]),
        "{:?}",
        d.warnings
    );
}

#[test]
fn missing_identity_files_degrade() {
    let (_g, root) = tree("pcie-2socket");
    let dir = dev_dir(&root, "0000:03:00.0");
    fs::remove_file(dir.join("device")).unwrap();
    fs::remove_file(dir.join("current_link_speed")).unwrap();
    let d = discover(&root).unwrap();
    let t = &d.topology;
    let pi = t.pci_index("0000:03:00.0".parse().unwrap()).unwrap();
    assert_eq!(t.pci[pi].device, 0);
    assert_eq!(t.pci[pi].link, None);
    assert!(
        has_warning(&d.warnings, &["0000:03:00.0/device"]),
        "{:?}",
        d.warnings
    );
}

#[test]
fn dangling_symlink_is_skipped_with_a_warning() {
    let (_g, root) = tree("pcie-2socket");
    symlink(
        "../../../devices/pci0000:00/0000:00:09.0",
        root.join("sys/bus/pci/devices/0000:00:09.0"),
    )
    .unwrap();
    let d = discover(&root).unwrap();
    assert_eq!(d.topology.gpus.len(), 4);
    assert!(
        has_warning(&d.warnings, &["0000:00:09.0", "dangling symlink"]),
        "{:?}",
        d.warnings
    );
}

#[test]
fn symlink_loop_is_an_error_naming_the_path() {
    let (_g, root) = tree("pcie-2socket");
    let a = root.join("sys/devices/pci0000:00/loop-a");
    symlink("loop-b", &a).unwrap();
    symlink("loop-a", root.join("sys/devices/pci0000:00/loop-b")).unwrap();
    symlink(
        "../../../devices/pci0000:00/loop-a",
        root.join("sys/bus/pci/devices/0000:00:0a.0"),
    )
    .unwrap();
    let err = discover(&root).unwrap_err();
    assert!(matches!(err, DiscoverError::Malformed { .. }), "{err:?}");
    let msg = err.to_string();
    assert!(
        msg.contains("symlink loop") && msg.contains("0000:00:0a.0"),
        "{msg}"
    );
}

#[test]
fn vf_without_numa_node_file() {
    let (_g, root) = tree("mi300x-8");
    fs::remove_file(dev_dir(&root, "0000:0c:00.1").join("numa_node")).unwrap();
    let d = discover(&root).unwrap();
    let t = &d.topology;
    let ni = t.nic_index("0000:0c:00.1".parse().unwrap()).unwrap();
    assert_eq!(t.pci[t.nics[ni].pci].numa_node, None);
    assert!(matches!(t.nics[ni].sriov, Sriov::Vf { index: 0, .. }));
    assert!(
        has_warning(&d.warnings, &["0000:0c:00.1/numa_node", "missing"]),
        "{:?}",
        d.warnings
    );
}

#[test]
fn netdev_without_device_link_and_uverbs_without_ibdev() {
    let (_g, root) = tree("mi300x-8");
    let orphan = root.join("sys/devices/platform/fake/net/eth9");
    fs::create_dir_all(&orphan).unwrap();
    symlink(
        "../../devices/platform/fake/net/eth9",
        root.join("sys/class/net/eth9"),
    )
    .unwrap();
    let verbs = root.join("sys/class/infiniband_verbs/uverbs0");
    fs::remove_file(fs::canonicalize(&verbs).unwrap().join("ibdev")).unwrap();
    let d = discover(&root).unwrap();
    assert!(
        has_warning(&d.warnings, &["eth9", "without a `device` link"]),
        "{:?}",
        d.warnings
    );
    assert!(
        has_warning(&d.warnings, &["uverbs0/ibdev", "missing"]),
        "{:?}",
        d.warnings
    );
    let t = &d.topology;
    let ni = t.nic_index("0000:0c:00.0".parse().unwrap()).unwrap();
    assert_eq!(t.nics[ni].rdma.as_deref(), Some("mlx5_0"));
    assert_eq!(t.nics[ni].uverbs, None);
    // The loopback (a virtual netdev) is not worth a warning.
    assert!(!d.warnings.iter().any(|w| w.contains("/lo")));
}

#[test]
fn truncated_cpulist_and_garbage_distance() {
    let (_g, root) = tree("pcie-2socket");
    let n0 = root.join("sys/devices/system/node/node0");
    fs::write(n0.join("cpulist"), "0-15,32-\n").unwrap();
    fs::write(n0.join("distance"), "10 x\n").unwrap();
    let d = discover(&root).unwrap();
    assert!(d.topology.numa[0].cpus.is_empty());
    assert!(d.topology.numa[0].distances.is_empty());
    assert!(
        has_warning(&d.warnings, &["node0/cpulist"]),
        "{:?}",
        d.warnings
    );
    assert!(
        has_warning(&d.warnings, &["node0/distance"]),
        "{:?}",
        d.warnings
    );
}

#[test]
fn unreadable_config_space_infers_port_types_by_position() {
    let (_g, root) = tree("dgx-h100");
    let want = discover(&root).unwrap().topology;
    for entry in fs::read_dir(root.join("sys/bus/pci/devices")).unwrap() {
        let dir = dev_dir(&root, entry.unwrap().file_name().to_str().unwrap());
        let cfg = fs::read(dir.join("config")).unwrap();
        fs::write(dir.join("config"), &cfg[..64]).unwrap();
    }
    let d = discover(&root).unwrap();
    assert_eq!(d.topology, want);
    assert!(
        d.topology
            .pci
            .iter()
            .any(|p| p.kind == PciKind::SwitchDownstream)
    );
    assert!(
        has_warning(&d.warnings, &["inferred from their position"]),
        "{:?}",
        d.warnings
    );
}

#[test]
fn bmc_display_is_not_a_gpu_and_hyper_v_paths_are_followed() {
    let (_g, root) = tree("gb300-4");
    // An ASPEED BMC VGA on its own root bus.
    let bmc = root.join("sys/devices/pci0000:c0/0000:c0:01.0/0000:c1:00.0");
    fs::create_dir_all(&bmc).unwrap();
    fs::write(bmc.join("class"), "0x030000\n").unwrap();
    fs::write(bmc.join("vendor"), "0x1a03\n").unwrap();
    symlink(
        "../../../devices/pci0000:c0/0000:c0:01.0/0000:c1:00.0",
        root.join("sys/bus/pci/devices/0000:c1:00.0"),
    )
    .unwrap();
    // Move NIC 0101:00:00.0 under a Hyper-V VMBus path, as Azure lays it out.
    let vmbus = "sys/devices/LNXSYSTM:00/LNXSYBUS:00/ACPI0004:00/VMBUS:00/0d7c4f0e-0101-4000-8000-000000000001";
    fs::create_dir_all(root.join(vmbus)).unwrap();
    fs::rename(
        root.join("sys/devices/pci0101:00"),
        root.join(vmbus).join("pci0101:00"),
    )
    .unwrap();
    let bus_link = root.join("sys/bus/pci/devices/0101:00:00.0");
    fs::remove_file(&bus_link).unwrap();
    symlink(
        format!("../../../../{vmbus}/pci0101:00/0101:00:00.0"),
        &bus_link,
    )
    .unwrap();
    let ib = root.join("sys/class/infiniband/mlx5_0");
    fs::remove_file(&ib).unwrap();
    symlink(
        format!("../../../{vmbus}/pci0101:00/0101:00:00.0/infiniband/mlx5_0"),
        &ib,
    )
    .unwrap();

    let d = discover(&root).unwrap();
    let t = &d.topology;
    assert_eq!(t.gpus.len(), 4, "the BMC is not a GPU");
    let ni = t.nic_index("0101:00:00.0".parse().unwrap()).unwrap();
    assert_eq!(t.pcie_root(t.nics[ni].pci).unwrap(), "pci0101:00");
    assert_eq!(t.nics[ni].rdma.as_deref(), Some("mlx5_0"));
}

#[test]
fn garbage_driver_files_do_not_panic() {
    let (_g, root) = tree("dgx-h100");
    let info = root.join("proc/driver/nvidia/gpus/0000:1b:00.0/information");
    fs::write(&info, [0xffu8, 0xfe, b'\n', b':', b':']).unwrap();
    let kfd = root.join("sys/class/kfd/kfd/topology/nodes/7");
    fs::create_dir_all(kfd.join("io_links/0")).unwrap();
    fs::write(kfd.join("properties"), "simd_count 5\nlocation_id banana\n").unwrap();
    fs::write(kfd.join("io_links/0/properties"), "type 11\n").unwrap();
    let d = discover(&root).unwrap();
    let gi = d
        .topology
        .gpu_index("0000:1b:00.0".parse().unwrap())
        .unwrap();
    assert_eq!(d.topology.gpus[gi].uuid, None);
    assert!(
        has_warning(&d.warnings, &["0000:1b:00.0/information"]),
        "{:?}",
        d.warnings
    );
    assert!(
        has_warning(&d.warnings, &["nodes/7/properties", "location_id"]),
        "{:?}",
        d.warnings
    );
}

#[test]
fn a_missing_root_is_an_error() {
    let err = discover(Path::new("/nonexistent/sysroot"))
        .unwrap_err()
        .to_string();
    assert!(err.contains("/nonexistent/sysroot"), "{err}");
}
