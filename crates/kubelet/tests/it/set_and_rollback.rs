//! End-to-end: golden edits of realistic files, refusals that leave files untouched,
//! a crash between write and rename, rollback.

use std::fs;
use std::path::Path;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::support::{fixture, staged};
use topoalign_kubelet::list_backups;
use topoalign_kubelet::{
    BackupKind, ChangeRequest, ConfigError, RollbackOptions, WriteStep, apply_set, plan_set,
    rollback,
};

fn seed_000_request() -> ChangeRequest {
    ChangeRequest {
        topology_manager_policy: Some("restricted".into()),
        topology_manager_scope: Some("container".into()),
        topology_manager_options: vec![("prefer-closest-numa-nodes".into(), "true".into())],
        cpu_manager_policy: Some("static".into()),
        reserved_cpus: None,
    }
}

fn t0() -> SystemTime {
    UNIX_EPOCH + Duration::from_secs(1_750_000_000)
}

#[test]
fn oke_json_matches_seed_000_patch_byte_for_byte() {
    let (dir, path) = staged("oke-kubelet-config.json");
    let state = dir.path().join("cpu_manager_state");
    fs::write(&state, "{}").unwrap();
    let plan = plan_set(&path, &seed_000_request()).unwrap();
    assert!(plan.warnings.is_empty(), "{:?}", plan.warnings);
    let applied = apply_set(&plan, Some(&state), t0(), None).unwrap();
    assert_eq!(
        fs::read_to_string(&path).unwrap(),
        fs::read_to_string(fixture("golden/oke-kubelet-config.seed000.json")).unwrap()
    );
    assert_eq!(
        fs::read(&applied.backup).unwrap(),
        fs::read(fixture("fixtures/oke-kubelet-config.json")).unwrap()
    );
    assert!(
        applied
            .backup
            .to_string_lossy()
            .ends_with(".bak.20250615T150640.000Z")
    );
    assert_eq!(applied.removed_cpu_state, Some(state.clone()));
    assert!(!state.exists());
    // Running it again changes nothing.
    assert!(plan_set(&path, &seed_000_request()).unwrap().is_noop());
}

#[test]
fn kubeadm_yaml_keeps_comments_and_order() {
    let (dir, path) = staged("kubeadm-config.yaml");
    let state = dir.path().join("cpu_manager_state");
    let request = ChangeRequest {
        topology_manager_scope: Some("pod".into()),
        topology_manager_options: vec![
            ("prefer-closest-numa-nodes".into(), "true".into()),
            ("max-allowable-numa-nodes".into(), "8".into()),
        ],
        ..seed_000_request()
    };
    let plan = plan_set(&path, &request).unwrap();
    apply_set(&plan, Some(&state), t0(), None).unwrap();
    assert_eq!(
        fs::read_to_string(&path).unwrap(),
        fs::read_to_string(fixture("golden/kubeadm-config.restricted.yaml")).unwrap()
    );
}

fn assert_refused(name: &str, request: &ChangeRequest, expect: &str) {
    let (dir, path) = staged(name);
    let before = fs::read(&path).unwrap();
    let err = plan_set(&path, request).unwrap_err();
    assert!(err.to_string().contains(expect), "{name}: {err}");
    assert_eq!(fs::read(&path).unwrap(), before, "{name} was modified");
    assert_eq!(
        fs::read_dir(dir.path()).unwrap().count(),
        1,
        "{name}: stray files"
    );
}

#[test]
fn refusals_leave_the_file_untouched() {
    let bad_policy = ChangeRequest {
        topology_manager_policy: Some("strict".into()),
        ..Default::default()
    };
    assert_refused(
        "oke-kubelet-config.json",
        &bad_policy,
        "`topologyManagerPolicy` is \"strict\"",
    );
    let bad_option = ChangeRequest {
        topology_manager_options: vec![("prefer-closest-numa-nodes".into(), "yes".into())],
        ..seed_000_request()
    };
    assert_refused("kubeadm-config.yaml", &bad_option, "expected true or false");
    let low_max = ChangeRequest {
        topology_manager_options: vec![("max-allowable-numa-nodes".into(), "4".into())],
        ..seed_000_request()
    };
    assert_refused("kubeadm-config.yaml", &low_max, "below 8");
    let static_only = ChangeRequest {
        cpu_manager_policy: Some("static".into()),
        ..Default::default()
    };
    assert_refused(
        "no-reserved.yaml",
        &static_only,
        "static needs reserved CPUs",
    );
    assert_refused("truncated.json", &seed_000_request(), "not valid JSON");
    assert_refused(
        "not-kubelet.yaml",
        &seed_000_request(),
        "not a KubeletConfiguration",
    );
}

#[test]
fn reserved_cpus_make_static_acceptable() {
    let (_dir, path) = staged("no-reserved.yaml");
    let request = ChangeRequest {
        cpu_manager_policy: Some("static".into()),
        reserved_cpus: Some("0,64".into()),
        ..Default::default()
    };
    let plan = plan_set(&path, &request).unwrap();
    assert!(
        plan.new_text
            .ends_with("cpuManagerPolicy: static\nreservedSystemCPUs: \"0,64\"\n")
    );
}

#[test]
fn crash_between_write_and_rename_keeps_the_original() {
    let (dir, path) = staged("oke-kubelet-config.json");
    let before = fs::read(&path).unwrap();
    let plan = plan_set(&path, &seed_000_request()).unwrap();
    let config_name = path.file_name().unwrap().to_string_lossy().into_owned();
    let crash = |step: WriteStep, temp: &Path| {
        // Crash when the config's own temp file is complete, before the rename.
        let name = temp.file_name().unwrap().to_string_lossy().into_owned();
        if step == WriteStep::Synced && !name.contains(".bak.") {
            assert_eq!(temp.parent(), path.parent());
            assert!(
                fs::read_to_string(temp)
                    .unwrap()
                    .contains("\"cpuManagerPolicy\": \"static\"")
            );
            return Err(std::io::Error::other("power lost"));
        }
        Ok(())
    };
    let err = apply_set(&plan, None, t0(), Some(&crash)).unwrap_err();
    assert!(matches!(err, ConfigError::Write(_)), "{err}");
    assert!(err.to_string().contains("power lost"), "{err}");
    assert_eq!(fs::read(&path).unwrap(), before);
    // Only the original and its backup remain: no temp file, nothing half-written.
    assert_eq!(
        names(dir.path()),
        [
            config_name.clone(),
            format!("{config_name}.bak.20250615T150640.000Z")
        ]
    );
}

fn names(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// Kills `set` and `rollback` at every step of every write they make (the backup and the
/// file itself): the file is always either the old or the whole new text, never a temp file
/// is left, and the file is a valid KubeletConfiguration.
#[test]
fn crash_at_every_write_step_of_set_and_rollback() {
    use std::cell::Cell;
    for op in ["set", "rollback"] {
        let mut k = 0;
        loop {
            let (dir, path) = staged("kubeadm-config.yaml");
            let original = fs::read(&path).unwrap();
            if op == "rollback" {
                let plan = plan_set(&path, &seed_000_request()).unwrap();
                apply_set(&plan, None, t0(), None).unwrap();
            }
            let before = fs::read(&path).unwrap();
            let calls = Cell::new(0usize);
            let crash = |_: WriteStep, _: &Path| {
                let n = calls.get();
                calls.set(n + 1);
                if n == k {
                    Err(std::io::Error::other("killed"))
                } else {
                    Ok(())
                }
            };
            let later = t0() + Duration::from_secs(60);
            let result = match op {
                "set" => {
                    let plan = plan_set(&path, &seed_000_request()).unwrap();
                    apply_set(&plan, None, later, Some(&crash)).map(|_| ())
                }
                _ => rollback(&path, RollbackOptions::default(), later, Some(&crash)).map(|_| ()),
            };
            let now = fs::read(&path).unwrap();
            let expected_new = if op == "set" {
                plan_set(&path, &seed_000_request())
                    .unwrap()
                    .new_text
                    .into_bytes()
            } else {
                original.clone()
            };
            match result {
                Ok(()) => {
                    // Every step passed: k is past the last hook call.
                    assert!(k >= calls.get(), "{op}: finished despite crash at {k}");
                    break;
                }
                Err(e) => {
                    assert!(e.to_string().contains("killed"), "{op} {k}: {e}");
                    assert!(
                        now == before || now == expected_new,
                        "{op}: crash at {k} left a mix"
                    );
                    assert!(
                        names(dir.path()).iter().all(|n| !n.ends_with(".tmp")),
                        "{op} {k}: temp left: {:?}",
                        names(dir.path())
                    );
                }
            }
            k += 1;
            assert!(k < 20, "{op}: too many steps");
        }
        // Two writes of four steps each were interrupted one step at a time.
        assert_eq!(k, 2 * WriteStep::ALL.len(), "{op}");
    }
}

#[test]
fn rollback_restores_the_newest_backup_and_backs_up_the_current_file() {
    let (dir, path) = staged("kubeadm-config.yaml");
    let original = fs::read(&path).unwrap();
    let state = dir.path().join("cpu_manager_state");
    let plan = plan_set(&path, &seed_000_request()).unwrap();
    apply_set(&plan, None, t0(), None).unwrap();
    let edited = fs::read(&path).unwrap();
    fs::write(&state, "{\"policyName\":\"static\"}").unwrap();
    let done = rollback(
        &path,
        RollbackOptions {
            cpu_state: Some(&state),
            ..Default::default()
        },
        t0() + Duration::from_secs(60),
        None,
    )
    .unwrap();
    assert_eq!(done.restored_kind, BackupKind::Set);
    assert!(
        done.changes
            .iter()
            .any(|c| c.field == "cpuManagerPolicy" && c.from == Some("static".into())),
        "{:?}",
        done.changes
    );
    assert_eq!(fs::read(&path).unwrap(), original);
    assert_eq!(
        fs::read(done.backup_of_current.as_ref().unwrap()).unwrap(),
        edited
    );
    assert_eq!(done.removed_cpu_state, Some(state));
    assert_eq!(list_backups(&path).unwrap().len(), 2);
    // An explicit backup that is not a KubeletConfiguration is refused.
    let bogus = dir.path().join("bogus.yaml");
    fs::write(&bogus, "kind: Pod\n").unwrap();
    let explicit = RollbackOptions {
        backup: Some(&bogus),
        ..Default::default()
    };
    assert!(rollback(&path, explicit, t0(), None).is_err());
    assert_eq!(fs::read(&path).unwrap(), original);
}

#[test]
fn rollback_without_backup_is_an_error() {
    let (_dir, path) = staged("kubeadm-config.yaml");
    let err = rollback(&path, RollbackOptions::default(), t0(), None).unwrap_err();
    assert!(err.to_string().contains("no backup"), "{err}");
}

/// `rollback` twice used to toggle between two versions: the second run restored the copy
/// the first had just made. Now it refuses, says why, and restores it only when forced.
#[test]
fn rollback_twice_refuses_to_undo_itself() {
    let (_dir, path) = staged("kubeadm-config.yaml");
    let original = fs::read(&path).unwrap();
    let plan = plan_set(&path, &seed_000_request()).unwrap();
    apply_set(&plan, None, t0(), None).unwrap();
    let edited = fs::read(&path).unwrap();
    let first = rollback(
        &path,
        RollbackOptions::default(),
        t0() + Duration::from_secs(1),
        None,
    )
    .unwrap();
    assert_eq!(fs::read(&path).unwrap(), original);
    let pre = first.backup_of_current.unwrap();
    assert_eq!(BackupKind::of(&pre), BackupKind::PreRollback);
    let err = rollback(
        &path,
        RollbackOptions::default(),
        t0() + Duration::from_secs(2),
        None,
    )
    .unwrap_err();
    assert!(
        matches!(err, ConfigError::WouldUndoRollback { .. }),
        "{err}"
    );
    assert!(err.to_string().contains("--force"), "{err}");
    assert_eq!(
        fs::read(&path).unwrap(),
        original,
        "refusal changed the file"
    );
    let forced = RollbackOptions {
        force: true,
        ..Default::default()
    };
    let again = rollback(&path, forced, t0() + Duration::from_secs(3), None).unwrap();
    assert_eq!(again.restored, pre);
    assert_eq!(fs::read(&path).unwrap(), edited);
}

/// A KubeletConfiguration that is a symlink into a config-management tree: `set` replaces
/// the target, keeps the link, the target's mode, and writes the backup beside the link.
#[test]
fn set_through_a_symlink_replaces_the_target_and_keeps_the_link() {
    use std::os::unix::fs::PermissionsExt;
    let (dir, real) = staged("kubeadm-config.yaml");
    fs::set_permissions(&real, fs::Permissions::from_mode(0o600)).unwrap();
    let link_dir = dir.path().join("var-lib-kubelet");
    fs::create_dir(&link_dir).unwrap();
    let link = link_dir.join("config.yaml");
    std::os::unix::fs::symlink(&real, &link).unwrap();
    let original = fs::read(&real).unwrap();
    let plan = plan_set(&link, &seed_000_request()).unwrap();
    let applied = apply_set(&plan, None, t0(), None).unwrap();
    assert!(
        fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink()
    );
    let now = fs::read_to_string(&real).unwrap();
    assert!(now.contains("cpuManagerPolicy: static"), "{now}");
    assert_eq!(
        fs::metadata(&real).unwrap().permissions().mode() & 0o777,
        0o600
    );
    assert_eq!(fs::read(&applied.backup).unwrap(), original);
    assert_eq!(applied.backup.parent(), Some(link_dir.as_path()));
    // Rolling back through the link restores the target too.
    rollback(
        &link,
        RollbackOptions::default(),
        t0() + Duration::from_secs(1),
        None,
    )
    .unwrap();
    assert!(
        fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink()
    );
    assert_eq!(fs::read(&real).unwrap(), original);
}

/// Changing cpuManagerPolicy without removing the checkpoint warns (the kubelet would
/// refuse to start); removing it does not.
#[test]
fn cpu_policy_change_without_checkpoint_handling_warns() {
    let (dir, path) = staged("kubeadm-config.yaml");
    let plan = plan_set(&path, &seed_000_request()).unwrap();
    let applied = apply_set(&plan, None, t0(), None).unwrap();
    assert!(
        applied
            .warnings
            .iter()
            .any(|w| w.contains("cpu_manager_state")),
        "{:?}",
        applied.warnings
    );
    let state = dir.path().join("cpu_manager_state");
    let back = rollback(
        &path,
        RollbackOptions {
            cpu_state: Some(&state),
            ..Default::default()
        },
        t0() + Duration::from_secs(1),
        None,
    )
    .unwrap();
    assert!(back.warnings.is_empty(), "{:?}", back.warnings);
}

/// Two YAML documents in one file: one clear line, no parser-library advice.
#[test]
fn several_documents_are_refused_in_plain_words() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("config.yaml");
    fs::write(
        &f,
        "kind: KubeletConfiguration\n---\nkind: KubeletConfiguration\n",
    )
    .unwrap();
    let e = topoalign_kubelet::ConfigDocument::read(&f)
        .unwrap_err()
        .to_string();
    assert!(e.contains("more than one YAML document"), "{e}");
    assert!(!e.contains("from_str_multiple") && !e.contains('\n'), "{e}");
}
