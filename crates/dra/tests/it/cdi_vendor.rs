//! Vendor CDI specs: parsing what `nvidia-ctk cdi generate` / `amd-ctk cdi generate`
//! write, finding each allocated GPU's device by node or UUID, every bad spec refused by
//! name, and the claim's own CDI composed around the vendor's devices.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use topoalign_dra::prepare::ENV_NVIDIA_VISIBLE_DEVICES;
use topoalign_dra::prepare::{NVIDIA_GENERATE, node_number};
use topoalign_dra::{
    AllocationError, DRIVER_NAME,
    alloc::AllocatedDevice,
    prepare::{
        CdiPlan, Holdings, PreparedDevice, PreparedGpu, VendorCdiError, VendorSpec, compose_cdi,
        parse_vendor_spec, prepare_allocation, vendor_gpu_ids,
    },
    publish::Inventory,
};

fn alloc(device: &str) -> AllocatedDevice {
    AllocatedDevice {
        request: "r".into(),
        driver: DRIVER_NAME.into(),
        pool: "n1".into(),
        device: device.into(),
    }
}

fn inv(profile: &str) -> Inventory {
    Inventory::from_topology(&topoalign_profiles::get(profile).unwrap())
}

/// A spec in the shape `nvidia-ctk cdi generate` writes (index and UUID names, `all`,
/// spec-level control node, mounts and hooks). Index `i` is the GPU whose minor is
/// `minors[i]`: not bus order unless `minors` is.
fn nvidia_yaml(inv: &Inventory, minors: &[u32]) -> String {
    let mut devices = String::new();
    let mut all = String::new();
    for (i, &m) in minors.iter().enumerate() {
        let g = inv
            .gpus
            .iter()
            .find(|g| node_number(&g.device_nodes, "/dev/nvidia") == Some(m))
            .unwrap();
        let node = format!(
            "        deviceNodes:\n            - path: /dev/nvidia{m}\n              hostPath: /dev/nvidia{m}\n"
        );
        devices.push_str(&format!(
            "    - name: \"{i}\"\n      containerEdits:\n{node}    - name: {}\n      containerEdits:\n{node}",
            g.uuid.as_ref().unwrap()
        ));
        all.push_str(&format!("            - path: /dev/nvidia{m}\n"));
    }
    format!(
        "---\ncdiVersion: 0.5.0\nkind: nvidia.com/gpu\ndevices:\n{devices}    - name: all\n      containerEdits:\n        deviceNodes:\n{all}containerEdits:\n    env:\n        - NVIDIA_VISIBLE_DEVICES=void\n    deviceNodes:\n        - path: /dev/nvidiactl\n          hostPath: /dev/nvidiactl\n    hooks:\n        - hookName: createContainer\n          path: /usr/bin/nvidia-cdi-hook\n          args: [nvidia-cdi-hook, update-ldcache, --folder, /usr/lib/x86_64-linux-gnu]\n    mounts:\n        - hostPath: /usr/lib/x86_64-linux-gnu/libcuda.so.570.86.15\n          containerPath: /usr/lib/x86_64-linux-gnu/libcuda.so.570.86.15\n          options: [ro, nosuid, nodev, rbind, rprivate]\n"
    )
}

fn parse(path: &str, text: &str) -> VendorSpec {
    parse_vendor_spec(Path::new(path), 0, text)
        .unwrap()
        .unwrap()
}

fn gpus_of(prepared: &[PreparedDevice]) -> Vec<&PreparedGpu> {
    prepared.iter().filter_map(|d| d.gpu.as_ref()).collect()
}

const SHUFFLED: [u32; 8] = [3, 0, 6, 1, 7, 2, 5, 4];

#[test]
fn the_nvidia_ctk_shape_parses_and_other_files_are_left_alone() {
    let h = inv("dgx-h100");
    let spec = parse("/etc/cdi/nvidia.yaml", &nvidia_yaml(&h, &SHUFFLED));
    assert_eq!(spec.kind, "nvidia.com/gpu");
    assert_eq!(spec.devices.len(), 17, "8 by index, 8 by UUID, all");
    assert_eq!(spec.devices[0].name, "0");
    assert_eq!(spec.devices[0].nodes, vec!["/dev/nvidia3"]);
    // Another vendor's spec, and text that is no spec and names no composed kind.
    let other = "cdiVersion: 0.5.0\nkind: intel.com/gpu\ndevices: [{name: gpu0, containerEdits: {deviceNodes: [{path: /dev/dri/card0}]}}]\n";
    assert_eq!(
        parse_vendor_spec(Path::new("i.yaml"), 0, other).unwrap(),
        None
    );
    assert_eq!(
        parse_vendor_spec(Path::new("x.json"), 0, "{oops").unwrap(),
        None
    );
}

#[test]
fn malformed_vendor_specs_are_refused_naming_the_file_and_what_is_wrong() {
    let cases = [
        (
            "/c/nvidia.yaml",
            "kind: nvidia.com/gpu\ndevices: [\n",
            "not YAML",
        ),
        (
            "/c/nvidia.json",
            "{\"kind\": \"nvidia.com/gpu\", \"devices\": [",
            "not JSON",
        ),
        (
            "/c/nvidia.yaml",
            "cdiVersion: 0.5.0\nkind: nvidia.com/gpu\n",
            "devices",
        ),
        (
            "/c/nvidia.yaml",
            "cdiVersion: 0.5.0\nkind: nvidia.com/gpu\ndevices: []\n",
            "no devices",
        ),
        (
            "/c/nvidia.yaml",
            "cdiVersion: 0.5.0\nkind: nvidia.com/gpu\ndevices:\n- name: \"0\"\n  containerEdits: {deviceNodes: [{path: /dev/nvidia0}]}\n- containerEdits: {}\n",
            "device 1",
        ),
        (
            "/c/nvidia.yaml",
            "cdiVersion: 0.5.0\nkind: nvidia.com/gpu\ndevices:\n- {name: \"0\", containerEdits: {deviceNodes: [{path: /dev/nvidia0}]}}\n- {name: \"0\", containerEdits: {deviceNodes: [{path: /dev/nvidia1}]}}\n",
            "defined twice",
        ),
        (
            "/c/amd.json",
            r#"{"cdiVersion":"0.6.0","kind":"amd.com/gpu","devices":[{"name":"0","containerEdits":{"deviceNodes":[{"path":"dev/kfd"}]}}]}"#,
            "not absolute",
        ),
    ];
    for (path, text, want) in cases {
        let e = parse_vendor_spec(Path::new(path), 0, text).unwrap_err();
        assert!(matches!(e, VendorCdiError::Malformed { .. }), "{e}");
        let msg = e.to_string();
        assert!(msg.contains(path) && msg.contains(want), "{path}: {msg}");
    }
}

#[test]
fn each_gpu_gets_its_own_device_by_node_and_uuid_not_by_index() {
    let h = inv("dgx-h100");
    let pairs: Vec<_> = h.pairs.iter().take(8).map(|p| alloc(&p.name)).collect();
    let prepared = prepare_allocation(&h, "n1", &pairs, &Holdings::default()).unwrap();
    let gpus = gpus_of(&prepared);

    let spec = parse("/etc/cdi/nvidia.yaml", &nvidia_yaml(&h, &SHUFFLED));
    let ids = vendor_gpu_ids(std::slice::from_ref(&spec), &h.gpus, &gpus).unwrap();
    assert_eq!(ids.len(), gpus.len());
    for g in &gpus {
        assert_eq!(
            ids[&g.bdf],
            format!("nvidia.com/gpu={}", g.uuid.as_ref().unwrap())
        );
    }

    // A spec with index names only (`--device-name-strategy=index`): the index whose
    // node is the GPU's, never the GPU's position.
    let mut by_index = spec.clone();
    by_index.devices.retain(|d| !d.name.starts_with("GPU-"));
    let ids = vendor_gpu_ids(&[by_index], &h.gpus, &gpus).unwrap();
    for g in &gpus {
        let minor = node_number(&g.device_nodes, "/dev/nvidia").unwrap();
        let index = SHUFFLED.iter().position(|&m| m == minor).unwrap();
        assert_eq!(ids[&g.bdf], format!("nvidia.com/gpu={index}"), "{}", g.bdf);
    }
    assert_ne!(
        ids[&gpus[0].bdf], "nvidia.com/gpu=0",
        "the first GPU on the bus is not index 0 here"
    );

    // MIG devices (with /dev/nvidia-caps nodes) and `all` are never a whole GPU.
    let mut mig = spec.clone();
    mig.devices.insert(
        0,
        topoalign_dra::prepare::VendorDevice {
            name: "0:0".into(),
            nodes: vec![
                "/dev/nvidia3".into(),
                "/dev/nvidia-caps/nvidia-cap12".into(),
            ],
        },
    );
    let ids = vendor_gpu_ids(&[mig], &h.gpus, &gpus).unwrap();
    assert!(ids.values().all(|id| id.contains("=GPU-")), "{ids:?}");
}

fn stale_err(spec: VendorSpec, h: &Inventory, gpus: &[&PreparedGpu]) -> String {
    let e = vendor_gpu_ids(&[spec], &h.gpus, gpus).unwrap_err();
    let msg = e.to_string();
    assert!(msg.contains("/etc/cdi/nvidia.yaml"), "{msg}");
    assert!(msg.contains(NVIDIA_GENERATE), "{msg}");
    msg
}

#[test]
fn stale_ambiguous_and_conflicting_specs_are_refused_naming_file_and_device() {
    let h = inv("dgx-h100");
    let prepared =
        prepare_allocation(&h, "n1", &[alloc(&h.gpus[2].name)], &Holdings::default()).unwrap();
    let gpus = gpus_of(&prepared);
    let good = parse("/etc/cdi/nvidia.yaml", &nvidia_yaml(&h, &SHUFFLED));

    // A device whose node no GPU of the node has (generated before a GPU went away).
    let mut gone = good.clone();
    gone.devices[0].nodes = vec!["/dev/nvidia9".into()];
    let msg = stale_err(gone, &h, &gpus);
    assert!(
        msg.contains("\"0\"") && msg.contains("/dev/nvidia9"),
        "{msg}"
    );

    // The GPU's UUID device names another node (numbering changed since).
    let uuid = gpus[0].uuid.clone().unwrap();
    let mut moved = good.clone();
    for d in &mut moved.devices {
        if d.name == uuid {
            d.nodes = vec!["/dev/nvidia7".into()];
        }
    }
    let msg = stale_err(moved, &h, &gpus);
    assert!(msg.contains(&uuid) && msg.contains("/dev/nvidia7"), "{msg}");

    // A UUID this node does not have.
    let mut foreign = good.clone();
    foreign.devices[1].name = "GPU-00000000-0000-0000-0000-000000000000".into();
    let msg = stale_err(foreign, &h, &gpus);
    assert!(msg.contains("GPU-00000000"), "{msg}");

    // No device at all for the allocated GPU.
    let minor = node_number(&gpus[0].device_nodes, "/dev/nvidia").unwrap();
    let mut missing = good.clone();
    missing
        .devices
        .retain(|d| d.nodes != vec![format!("/dev/nvidia{minor}")] && d.name != "all");
    let e = vendor_gpu_ids(&[missing], &h.gpus, &gpus).unwrap_err();
    assert!(matches!(e, VendorCdiError::NoDevice { .. }), "{e}");
    assert!(e.to_string().contains(&gpus[0].bdf.to_string()), "{e}");

    // Two index devices with the same node.
    let mut twice = good.clone();
    twice.devices[2].nodes = twice.devices[0].nodes.clone();
    let e = vendor_gpu_ids(&[twice], &h.gpus, &gpus).unwrap_err();
    assert!(matches!(e, VendorCdiError::Ambiguous { .. }), "{e}");
    assert!(e.to_string().contains("/dev/nvidia3"), "{e}");

    // The same device in two files of one directory: the runtime drops it.
    let mut copy = good.clone();
    copy.path = PathBuf::from("/etc/cdi/nvidia-copy.yaml");
    let e = vendor_gpu_ids(&[good.clone(), copy.clone()], &h.gpus, &gpus).unwrap_err();
    assert!(matches!(e, VendorCdiError::Conflict { .. }), "{e}");
    assert!(e.to_string().contains("nvidia-copy.yaml"), "{e}");
    // In a later directory it overrides instead.
    copy.priority = 1;
    assert!(vendor_gpu_ids(&[good, copy], &h.gpus, &gpus).is_ok());
}

#[test]
fn a_gpu_with_neither_node_number_nor_uuid_cannot_be_found() {
    let h = inv("dgx-h100");
    let good = parse("/etc/cdi/nvidia.yaml", &nvidia_yaml(&h, &SHUFFLED));
    let mut g = PreparedGpu::from(&h.gpus[0]);
    g.uuid = None;
    g.device_nodes
        .retain(|n| node_number(std::slice::from_ref(n), "/dev/nvidia").is_none());
    let e = vendor_gpu_ids(&[good], &h.gpus, &[&g]).unwrap_err();
    assert!(matches!(e, VendorCdiError::Unidentified { .. }), "{e}");
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
                .map(|n| format!(r#"{{"path":"{n}","type":"c","major":226,"minor":0}}"#))
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
fn amd_gpus_use_the_amd_spec_when_present_else_their_rocm_nodes() {
    let m = inv("mi300x-8");
    let prepared =
        prepare_allocation(&m, "n1", &[alloc(&m.gpus[1].name)], &Holdings::default()).unwrap();
    let gpus = gpus_of(&prepared);
    let spec = parse("/var/run/cdi/amd.json", &amd_json(&m));
    let ids = vendor_gpu_ids(&[spec], &m.gpus, &gpus).unwrap();
    // Devices were written in reverse bus order: GPU 1 of 8 is index 6.
    assert_eq!(ids[&gpus[0].bdf], "amd.com/gpu=6");

    // With the vendor's device, the claim's own spec has nothing left for a lone GPU.
    let plan = CdiPlan {
        vendor_ids: &ids,
        vendor_mig_ids: &Default::default(),
        nvidia_node: false,
    };
    let c = compose_cdi("u", &prepared, &plan);
    assert_eq!(c.spec, None);
    assert_eq!(c.ids, vec![vec!["amd.com/gpu=6".to_string()]]);

    // Without it: the ROCm nodes (render, card, kfd) in the claim's own spec.
    let none = BTreeMap::new();
    let plan = CdiPlan {
        vendor_ids: &none,
        vendor_mig_ids: &Default::default(),
        nvidia_node: false,
    };
    let c = compose_cdi("u", &prepared, &plan);
    let spec = c.spec.unwrap();
    let own: Vec<&str> = spec.devices[0]
        .container_edits
        .device_nodes
        .iter()
        .map(|n| n.path.as_str())
        .collect();
    assert!(
        own.iter().any(|n| n.starts_with("/dev/dri/renderD")),
        "{own:?}"
    );
    assert!(
        own.iter().any(|n| n.starts_with("/dev/dri/card")),
        "{own:?}"
    );
    assert_eq!(spec.container_edits.device_nodes[0].path, "/dev/kfd");
    assert_eq!(
        c.ids,
        vec![vec![format!("topoalign.dev/device=u-{}", m.gpus[1].name)]]
    );
}

#[test]
fn the_claim_spec_keeps_nics_and_pairing_and_sets_void_next_to_vendor_devices() {
    let h = inv("dgx-h100");
    let results = vec![alloc(&h.pairs[0].name), alloc(&h.gpus[5].name)];
    let prepared = prepare_allocation(&h, "n1", &results, &Holdings::default()).unwrap();
    let spec = parse("/etc/cdi/nvidia.yaml", &nvidia_yaml(&h, &SHUFFLED));
    let ids = vendor_gpu_ids(&[spec], &h.gpus, &gpus_of(&prepared)).unwrap();
    let plan = CdiPlan {
        vendor_ids: &ids,
        vendor_mig_ids: &Default::default(),
        nvidia_node: true,
    };
    let c = compose_cdi("u", &prepared, &plan);
    let own = c.spec.unwrap();
    let void = format!("{ENV_NVIDIA_VISIBLE_DEVICES}=void");
    assert!(
        own.container_edits.env.contains(&void),
        "{:?}",
        own.container_edits.env
    );
    // No NVIDIA node of a GPU in this driver's spec: the vendor's device brings it.
    let all_nodes: Vec<&str> = own
        .devices
        .iter()
        .flat_map(|d| &d.container_edits.device_nodes)
        .chain(&own.container_edits.device_nodes)
        .map(|n| n.path.as_str())
        .collect();
    assert!(
        all_nodes.iter().all(|n| !n.starts_with("/dev/nvidia")),
        "{all_nodes:?}"
    );
    assert!(
        all_nodes
            .iter()
            .any(|n| n.starts_with("/dev/infiniband/uverbs"))
    );
    // The lone GPU's own device carries the environment (a CDI device needs an edit).
    assert!(own.devices[1].container_edits.device_nodes.is_empty());
    assert!(own.devices[1].container_edits.env.contains(&void));
    for (d, these) in prepared.iter().zip(&c.ids) {
        let g = d.gpu.as_ref().unwrap();
        assert_eq!(
            these,
            &vec![
                format!("nvidia.com/gpu={}", g.uuid.as_ref().unwrap()),
                format!("topoalign.dev/device=u-{}", d.device)
            ]
        );
    }

    // No vendor spec: the GPU nodes, and the legacy hook told exactly the claim's GPUs.
    let none = BTreeMap::new();
    let plan = CdiPlan {
        vendor_ids: &none,
        vendor_mig_ids: &Default::default(),
        nvidia_node: true,
    };
    let own = compose_cdi("u", &prepared, &plan).spec.unwrap();
    let uuids: Vec<&str> = prepared
        .iter()
        .map(|d| d.gpu.as_ref().unwrap().uuid.as_deref().unwrap())
        .collect();
    let want = format!("{ENV_NVIDIA_VISIBLE_DEVICES}={}", uuids.join(","));
    assert!(
        own.container_edits.env.contains(&want),
        "{:?}",
        own.container_edits.env
    );

    // A NIC-only claim on an NVIDIA node: void, so a CUDA image's `all` adds nothing.
    let nic_only =
        prepare_allocation(&h, "n1", &[alloc(&h.nics[0].name)], &Holdings::default()).unwrap();
    let own = compose_cdi("u", &nic_only, &plan).spec.unwrap();
    assert!(own.container_edits.env.contains(&void));
}

#[test]
fn a_device_prepared_for_another_claim_is_refused_by_name() {
    let h = inv("dgx-h100");
    let nic = &h.nics[0];
    let a = prepare_allocation(&h, "n1", &[alloc(&nic.name)], &Holdings::default()).unwrap();
    let mut held = Holdings::default();
    held.add("claim-A", &a);
    let e = prepare_allocation(&h, "n1", &[alloc(&nic.name)], &held).unwrap_err();
    assert!(matches!(e, AllocationError::DeviceTaken { .. }), "{e}");
    assert!(
        e.to_string().contains(&nic.name) && e.to_string().contains("claim-A"),
        "{e}"
    );
    // Its GPU through a pair, and the pair's NIC (one function only) through a plain NIC.
    let pair = &h.pairs[0];
    let a = prepare_allocation(&h, "n1", &[alloc(&pair.name)], &Holdings::default()).unwrap();
    let mut held = Holdings::default();
    held.add("claim-A", &a);
    let e = prepare_allocation(&h, "n1", &[alloc(&h.gpus[pair.gpu].name)], &held).unwrap_err();
    assert!(matches!(e, AllocationError::GpuTaken { .. }) && e.to_string().contains("claim-A"));
    let e = prepare_allocation(&h, "n1", &[alloc(&h.nics[pair.nic].name)], &held).unwrap_err();
    assert!(
        matches!(e, AllocationError::NicExhausted { .. }) && e.to_string().contains("claim-A"),
        "{e}"
    );
}
