//! Kill-at-every-step tests: prepare and unprepare are interrupted at every write step
//! (the hook panics there, as a crash would stop the process), leftovers of the
//! interrupted atomic write are planted as a real crash would leave them, and a new
//! engine must reconcile to a consistent state: the CDI directory holds exactly the
//! checkpointed claims' specs, nothing is lost, and the kubelet's retry completes.

use std::os::unix::fs::MetadataExt;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use crate::common::*;
use topoalign_atomic::WriteStep;
use topoalign_dra::prepare::cdi_file_name;
use topoalign_kubelet_plugin::json_bytes;
use topoalign_kubelet_plugin::{
    ClaimAllocation, ClaimError, Engine, FaultHook, FaultPoint, PluginConfig,
};

fn open(config: &PluginConfig, hook: Option<FaultHook>) -> Engine {
    Engine::open(config.clone(), Arc::new(inventory()), hook)
        .unwrap()
        .0
}

fn two_device_claim() -> ClaimAllocation {
    let inv = inventory();
    let pair = &inv.pairs[0];
    let gpu = inv
        .gpus
        .iter()
        .find(|g| g.index != inv.gpus[pair.gpu].index)
        .unwrap();
    claim(
        &uid(7),
        vec![result("pairs", &pair.name), result("gpu", &gpu.name)],
    )
}

/// Every fault point an operation passes, in order.
fn points_of(op: impl Fn(&mut Engine)) -> Vec<FaultPoint> {
    let dir = tempfile::tempdir().unwrap();
    let config = PluginConfig::under(NODE, dir.path());
    let seen = Arc::new(Mutex::new(Vec::new()));
    let s = seen.clone();
    let mut e = open(
        &config,
        Some(Arc::new(move |p| {
            s.lock().unwrap().push(p);
            Ok(())
        })),
    );
    seen.lock().unwrap().clear();
    op(&mut e);

    seen.lock().unwrap().clone()
}

fn crash_at(k: usize) -> FaultHook {
    let n = AtomicUsize::new(0);
    Arc::new(move |p| {
        if n.fetch_add(1, Ordering::SeqCst) == k {
            panic!("simulated crash at {p:?}");
        }
        Ok(())
    })
}

/// Leaves what a crash inside an atomic write leaves: temporary files beside the targets.
fn plant_temporaries(config: &PluginConfig, uid: &str) {
    std::fs::write(
        config
            .cdi_dir
            .join(format!(".{}.Xa1b2c.tmp", cdi_file_name(uid))),
        b"{",
    )
    .unwrap();
    std::fs::write(config.state_dir.join(".checkpoint.json.Yd3e4f.tmp"), b"{").unwrap();
}

/// The invariant: CDI files of ours are exactly the checkpointed claims' specs, byte for
/// byte; no temporary file anywhere.
fn assert_consistent(config: &PluginConfig, e: &Engine) {
    let mut want: Vec<String> = e
        .checkpoint()
        .claims
        .iter()
        .filter(|(_, c)| c.spec.is_some())
        .map(|(u, _)| cdi_file_name(u))
        .collect();
    want.sort();
    assert_eq!(cdi_files(&config.cdi_dir), want);
    for (u, c) in &e.checkpoint().claims {
        if let Some(spec) = &c.spec {
            assert_eq!(
                std::fs::read(e.cdi_path(u)).unwrap(),
                json_bytes(spec).unwrap()
            );
        }
    }
    assert!(
        cdi_files(&config.state_dir)
            .iter()
            .all(|n| !n.ends_with(".tmp"))
    );
}

#[test]
fn prepare_survives_a_crash_at_every_step() {
    let c = two_device_claim();
    let points = points_of(|e| {
        e.prepare(&c).unwrap();
    });
    assert_eq!(
        points,
        [
            WriteStep::ALL.map(FaultPoint::Checkpoint),
            WriteStep::ALL.map(FaultPoint::Cdi)
        ]
        .concat()
    );
    let committed = points
        .iter()
        .position(|p| *p == FaultPoint::Checkpoint(WriteStep::Renamed))
        .unwrap();
    let reference = {
        let dir = tempfile::tempdir().unwrap();
        open(&PluginConfig::under(NODE, dir.path()), None)
            .prepare(&c)
            .unwrap()
    };
    for (k, point) in points.iter().enumerate() {
        let dir = tempfile::tempdir().unwrap();
        let config = PluginConfig::under(NODE, dir.path());
        let mut e = open(&config, Some(crash_at(k)));
        let crashed = catch_unwind(AssertUnwindSafe(|| e.prepare(&c)));
        assert!(crashed.is_err(), "step {k} ({point:?}) did not crash");
        drop(e);
        plant_temporaries(&config, &c.uid);

        let (mut e, report) = Engine::open(config.clone(), Arc::new(inventory()), None).unwrap();
        assert_eq!(report.removed_temporaries.len(), 2, "step {k}");
        assert_consistent(&config, &e);
        let prepared = e.checkpoint().claims.contains_key(&c.uid);
        assert_eq!(prepared, k >= committed, "step {k} ({point:?})");
        // The kubelet retries: the same devices, the same spec.
        assert_eq!(e.prepare(&c).unwrap(), reference, "step {k}");
        assert_consistent(&config, &e);
        assert_eq!(cdi_files(&config.cdi_dir).len(), 1);
        e.unprepare(&c.uid).unwrap();
        assert_consistent(&config, &e);
        assert!(cdi_files(&config.cdi_dir).is_empty());
    }
}

#[test]
fn unprepare_survives_a_crash_at_every_step() {
    let c = two_device_claim();
    let setup = |config: &PluginConfig| open(config, None).prepare(&c).unwrap();
    let points = points_of(|e| {
        e.prepare(&c).unwrap();
    });
    let unprepare_points = {
        let dir = tempfile::tempdir().unwrap();
        let config = PluginConfig::under(NODE, dir.path());
        setup(&config);
        let seen = Arc::new(Mutex::new(Vec::new()));
        let s = seen.clone();
        let mut e = open(
            &config,
            Some(Arc::new(move |p| {
                s.lock().unwrap().push(p);
                Ok(())
            })),
        );
        e.unprepare(&c.uid).unwrap();

        seen.lock().unwrap().clone()
    };
    assert_eq!(points.len(), 8);
    assert_eq!(
        unprepare_points,
        [
            vec![FaultPoint::CdiRemoved],
            WriteStep::ALL.map(FaultPoint::Checkpoint).to_vec()
        ]
        .concat()
    );
    for k in 0..unprepare_points.len() {
        let dir = tempfile::tempdir().unwrap();
        let config = PluginConfig::under(NODE, dir.path());
        setup(&config);
        let mut e = open(&config, Some(crash_at(k)));
        assert!(catch_unwind(AssertUnwindSafe(|| e.unprepare(&c.uid))).is_err());
        drop(e);
        plant_temporaries(&config, &c.uid);
        let (mut e, _) = Engine::open(config.clone(), Arc::new(inventory()), None).unwrap();
        assert_consistent(&config, &e);
        let gone = k == unprepare_points.len() - 1;
        assert_eq!(
            !e.checkpoint().claims.contains_key(&c.uid),
            gone,
            "step {k}"
        );
        e.unprepare(&c.uid).unwrap();
        assert_consistent(&config, &e);
        assert!(cdi_files(&config.cdi_dir).is_empty());
        assert!(e.checkpoint().claims.is_empty());
    }
}

#[test]
fn reconcile_removes_orphans_and_restores_missing_specs() {
    let dir = tempfile::tempdir().unwrap();
    let config = PluginConfig::under(NODE, dir.path());
    let c = two_device_claim();
    let mut e = open(&config, None);
    e.prepare(&c).unwrap();
    let path = e.cdi_path(&c.uid);
    drop(e);
    std::fs::remove_file(&path).unwrap();
    let orphan = config.cdi_dir.join(cdi_file_name(&uid(99)));
    std::fs::write(&orphan, b"{}").unwrap();
    let foreign = config.cdi_dir.join("vendor.com-gpu.json");
    std::fs::write(&foreign, b"{}").unwrap();
    let (e, report) = Engine::open(config.clone(), Arc::new(inventory()), None).unwrap();
    assert_eq!(report.removed_orphans, vec![orphan]);
    assert_eq!(report.rewritten, vec![c.uid.clone()]);
    assert!(path.exists());
    assert!(
        foreign.exists(),
        "another vendor's spec is not ours to touch"
    );
    drop(e);
}

#[test]
fn read_only_cdi_dir_fails_cleanly() {
    let dir = tempfile::tempdir().unwrap();
    let config = PluginConfig::under(NODE, dir.path());
    let c = two_device_claim();
    let root = std::fs::metadata("/proc/self")
        .map(|m| m.uid() == 0)
        .unwrap_or(true);
    let hook: Option<FaultHook> = if root {
        // Root ignores directory modes; inject what the kernel returns on a read-only
        // mount (EROFS) where the atomic writer creates its temporary file.
        Some(Arc::new(|p| match p {
            FaultPoint::Cdi(WriteStep::Created) => Err(std::io::Error::from_raw_os_error(30)),
            _ => Ok(()),
        }))
    } else {
        None
    };
    let mut e = open(&config, hook);
    if !root {
        set_mode(&config.cdi_dir, 0o555);
    }
    let err = e.prepare(&c).unwrap_err();
    if !root {
        set_mode(&config.cdi_dir, 0o755);
    }
    assert!(matches!(err, ClaimError::Write { .. }), "{err:?}");
    assert_eq!(err.code(), tonic::Code::Internal);
    let msg = err.to_string();
    assert!(msg.contains(&config.cdi_dir.display().to_string()), "{msg}");
    assert!(msg.contains(&c.uid), "{msg}");
    assert!(cdi_files(&config.cdi_dir).is_empty(), "no partial file");
    assert!(
        e.checkpoint().claims.is_empty(),
        "the reservation is rolled back"
    );
    let reopened = open(&config, None);
    assert!(reopened.checkpoint().claims.is_empty());
}

fn set_mode(p: &Path, mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).unwrap();
}

#[test]
fn crash_points_are_named_and_parsed_back() {
    for p in FaultPoint::ALL {
        assert_eq!(p.name().parse::<FaultPoint>().unwrap(), p);
    }
    let err = "cdi-done".parse::<FaultPoint>().unwrap_err().to_string();
    assert!(
        err.contains("\"cdi-done\"") && err.contains("checkpoint-created"),
        "{err}"
    );
}
