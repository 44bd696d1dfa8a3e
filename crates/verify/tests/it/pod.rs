//! Verification against sysfs trees written from the built-in profiles, with a pod's
//! /dev holding only some device nodes.

use std::fs;
use std::path::{Path, PathBuf};

use topoalign_discover::write_tree;
use topoalign_profiles as profiles;
use topoalign_topology::{NcclPath, PcieClass};
use topoalign_verify::verify;

/// A host tree of `profile` and an empty pod /dev beside it.
fn host(profile: &str) -> (tempfile::TempDir, PathBuf, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("host");
    write_tree(&profiles::get(profile).unwrap(), &root).unwrap();
    let dev = dir.path().join("pod-dev");
    fs::create_dir_all(&dev).unwrap();
    (dir, root, dev)
}

fn touch(dev: &Path, rel: &str) {
    let p = dev.join(rel);
    fs::create_dir_all(p.parent().unwrap()).unwrap();
    fs::write(p, "").unwrap();
}

fn env(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

#[test]
fn amd_pod_with_its_switch_mate_vf_is_pix_with_gdr() {
    let (_g, root, dev) = host("mi300x-8");
    touch(&dev, "dri/renderD128");
    let r = verify(
        &root,
        &dev,
        env(&[("PCIDEVICE_AMD_COM_RDMA", "0000:0c:00.1")]),
    )
    .unwrap();
    assert_eq!(r.gpus.len(), 1);
    let g = &r.gpus[0];
    assert_eq!(g.bdf, "0000:11:00.0");
    assert_eq!(g.numa, Some(0));
    let best = g.best_nic.as_ref().unwrap();
    assert_eq!(best.nic.bdf, "0000:0c:00.1");
    assert!(best.nic.vf);
    assert_eq!(best.class, PcieClass::Pix);
    assert_eq!(best.nccl, NcclPath::Pix);
    assert!(best.gdr);
    assert!(r.failures(PcieClass::Pxb).is_empty());
}

#[test]
fn cross_socket_vf_is_sys_and_fails_pxb() {
    let (_g, root, dev) = host("mi300x-8");
    touch(&dev, "dri/renderD128");
    let r = verify(
        &root,
        &dev,
        env(&[("PCIDEVICE_AMD_COM_RDMA", "0000:86:00.1")]),
    )
    .unwrap();
    let best = r.gpus[0].best_nic.as_ref().unwrap();
    assert_eq!(best.class, PcieClass::Sys);
    assert!(!best.gdr);
    let f = r.failures(PcieClass::Pxb);
    assert_eq!(f.len(), 1);
    assert!(
        f[0].contains("0000:11:00.0") && f[0].contains("SYS"),
        "{f:?}"
    );
    assert!(r.failures(PcieClass::Sys).is_empty());
}

#[test]
fn best_of_several_nics_and_uverbs_nodes() {
    let (_g, root, dev) = host("mi300x-8");
    touch(&dev, "dri/renderD129"); // GPU 0000:2f:00.0
    touch(&dev, "infiniband/uverbs0"); // mlx5_0 at 0000:0c:00.0: NODE for this GPU
    touch(&dev, "infiniband/uverbs1"); // mlx5_1 at 0000:2a:00.0: PIX
    let r = verify(&root, &dev, env(&[])).unwrap();
    assert_eq!(r.nics.len(), 2);
    let best = r.gpus[0].best_nic.as_ref().unwrap();
    assert_eq!(best.nic.name.as_deref(), Some("mlx5_1"));
    assert_eq!(best.class, PcieClass::Pix);
}

#[test]
fn nvidia_by_minor_uuid_and_index() {
    let (_g, root, dev) = host("dgx-h100");
    let t = profiles::get("dgx-h100").unwrap();
    touch(&dev, "nvidia2");
    let r = verify(&root, &dev, env(&[("PCIDEVICE_IB", "0000:4f:00.0")])).unwrap();
    assert_eq!(r.gpus.len(), 1);
    assert_eq!(r.gpus[0].bdf, t.gpu_bdf(2).to_string());
    assert_eq!(r.gpus[0].best_nic.as_ref().unwrap().class, PcieClass::Pix);

    let empty = dev.join("none");
    fs::create_dir_all(&empty).unwrap();
    let uuid = t.gpus[5].uuid.clone().unwrap();
    let r = verify(
        &root,
        &empty,
        env(&[("NVIDIA_VISIBLE_DEVICES", &format!("{uuid},0"))]),
    )
    .unwrap();
    let bdfs: Vec<&str> = r.gpus.iter().map(|g| g.bdf.as_str()).collect();
    assert_eq!(bdfs, vec!["0000:1b:00.0", "0000:c3:00.0"]);
    // CUDA_VISIBLE_DEVICES indexes the visible GPUs: 1 is the second one.
    let r = verify(
        &root,
        &empty,
        env(&[
            ("NVIDIA_VISIBLE_DEVICES", "all"),
            ("CUDA_VISIBLE_DEVICES", "1"),
        ]),
    )
    .unwrap();
    assert_eq!(r.gpus.len(), 1);
    assert_eq!(r.gpus[0].bdf, "0000:43:00.0");
    assert!(!r.failures(PcieClass::Sys).is_empty(), "no NIC visible");
}

#[test]
fn bad_inputs() {
    let (_g, root, dev) = host("mi300x-8");
    let err = verify(&root, &dev, env(&[("PCIDEVICE_X", "0000:0c:00.1,zz")]))
        .unwrap_err()
        .to_string();
    assert!(err.contains("PCIDEVICE_X") && err.contains("zz"), "{err}");

    touch(&dev, "dri/renderD128");
    touch(&dev, "infiniband/uverbs3");
    let verbs = fs::canonicalize(root.join("sys/class/infiniband_verbs/uverbs3")).unwrap();
    fs::remove_file(verbs.join("ibdev")).unwrap();
    let r = verify(&root, &dev, env(&[])).unwrap();
    assert!(r.nics.is_empty());
    assert!(
        r.warnings
            .iter()
            .any(|w| w.contains("uverbs3") && w.contains("ibdev")),
        "{:?}",
        r.warnings
    );
    let f = r.failures(PcieClass::Sys);
    assert!(f.iter().any(|m| m.contains("no NIC is visible")), "{f:?}");

    let err = verify(Path::new("/nonexistent/root"), &dev, env(&[]))
        .unwrap_err()
        .to_string();
    assert!(err.contains("/nonexistent/root"), "{err}");
}
