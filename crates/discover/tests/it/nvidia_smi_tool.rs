//! Running `nvidia-smi topo -m` on a live host to learn NVLink: with stand-in programs
//! (shell scripts) in place of the real tool, on a dgx-h100 sysfs tree.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use topoalign_discover::Discovery;
use topoalign_discover::merge_nvlinks;
use topoalign_discover::sysfs::discover;
use topoalign_discover::write_tree;
use topoalign_profiles as profiles;
use topoalign_topology::{FabricKind, FabricStatus};

/// Writes an executable shell script and returns its path.
fn script(dir: &Path, name: &str, body: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path
}

/// A host's tree: what `profile write` writes, without the saved nvidia-smi outputs
/// (a live host has none; the tool is the source).
fn discovered(profile: &str, dir: &Path) -> Discovery {
    let root = dir.join("root");
    write_tree(&profiles::get(profile).unwrap(), &root).unwrap();
    let saved = root.join("var/lib/topoalign");
    if saved.exists() {
        std::fs::remove_dir_all(saved).unwrap();
    }
    discover(&root).unwrap()
}

#[test]
fn merges_the_nv_cells_that_the_tool_prints() {
    let dir = tempfile::tempdir().unwrap();
    let mut d = discovered("dgx-h100", dir.path());
    assert!(d.topology.gpu_links.is_empty(), "sysfs alone has no NVLink");
    assert_eq!(
        d.topology.fabric_status(),
        FabricStatus::Unknown,
        "unknown, not none"
    );
    let fixture =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/nvsmi_dgx_h100_old.txt");
    // The stand-in insists on the real tool's arguments.
    let tool = script(
        dir.path(),
        "nvidia-smi",
        &format!(
            "[ \"$1 $2\" = \"topo -m\" ] || exit 9\ncat '{}'",
            fixture.display()
        ),
    );
    assert!(merge_nvlinks(&mut d, tool.to_str().unwrap()));
    let links = &d.topology.gpu_links;
    assert_eq!(links.len(), 28);
    assert!(
        links
            .iter()
            .all(|l| l.kind == FabricKind::Nvlink && l.count == 18)
    );
    let want = profiles::get("dgx-h100").unwrap().gpu_links;
    assert_eq!(links, &want);
    assert_eq!(d.topology.fabric_status(), FabricStatus::Links);
}

#[test]
fn failures_become_warnings_that_name_the_cause() {
    let dir = tempfile::tempdir().unwrap();
    let cases = [
        (dir.path().join("no-such-nvidia-smi"), "cannot run"),
        (
            script(dir.path(), "fails", "echo boom >&2; exit 3"),
            "exited",
        ),
        (
            script(dir.path(), "garbage", "echo 'NVIDIA-SMI has failed'"),
            "NVLink links unknown",
        ),
    ];
    for (program, expect) in cases {
        let tree = tempfile::tempdir().unwrap();
        let mut d = discovered("dgx-h100", tree.path());
        assert!(!merge_nvlinks(&mut d, program.to_str().unwrap()));
        assert!(d.topology.gpu_links.is_empty());
        assert_eq!(d.topology.fabric_status(), FabricStatus::Unknown);
        let w = d.warnings.join("\n");
        assert!(w.contains(expect) && w.contains("--nvlink-from"), "{w}");
    }
}

#[test]
fn hosts_without_nvidia_gpus_do_not_run_the_tool() {
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("ran");
    let tool = script(
        dir.path(),
        "nvidia-smi",
        &format!("touch '{}'", marker.display()),
    );
    let mut d = discovered("mi300x-8", dir.path());
    let before = d.clone();
    assert!(!merge_nvlinks(&mut d, tool.to_str().unwrap()));
    assert!(!marker.exists(), "the tool must not run on an AMD host");
    assert_eq!(d, before);
}

#[test]
fn memory_sizes_come_from_the_tool_where_sysfs_has_none() {
    let dir = tempfile::tempdir().unwrap();
    let mut d = discovered("dgx-h100", dir.path());
    assert!(d.topology.gpus.iter().all(|g| g.memory_mib.is_none()));
    let rows: String = (d.topology.gpus.iter())
        .map(|g| format!("{}, 81559 MiB\n", d.topology.pci[g.pci].bdf))
        .collect();
    let csv = dir.path().join("query.csv");
    std::fs::write(&csv, format!("pci.bus_id, memory.total [MiB]\n{rows}")).unwrap();
    // The stand-in insists on the real tool's arguments.
    let tool = script(
        dir.path(),
        "nvidia-smi",
        &format!(
            "[ \"$1 $2\" = \"--query-gpu=pci.bus_id,memory.total --format=csv\" ] || exit 9\ncat '{}'",
            csv.display()
        ),
    );
    assert!(topoalign_discover::merge_memory(
        &mut d,
        tool.to_str().unwrap()
    ));
    assert!(d.topology.gpus.iter().all(|g| g.memory_mib == Some(81559)));
    // Known sizes: the tool is not asked again.
    let marker = dir.path().join("ran");
    let again = script(
        dir.path(),
        "again",
        &format!("touch '{}'", marker.display()),
    );
    assert!(!topoalign_discover::merge_memory(
        &mut d,
        again.to_str().unwrap()
    ));
    assert!(!marker.exists());
    // A truncated answer is a warning naming what was expected; sizes stay unknown.
    let mut d = discovered("dgx-h100", tempfile::tempdir().unwrap().path());
    let bad = script(
        dir.path(),
        "bad",
        "echo 'pci.bus_id, memory.total [MiB]'; echo '00000000:1B:00.0, 81'",
    );
    assert!(!topoalign_discover::merge_memory(
        &mut d,
        bad.to_str().unwrap()
    ));
    let w = d.warnings.join("\n");
    assert!(
        w.contains("GPU memory sizes unknown") && w.contains("MiB"),
        "{w}"
    );
    assert!(d.topology.gpus.iter().all(|g| g.memory_mib.is_none()));
}
