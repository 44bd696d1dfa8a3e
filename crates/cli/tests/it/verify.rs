//! `topoalign verify` on sysfs trees written from profiles, with a pod's /dev and env.

use std::fs;
use std::path::{Path, PathBuf};

use crate::common::{Outcome, json, run, run_expecting, subcommand};

/// A host tree of mi300x-8 and a pod /dev that holds only GPU 0000:11:00.0's render node.
fn pod() -> (tempfile::TempDir, PathBuf, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("host");
    run_expecting(
        subcommand("profile").args(["write", "mi300x-8"]).arg(&root),
        0,
    );
    let dev = dir.path().join("dev");
    fs::create_dir_all(dev.join("dri")).unwrap();
    fs::write(dev.join("dri/renderD128"), "").unwrap();
    (dir, root, dev)
}

/// Runs `topoalign verify` on `root` and `dev` with only `PCIDEVICE_AMD_COM_ROCE=vf` in
/// its environment.
fn verify(root: &Path, dev: &Path, vf: &str, extra: &[&str]) -> Outcome {
    run(subcommand("verify")
        .env_clear()
        .env("PCIDEVICE_AMD_COM_ROCE", vf)
        .arg("--sysfs-root")
        .arg(root)
        .arg("--dev-root")
        .arg(dev)
        .args(extra))
}

#[test]
fn aligned_vf_is_pix_with_gdr_and_passes_the_gate() {
    let (_g, root, dev) = pod();
    let out = verify(
        &root,
        &dev,
        "0000:0c:00.1",
        &["--require", "PXB", "-o", "json"],
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    let r = json(&out.stdout);
    let g = &r["gpus"][0];
    assert_eq!(g["bdf"], "0000:11:00.0");
    assert_eq!(g["numa"], 0);
    assert_eq!(g["bestNic"]["bdf"], "0000:0c:00.1");
    assert_eq!(g["bestNic"]["class"], "PIX");
    assert_eq!(g["bestNic"]["nccl"], "PIX");
    assert_eq!(g["bestNic"]["gdr"], true);

    let out = verify(&root, &dev, "0000:0c:00.1", &[]);
    let table = out.stdout;
    assert!(
        table.contains("0000:11:00.0") && table.contains("PIX"),
        "{table}"
    );
}

#[test]
fn cross_socket_vf_fails_the_gate() {
    let (_g, root, dev) = pod();
    let out = verify(&root, &dev, "0000:86:00.1", &["--require", "PXB"]);
    assert_eq!(out.code, 1);
    let err = &out.stderr;
    assert!(err.contains("SYS") && err.contains("0000:11:00.0"), "{err}");
    // Without --require it only reports.
    let out = verify(&root, &dev, "0000:86:00.1", &[]);
    assert_eq!(out.code, 0);
    assert!(out.stdout.contains("SYS"));
    // SYS itself is accepted by --require SYS.
    let out = verify(&root, &dev, "0000:86:00.1", &["--require", "sys"]);
    assert_eq!(out.code, 0);
}

#[test]
fn nothing_visible_fails_the_gate_with_a_message() {
    let (_g, root, dev) = pod();
    let out = verify(&root, &dev, "", &["--require", "SYS"]);
    assert_eq!(out.code, 1);
    assert!(out.stderr.contains("no NIC is visible"));
    fs::remove_file(dev.join("dri/renderD128")).unwrap();
    let out = verify(&root, &dev, "0000:0c:00.1", &["--require", "SYS"]);
    assert_eq!(out.code, 1);
    assert!(out.stderr.contains("no GPU is visible"));
}

#[test]
fn bad_input_is_a_usage_error() {
    let (_g, root, dev) = pod();
    let out = verify(&root, &dev, "0000:0c:00.1,garbage", &[]);
    assert_eq!(out.code, 2);
    let err = &out.stderr;
    assert!(
        err.contains("PCIDEVICE_AMD_COM_ROCE") && err.contains("garbage"),
        "{err}"
    );

    let out = verify(&root, &dev, "0000:0c:00.1", &["--require", "BEST"]);
    assert_eq!(out.code, 2);

    // A uverbs node whose ibdev file is gone: a warning, the NIC is not visible.
    fs::create_dir_all(dev.join("infiniband")).unwrap();
    fs::write(dev.join("infiniband/uverbs0"), "").unwrap();
    let verbs = fs::canonicalize(root.join("sys/class/infiniband_verbs/uverbs0")).unwrap();
    fs::remove_file(verbs.join("ibdev")).unwrap();
    let out = verify(&root, &dev, "", &["--require", "SYS"]);
    assert_eq!(out.code, 1);
    let err = &out.stderr;
    assert!(err.contains("uverbs0") && err.contains("ibdev"), "{err}");
}

/// A --dev-root that does not exist used to exit 0; now exit 2 with the reason.
#[test]
fn missing_dev_root_is_an_error() {
    let (_g, root, _dev) = pod();
    let out = verify(&root, Path::new("/nonexistent/dev"), "", &[]);
    assert_eq!(out.code, 2, "{}", out.stderr);
    assert!(
        out.stderr.contains("--dev-root /nonexistent/dev"),
        "{}",
        out.stderr
    );
}

/// No visible GPU fails even without --require.
#[test]
fn zero_visible_gpus_fails_without_require() {
    let (_g, root, dev) = pod();
    fs::remove_file(dev.join("dri/renderD128")).unwrap();
    let out = verify(&root, &dev, "", &[]);
    assert_eq!(out.code, 1, "{}", out.stderr);
    assert!(out.stderr.contains("no GPU is visible"), "{}", out.stderr);
}
