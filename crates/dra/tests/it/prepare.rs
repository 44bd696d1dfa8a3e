//! Prepare-time checks and CDI content per allocation.

use std::collections::BTreeMap;
use topoalign_dra::prepare::{ENV_GPU_NIC_MAP, ENV_NCCL_IB_HCA};

use topoalign_dra::{
    AllocationError, DRIVER_NAME,
    alloc::AllocatedDevice,
    prepare::{
        CdiPlan, CdiSpec, Holdings, PreparedDevice, cdi_device_id, compose_cdi, prepare_allocation,
    },
    publish::Inventory,
};
use topoalign_profiles as profiles;

fn alloc(request: &str, device: &str) -> AllocatedDevice {
    AllocatedDevice {
        request: request.into(),
        driver: DRIVER_NAME.into(),
        pool: "node-1".into(),
        device: device.into(),
    }
}

/// The claim's own spec with no vendor spec on the node.
fn cdi_spec(uid: &str, prepared: &[PreparedDevice]) -> CdiSpec {
    let none = BTreeMap::new();
    let plan = CdiPlan {
        vendor_ids: &none,
        vendor_mig_ids: &Default::default(),
        nvidia_node: false,
    };
    compose_cdi(uid, prepared, &plan).spec.unwrap()
}

fn mi300x() -> Inventory {
    Inventory::from_topology(&profiles::get("mi300x-8").unwrap())
}

#[test]
fn a_pair_maps_back_to_its_gpu_nic_functions_and_device_nodes() {
    let inv = mi300x();
    let pair = &inv.pairs[0];
    let d = inv.device(&pair.name).unwrap();
    let gpu = d.gpu().unwrap();
    let nic = d.nic().unwrap();
    assert_eq!(d.bdfs(), vec![gpu.bdf, nic.bdf]);
    assert_eq!(nic.functions.len(), 5, "PF + 4 VFs");
    assert!(gpu.device_nodes.contains(&"/dev/kfd".to_string()));
    assert!(
        gpu.device_nodes
            .iter()
            .any(|n| n.starts_with("/dev/dri/renderD"))
    );
    assert_eq!(d.counters().len(), 2);
}

#[test]
fn prepare_chooses_distinct_functions_and_cdi_exposes_exactly_them() {
    let inv = mi300x();
    let p0 = &inv.pairs[0];
    // Another pair with the same NIC: a second function of that NIC.
    let same_nic = inv
        .pairs
        .iter()
        .find(|p| p.nic == p0.nic && p.gpu != p0.gpu)
        .unwrap();
    let results = vec![
        alloc("pairs", &p0.name),
        alloc("pairs", &same_nic.name),
        AllocatedDevice {
            driver: "other.example.com".into(),
            ..alloc("x", "whatever")
        },
    ];
    let prepared = prepare_allocation(&inv, "node-1", &results, &Holdings::default()).unwrap();
    assert_eq!(prepared.len(), 2, "other drivers' results are skipped");
    let f0 = prepared[0].nic_function.as_ref().unwrap();
    let f1 = prepared[1].nic_function.as_ref().unwrap();
    assert_eq!(f0.vf, None, "first free function is the PF");
    assert_eq!(f1.vf, Some(0), "then VF0");
    assert_ne!(f0.rdma, f1.rdma);

    let spec = cdi_spec("uid-1", &prepared);
    assert_eq!(spec.kind, "topoalign.dev/device");
    assert_eq!(spec.devices.len(), 2);
    assert_eq!(spec.devices[0].name, format!("uid-1-{}", p0.name));
    assert_eq!(
        cdi_device_id("uid-1", &p0.name),
        format!("topoalign.dev/device=uid-1-{}", p0.name)
    );
    let nodes: Vec<&str> = spec
        .devices
        .iter()
        .flat_map(|d| {
            d.container_edits
                .device_nodes
                .iter()
                .map(|n| n.path.as_str())
        })
        .collect();
    // Exactly the two GPUs' render/card nodes and the two functions' uverbs/umad nodes.
    let expected: Vec<String> = prepared
        .iter()
        .flat_map(|p| {
            let g = p.gpu.as_ref().unwrap().device_nodes.clone();
            let f = p.nic_function.as_ref().unwrap().device_nodes.clone();
            g.into_iter().chain(f)
        })
        .filter(|n| n != "/dev/kfd" && n != "/dev/infiniband/rdma_cm")
        .collect();
    assert_eq!(
        nodes,
        expected.iter().map(String::as_str).collect::<Vec<_>>()
    );
    let shared: Vec<&str> = spec
        .container_edits
        .device_nodes
        .iter()
        .map(|n| n.path.as_str())
        .collect();
    assert_eq!(shared, vec!["/dev/kfd", "/dev/infiniband/rdma_cm"]);
    let env = &spec.container_edits.env;
    let hca = format!(
        "{ENV_NCCL_IB_HCA}=={}:1,{}:1",
        f0.rdma.as_ref().unwrap(),
        f1.rdma.as_ref().unwrap()
    );
    assert_eq!(env[0], hca);
    assert!(env[1].starts_with(&format!(
        "{ENV_GPU_NIC_MAP}={}=",
        prepared[0].gpu.as_ref().unwrap().bdf
    )));
    // It serialises in the CDI file shape.
    let json = serde_json::to_value(&spec).unwrap();
    assert_eq!(json["cdiVersion"], "0.6.0");
    assert!(json["devices"][0]["containerEdits"]["deviceNodes"][0]["path"].is_string());
}

#[test]
fn nvidia_gpus_get_their_own_node_and_the_control_nodes_once() {
    let inv = Inventory::from_topology(&profiles::get("dgx-h100").unwrap());
    let results: Vec<_> = inv.pairs[..2]
        .iter()
        .map(|p| alloc("pairs", &p.name))
        .collect();
    let prepared = prepare_allocation(&inv, "node-1", &results, &Holdings::default()).unwrap();
    let spec = cdi_spec("u", &prepared);
    let shared: Vec<&str> = spec
        .container_edits
        .device_nodes
        .iter()
        .map(|n| n.path.as_str())
        .collect();
    for ctl in ["/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools"] {
        assert_eq!(shared.iter().filter(|s| **s == ctl).count(), 1, "{ctl}");
    }
    for d in &spec.devices {
        let own: Vec<&str> = d
            .container_edits
            .device_nodes
            .iter()
            .map(|n| n.path.as_str())
            .collect();
        assert!(
            own.iter().any(
                |n| n.starts_with("/dev/nvidia") && n[11..].chars().all(|c| c.is_ascii_digit())
            ),
            "{own:?}"
        );
        assert!(
            own.iter().any(|n| n.starts_with("/dev/infiniband/uverbs")),
            "{own:?}"
        );
    }
}

#[test]
fn foreign_unknown_and_double_used_devices_are_refused_by_name() {
    let inv = mi300x();
    let p0 = inv.pairs[0].clone();
    let gpu0 = inv.gpus[p0.gpu].clone();
    let none = Holdings::default();

    let mut foreign = alloc("pairs", &p0.name);
    foreign.pool = "node-2".into();
    let e = prepare_allocation(&inv, "node-1", &[foreign], &none).unwrap_err();
    assert!(matches!(e, AllocationError::ForeignPool { .. }), "{e}");
    assert!(e.to_string().contains(&p0.name) && e.to_string().contains("node-2"));

    let e =
        prepare_allocation(&inv, "node-1", &[alloc("x", "gpu-9999-00-00-0")], &none).unwrap_err();
    assert!(matches!(e, AllocationError::UnknownDevice { .. }), "{e}");
    assert!(e.to_string().contains("gpu-9999-00-00-0"));

    // The pair's GPU again as a plain GPU in the same claim.
    let e = prepare_allocation(
        &inv,
        "node-1",
        &[alloc("a", &p0.name), alloc("b", &gpu0.name)],
        &none,
    )
    .unwrap_err();
    assert!(matches!(e, AllocationError::GpuTaken { .. }), "{e}");
    assert!(
        e.to_string().contains(&gpu0.name) && e.to_string().contains(&p0.name),
        "{e}"
    );

    // Held by another prepared claim.
    let ok = prepare_allocation(&inv, "node-1", &[alloc("a", &p0.name)], &none).unwrap();
    let mut held = Holdings::default();
    held.add("claim-A", &ok);
    let e = prepare_allocation(&inv, "node-1", &[alloc("b", &gpu0.name)], &held).unwrap_err();
    assert!(e.to_string().contains("claim-A"), "{e}");
    held.remove("claim-A");
    assert!(prepare_allocation(&inv, "node-1", &[alloc("b", &gpu0.name)], &held).is_ok());

    // A NIC whose every function is taken.
    let nic = &inv.nics[inv.pairs[0].nic];
    for f in &nic.functions {
        held.nic_functions.insert(f.bdf, "claim-B".into());
    }
    let e = prepare_allocation(&inv, "node-1", &[alloc("n", &nic.name)], &held).unwrap_err();
    assert!(
        matches!(e, AllocationError::NicExhausted { functions: 5, .. }),
        "{e}"
    );
    assert!(e.to_string().contains("claim claim-B"), "{e}");

    let e = prepare_allocation(&inv, "node-1", &[alloc("n", "")], &none).unwrap_err();
    assert!(
        matches!(e, AllocationError::Malformed { index: 0, .. }),
        "{e}"
    );
}

#[test]
fn repeated_prepare_is_deterministic() {
    let inv = mi300x();
    let r: Vec<_> = inv.pairs[..4]
        .iter()
        .map(|p| alloc("pairs", &p.name))
        .collect();
    let a = prepare_allocation(&inv, "node-1", &r, &Holdings::default()).unwrap();
    let b = prepare_allocation(&inv, "node-1", &r, &Holdings::default()).unwrap();
    assert_eq!(a, b);
    assert_eq!(cdi_spec("u", &a), cdi_spec("u", &b));
}
