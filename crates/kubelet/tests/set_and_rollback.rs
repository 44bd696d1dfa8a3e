#![allow(clippy::unwrap_used, clippy::expect_used)]
//! End-to-end: golden edits of realistic files, refusals that leave files untouched,
//! a crash between write and rename, rollback.

mod support;

use std::fs;
use std::path::Path;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use support::{fixture, staged};
use topoalign_kubelet::backup::list_backups;
use topoalign_kubelet::{
    ChangeRequest, ConfigError, NoHook, WriteHook, apply_set, plan_set, rollback,
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
    let applied = apply_set(&plan, Some(&state), t0(), &NoHook).unwrap();
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
    apply_set(&plan, Some(&state), t0(), &NoHook).unwrap();
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

struct CrashBeforeRename;

impl WriteHook for CrashBeforeRename {
    fn before_rename(&self, temp: &Path, target: &Path) -> std::io::Result<()> {
        // The temp file is complete and sits beside the target.
        assert_eq!(temp.parent(), target.parent());
        assert!(
            fs::read_to_string(temp)
                .unwrap()
                .contains("\"cpuManagerPolicy\": \"static\"")
        );
        Err(std::io::Error::other("power lost"))
    }
}

#[test]
fn crash_between_write_and_rename_keeps_the_original() {
    let (dir, path) = staged("oke-kubelet-config.json");
    let before = fs::read(&path).unwrap();
    let plan = plan_set(&path, &seed_000_request()).unwrap();
    let err = apply_set(&plan, None, t0(), &CrashBeforeRename).unwrap_err();
    assert!(matches!(err, ConfigError::Io { .. }), "{err}");
    assert_eq!(fs::read(&path).unwrap(), before);
    // Only the original and its backup remain: no temp file, nothing half-written.
    let mut names: Vec<String> = fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(
        names,
        [
            "oke-kubelet-config.json",
            "oke-kubelet-config.json.bak.20250615T150640.000Z"
        ]
    );
}

#[test]
fn rollback_restores_the_newest_backup_and_backs_up_the_current_file() {
    let (dir, path) = staged("kubeadm-config.yaml");
    let original = fs::read(&path).unwrap();
    let state = dir.path().join("cpu_manager_state");
    let plan = plan_set(&path, &seed_000_request()).unwrap();
    apply_set(&plan, None, t0(), &NoHook).unwrap();
    let edited = fs::read(&path).unwrap();
    fs::write(&state, "{\"policyName\":\"static\"}").unwrap();
    let done = rollback(
        &path,
        None,
        Some(&state),
        t0() + Duration::from_secs(60),
        &NoHook,
    )
    .unwrap();
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
    assert!(rollback(&path, Some(&bogus), None, t0(), &NoHook).is_err());
    assert_eq!(fs::read(&path).unwrap(), original);
}

#[test]
fn rollback_without_backup_is_an_error() {
    let (_dir, path) = staged("kubeadm-config.yaml");
    let err = rollback(&path, None, None, t0(), &NoHook).unwrap_err();
    assert!(err.to_string().contains("no backup"), "{err}");
}
