//! Prepare composed with the GPU vendors' CDI specs in the runtime's CDI directories: the
//! NVIDIA Container Toolkit's device of exactly each allocated GPU, found by node or UUID;
//! a missing spec reported; malformed, stale, ambiguous specs and overlapping allocations
//! refused with nothing written; AMD with and without the `amd.com/gpu` spec.

use std::path::Path;
use std::sync::Arc;

use crate::common::*;
use topoalign_dra::{
    prepare::{NVIDIA_GENERATE, cdi_file_name},
    publish::Inventory,
};
use topoalign_kubelet_plugin::{ClaimError, Engine, InMemoryClaims, Plugin, PluginConfig};

fn dgx() -> Inventory {
    Inventory::from_topology(&topoalign_profiles::get("dgx-h100").unwrap())
}

/// The GPU's `/dev/nvidiaN`.
fn minor(inv: &Inventory, gpu: usize) -> u32 {
    topoalign_dra::prepare::node_number(&inv.gpus[gpu].device_nodes, "/dev/nvidia").unwrap()
}

/// A spec in the `nvidia-ctk cdi generate` shape; index `i` is the GPU with minor
/// `order[i]`.
fn nvidia_yaml(inv: &Inventory, order: &[u32]) -> String {
    let mut out = String::from("---\ncdiVersion: 0.5.0\nkind: nvidia.com/gpu\ndevices:\n");
    for (i, &m) in order.iter().enumerate() {
        let g = (0..inv.gpus.len()).find(|&g| minor(inv, g) == m).unwrap();
        for name in [format!("\"{i}\""), inv.gpus[g].uuid.clone().unwrap()] {
            out.push_str(&format!(
                "    - name: {name}\n      containerEdits:\n        deviceNodes:\n            - path: /dev/nvidia{m}\n              hostPath: /dev/nvidia{m}\n"
            ));
        }
    }
    out.push_str("containerEdits:\n    deviceNodes:\n        - path: /dev/nvidiactl\n    mounts:\n        - hostPath: /usr/lib/x86_64-linux-gnu/libcuda.so.570.86.15\n          containerPath: /usr/lib/x86_64-linux-gnu/libcuda.so.570.86.15\n          options: [ro, nosuid, nodev, rbind, rprivate]\n");
    out
}

const SHUFFLED: [u32; 8] = [5, 2, 7, 0, 3, 6, 1, 4];

fn setup(inv: Inventory) -> (tempfile::TempDir, PluginConfig, Engine) {
    let root = tempfile::tempdir().unwrap();
    let config = PluginConfig::under(NODE, root.path());
    std::fs::create_dir_all(&config.cdi_spec_dirs[0]).unwrap();
    let e = Engine::open(config.clone(), Arc::new(inv), None).unwrap().0;
    (root, config, e)
}

fn write(dir: &Path, name: &str, text: &str) -> String {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p.display().to_string()
}

fn own_spec(config: &PluginConfig, uid: &str) -> serde_json::Value {
    let text = std::fs::read_to_string(config.cdi_dir.join(cdi_file_name(uid))).unwrap();
    serde_json::from_str(&text).unwrap()
}

fn all_paths(spec: &serde_json::Value) -> Vec<String> {
    let mut v: Vec<String> = Vec::new();
    let mut nodes = |e: &serde_json::Value| {
        for n in e["deviceNodes"].as_array().into_iter().flatten() {
            v.push(n["path"].as_str().unwrap().to_string());
        }
    };
    nodes(&spec["containerEdits"]);
    for d in spec["devices"].as_array().unwrap() {
        nodes(&d["containerEdits"]);
    }
    v
}

#[test]
fn each_nvidia_gpu_gets_the_toolkits_device_of_that_gpu_and_void() {
    let inv = dgx();
    let (_root, config, mut e) = setup(inv.clone());
    write(
        &config.cdi_spec_dirs[0],
        "nvidia.yaml",
        &nvidia_yaml(&inv, &SHUFFLED),
    );
    let pairs = [&inv.pairs[0], &inv.pairs[3]];
    let c = claim(
        &uid(1),
        pairs.iter().map(|p| result("pairs", &p.name)).collect(),
    );
    let records = e.prepare(&c).unwrap();
    for (r, p) in records.iter().zip(pairs) {
        let g = &inv.gpus[p.gpu];
        assert_eq!(
            r.cdi_device_ids,
            vec![
                format!("nvidia.com/gpu={}", g.uuid.as_ref().unwrap()),
                format!("topoalign.dev/device={}-{}", c.uid, p.name)
            ]
        );
    }
    let spec = own_spec(&config, &c.uid);
    let paths = all_paths(&spec);
    assert!(
        paths.iter().all(|p| !p.starts_with("/dev/nvidia")),
        "{paths:?}"
    );
    assert!(
        paths
            .iter()
            .any(|p| p.starts_with("/dev/infiniband/uverbs")),
        "{paths:?}"
    );
    let env = spec["containerEdits"]["env"].to_string();
    assert!(env.contains("NVIDIA_VISIBLE_DEVICES=void"), "{env}");
    assert!(!e.vendor_cdi().nvidia_missing());
}

#[tokio::test]
async fn a_missing_nvidia_spec_is_reported_and_prepare_falls_back_to_device_nodes() {
    let inv = dgx();
    let root = tempfile::tempdir().unwrap();
    let config = PluginConfig::under(NODE, root.path());
    let claims = Arc::new(InMemoryClaims::new());
    let plugin = Plugin::new(config.clone(), inv.clone(), claims.clone()).unwrap();
    assert!(plugin.vendor_cdi().nvidia_missing());
    assert_eq!(plugin.metrics().nvidia_cdi_spec_missing.get(), 1);
    let mut registry = prometheus_client::registry::Registry::default();
    plugin.metrics().register(&mut registry);
    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
    assert!(
        text.contains("topoalign_plugin_nvidia_cdi_spec_missing 1"),
        "{text}"
    );
    assert!(text.contains("nvidia-ctk cdi generate"), "{text}");

    let a = claim(&uid(1), vec![result("gpus", &inv.gpus[0].name)]);
    claims.insert(a.clone());
    let r = plugin
        .prepare_claim(
            0,
            &topoalign_kubelet_plugin::ClaimRef {
                namespace: a.namespace.clone(),
                name: a.name.clone(),
                uid: a.uid.clone(),
            },
        )
        .await
        .unwrap();
    assert_eq!(r[0].cdi_device_ids.len(), 1, "{:?}", r[0].cdi_device_ids);
    let spec = own_spec(&config, &a.uid);
    assert!(all_paths(&spec).contains(&format!("/dev/nvidia{}", minor(&inv, 0))));
    let env = spec["containerEdits"]["env"].to_string();
    assert!(
        env.contains(&format!(
            "NVIDIA_VISIBLE_DEVICES={}",
            inv.gpus[0].uuid.as_ref().unwrap()
        )),
        "{env}"
    );

    // The toolkit's spec appears: the next prepare uses it and the gauge clears.
    std::fs::create_dir_all(&config.cdi_spec_dirs[1]).unwrap();
    write(
        &config.cdi_spec_dirs[1],
        "nvidia.yaml",
        &nvidia_yaml(&inv, &SHUFFLED),
    );
    let b = claim(&uid(2), vec![result("gpus", &inv.gpus[1].name)]);
    claims.insert(b.clone());
    let r = plugin
        .prepare_claim(
            0,
            &topoalign_kubelet_plugin::ClaimRef {
                namespace: b.namespace.clone(),
                name: b.name.clone(),
                uid: b.uid.clone(),
            },
        )
        .await
        .unwrap();
    assert!(
        r[0].cdi_device_ids[0].starts_with("nvidia.com/gpu=GPU-"),
        "{r:?}"
    );
    assert_eq!(plugin.metrics().nvidia_cdi_spec_missing.get(), 0);
    assert!(!plugin.vendor_cdi().nvidia_missing());
    assert!(NVIDIA_GENERATE.contains("--output=/var/run/cdi/nvidia.yaml"));
}

/// Prepare fails naming the file and `want`; the claim left no spec and no checkpoint
/// entry, and a fixed spec then prepares it.
fn refused_and_nothing_written(e: &mut Engine, config: &PluginConfig, file: &str, want: &str) {
    let inv = e.inventory().clone();
    let c = claim(&uid(9), vec![result("pairs", &inv.pairs[0].name)]);
    let err = e.prepare(&c).unwrap_err();
    assert!(matches!(err, ClaimError::VendorCdi { .. }), "{err}");
    assert_eq!(err.code(), tonic::Code::FailedPrecondition);
    let msg = err.to_string();
    assert!(
        msg.contains(file) && msg.contains(want) && msg.contains(&c.name),
        "{msg}"
    );
    assert!(!config.cdi_dir.join(cdi_file_name(&c.uid)).exists());
    assert!(e.checkpoint().claims.is_empty());
    assert!(
        cdi_files(&config.cdi_dir)
            .iter()
            .all(|f| !f.contains(&c.uid))
    );
    write(
        &config.cdi_spec_dirs[0],
        "nvidia.yaml",
        &nvidia_yaml(&inv, &SHUFFLED),
    );
    e.prepare(&c).unwrap();
    e.unprepare(&c.uid).unwrap();
}

#[test]
fn malformed_stale_and_ambiguous_vendor_specs_fail_the_claim_and_write_nothing() {
    let inv = dgx();
    let good = nvidia_yaml(&inv, &SHUFFLED);
    let (_root, config, mut e) = setup(inv.clone());
    let dir = config.cdi_spec_dirs[0].clone();

    let f = write(&dir, "nvidia.yaml", &good[..good.len() / 2]);
    refused_and_nothing_written(&mut e, &config, &f, "not YAML");

    let f = write(
        &dir,
        "nvidia.yaml",
        &good.replace("/dev/nvidia5\n", "/dev/nvidia12\n"),
    );
    refused_and_nothing_written(&mut e, &config, &f, "/dev/nvidia12");

    // Index 1 claims the node of index 0: two devices for one node.
    let f = write(
        &dir,
        "nvidia.yaml",
        &good.replace("/dev/nvidia2\n", "/dev/nvidia5\n"),
    );
    refused_and_nothing_written(&mut e, &config, &f, "both have /dev/nvidia5");

    // The allocated GPU has no device at all.
    let m = minor(&inv, inv.pairs[0].gpu);
    let order: Vec<u32> = SHUFFLED.iter().copied().filter(|&x| x != m).collect();
    let f = write(&dir, "nvidia.yaml", &nvidia_yaml(&inv, &order));
    refused_and_nothing_written(&mut e, &config, &f, &format!("/dev/nvidia{m}"));

    // Another vendor's broken file is not ours to judge (the runtime ignores it too).
    write(&dir, "nvidia.yaml", &good);
    write(&dir, "intel.yaml", "kind: intel.com/gpu\ndevices: [\n");
    let c = claim(&uid(3), vec![result("pairs", &inv.pairs[1].name)]);
    assert!(e.prepare(&c).is_ok());
}

#[test]
fn an_allocation_overlapping_another_prepared_claim_is_refused_and_writes_nothing() {
    let (_root, config, mut e) = setup(inventory());
    let inv = inventory();
    let pair = &inv.pairs[0];
    let a = claim(&uid(1), vec![result("pairs", &pair.name)]);
    e.prepare(&a).unwrap();
    // The NIC has free VFs, so only the device name tells the plain NIC is taken.
    let nic = &inv.nics[pair.nic];
    assert!(nic.functions.len() > 1);
    e.prepare(&claim(&uid(2), vec![result("nic", &nic.name)]))
        .unwrap();
    let before = e.checkpoint().clone();
    let overlapping = [
        (result("pairs", &pair.name), "held by claim"),
        (result("gpu", &inv.gpus[pair.gpu].name), "held by claim"),
        (result("nic", &nic.name), "already prepared for claim"),
    ];
    for (i, (r, want)) in overlapping.into_iter().enumerate() {
        let b = claim(&uid(10 + i as u32), vec![r]);
        let err = e.prepare(&b).unwrap_err();
        assert_eq!(err.code(), tonic::Code::ResourceExhausted, "{err}");
        let msg = err.to_string();
        let holder = if want.starts_with("already") {
            uid(2)
        } else {
            a.uid.clone()
        };
        assert!(msg.contains(want) && msg.contains(&holder), "{msg}");
        assert_eq!(e.checkpoint(), &before);
        assert!(!config.cdi_dir.join(cdi_file_name(&b.uid)).exists());
    }
    let mut want = vec![cdi_file_name(&a.uid), cdi_file_name(&uid(2))];
    want.sort();
    assert_eq!(cdi_files(&config.cdi_dir), want);
    // Once the first claim is unprepared, the same device prepares for another.
    e.unprepare(&a.uid).unwrap();
    e.prepare(&claim(&uid(20), vec![result("pairs", &pair.name)]))
        .unwrap();
}

fn amd_json(inv: &Inventory) -> String {
    let devices: Vec<String> = inv
        .gpus
        .iter()
        .rev()
        .enumerate()
        .map(|(i, g)| {
            let nodes: Vec<String> = g
                .device_nodes
                .iter()
                .map(|n| format!(r#"{{"path":"{n}","type":"c","major":226,"minor":1}}"#))
                .collect();
            format!(
                r#"{{"name":"{i}","containerEdits":{{"deviceNodes":[{}]}}}}"#,
                nodes.join(",")
            )
        })
        .collect();
    format!(
        r#"{{"cdiVersion":"0.6.0","kind":"amd.com/gpu","devices":[{}]}}"#,
        devices.join(",")
    )
}

#[test]
fn amd_gpus_use_the_amd_spec_when_present_else_the_rocm_nodes() {
    let inv = inventory();
    let (_root, config, mut e) = setup(inv.clone());
    let pair = &inv.pairs[0];
    let a = claim(&uid(1), vec![result("pairs", &pair.name)]);
    let r = e.prepare(&a).unwrap();
    assert_eq!(r[0].cdi_device_ids.len(), 1);
    let paths = all_paths(&own_spec(&config, &a.uid));
    for n in [
        "/dev/kfd",
        "/dev/dri/renderD",
        "/dev/dri/card",
        "/dev/infiniband/uverbs",
    ] {
        assert!(paths.iter().any(|p| p.starts_with(n)), "{n} in {paths:?}");
    }
    assert!(
        !e.vendor_cdi().nvidia_missing(),
        "an AMD node needs no NVIDIA spec"
    );

    // The AMD toolkit's spec in the (shared) runtime CDI directory: its device per GPU.
    write(&config.cdi_dir, "amd.json", &amd_json(&inv));
    // Pairs on GPUs of their own (the profile has two pairs per GPU).
    let mut distinct = inv.pairs.iter().filter(|p| p.gpu != pair.gpu);
    let p1 = distinct.next().unwrap();
    let p2 = inv
        .pairs
        .iter()
        .find(|p| p.gpu != pair.gpu && p.gpu != p1.gpu)
        .unwrap();
    let b = claim(&uid(2), vec![result("pairs", &p1.name)]);
    let r = e.prepare(&b).unwrap();
    let g1 = p1.gpu;
    // amd_json lists the GPUs in reverse bus order.
    assert_eq!(
        r[0].cdi_device_ids,
        vec![
            format!("amd.com/gpu={}", inv.gpus.len() - 1 - g1),
            format!("topoalign.dev/device={}-{}", b.uid, p1.name)
        ]
    );
    let paths = all_paths(&own_spec(&config, &b.uid));
    assert!(
        paths
            .iter()
            .all(|p| !p.starts_with("/dev/dri") && p != "/dev/kfd"),
        "{paths:?}"
    );
    // A lone GPU needs nothing of this driver's: the vendor's id only, no spec.
    let free = inv
        .gpus
        .iter()
        .find(|g| {
            ![pair.gpu, g1, p2.gpu]
                .iter()
                .any(|&i| inv.gpus[i].index == g.index)
        })
        .unwrap();
    let c = claim(&uid(3), vec![result("gpu", &free.name)]);
    let r = e.prepare(&c).unwrap();
    assert_eq!(r[0].cdi_device_ids.len(), 1);
    assert!(r[0].cdi_device_ids[0].starts_with("amd.com/gpu="));
    assert!(!config.cdi_dir.join(cdi_file_name(&c.uid)).exists());
    // A broken AMD spec fails AMD claims.
    write(&config.cdi_dir, "amd.json", "{\"kind\": \"amd.com/gpu\", ");
    let d = claim(&uid(4), vec![result("pairs", &p2.name)]);
    let err = e.prepare(&d).unwrap_err();
    assert!(err.to_string().contains("amd.json"), "{err}");
}

/// `--cdi-net-devices`: a prepared RoCE pair's VF interface goes into the container
/// (CDI `netDevices`, spec 1.1.0); off (the default), the spec stays at its version with
/// no such edit.
#[test]
fn roce_interfaces_move_into_the_container_only_when_asked() {
    let inv = Inventory::from_topology(&topoalign_profiles::get("mi300x-8").unwrap());
    for on in [false, true] {
        let root = tempfile::tempdir().unwrap();
        let mut config = PluginConfig::under(NODE, root.path());
        config.cdi_net_devices = on;
        let mut e = Engine::open(config.clone(), Arc::new(inv.clone()), None)
            .unwrap()
            .0;
        let c = claim(&uid(1), vec![result("pairs", &inv.pairs[0].name)]);
        e.prepare(&c).unwrap();
        let spec = own_spec(&config, &c.uid);
        let text = spec.to_string();
        assert_eq!(text.contains("netDevices"), on, "{text}");
        assert_eq!(spec["cdiVersion"] == "1.1.0", on, "{}", spec["cdiVersion"]);
    }
}
