//! A MIG instance's CDI: its parent's nodes plus its own `/dev/nvidia-caps` access
//! nodes, or the NVIDIA spec's device of the instance (by MIG UUID, or by exactly its
//! nodes for the `<gpu>:<mig>` index form), never the vendor's whole-GPU device.

use std::collections::BTreeMap;
use std::path::Path;

use topoalign_dra::DeviceKind;
use topoalign_dra::prepare::{
    CdiPlan, PreparedDevice, PreparedGpu, PreparedMig, VendorCdiError, compose_cdi,
    parse_vendor_spec, vendor_mig_ids,
};
use topoalign_dra::publish::MigInstance;

const UUID: &str = "MIG-5b0c7a9e-1111-5222-8333-944455556666";

fn instance(start: u8, gi: u32, caps: &[&str]) -> PreparedDevice {
    PreparedDevice {
        request: "mig".into(),
        device: format!("gpu-0-mig-1g10gb-19-{start}"),
        kind: DeviceKind::Mig,
        gpu: None,
        nic: None,
        nic_function: None,
        class: None,
        mig: Some(PreparedMig {
            instance: MigInstance {
                profile: "1g.10gb".into(),
                profile_id: 19,
                gi: Some(gi),
                ci: Some(0),
                start,
                size: 1,
                sm_slices: 1,
                uuid: (start == 0).then(|| UUID.to_string()),
                device_nodes: caps.iter().map(|c| c.to_string()).collect(),
            },
            parent: PreparedGpu {
                name: "gpu-0".into(),
                bdf: "0000:1b:00.0".parse().unwrap(),
                vendor: "nvidia".into(),
                uuid: Some("GPU-9a1d2f3e-0000-4000-8000-000000000001".into()),
                device_nodes: vec!["/dev/nvidia0".into(), "/dev/nvidiactl".into()],
            },
        }),
    }
}

const CAPS_A: [&str; 2] = [
    "/dev/nvidia-caps/nvidia-cap111",
    "/dev/nvidia-caps/nvidia-cap112",
];
const CAPS_B: [&str; 2] = [
    "/dev/nvidia-caps/nvidia-cap120",
    "/dev/nvidia-caps/nvidia-cap121",
];

fn spec(devices: &str) -> topoalign_dra::prepare::VendorSpec {
    let text = format!("cdiVersion: 0.5.0\nkind: nvidia.com/gpu\ndevices:\n{devices}");
    parse_vendor_spec(Path::new("/etc/cdi/nvidia.yaml"), 0, &text)
        .unwrap()
        .unwrap()
}

fn dev(name: &str, nodes: &[&str]) -> String {
    let mut s = format!("- name: \"{name}\"\n  containerEdits:\n    deviceNodes:\n");
    for n in nodes {
        s.push_str(&format!("    - path: {n}\n"));
    }
    s
}

fn nodes_of(spec: &topoalign_dra::prepare::CdiSpec, i: usize) -> Vec<&str> {
    spec.devices[i]
        .container_edits
        .device_nodes
        .iter()
        .map(|n| n.path.as_str())
        .collect()
}

#[test]
fn without_a_vendor_device_the_instance_gets_its_caps_nodes() {
    let prepared = vec![instance(0, 7, &CAPS_A)];
    let none = BTreeMap::new();
    let plan = CdiPlan {
        vendor_ids: &none,
        vendor_mig_ids: &BTreeMap::new(),
        nvidia_node: true,
    };
    let c = compose_cdi("u", &prepared, &plan);
    let spec = c.spec.unwrap();
    assert_eq!(nodes_of(&spec, 0), ["/dev/nvidia0", CAPS_A[0], CAPS_A[1]]);
    assert!(
        spec.container_edits
            .env
            .contains(&format!("NVIDIA_VISIBLE_DEVICES={UUID}")),
        "{:?}",
        spec.container_edits.env
    );
    assert_eq!(c.ids[0], ["topoalign.dev/device=u-gpu-0-mig-1g10gb-19-0"]);
}

#[test]
fn the_vendor_device_of_the_instance_is_used_by_uuid_or_by_its_nodes() {
    let whole = dev("0", &["/dev/nvidia0"]);
    let by_uuid = dev(UUID, &["/dev/nvidia0", CAPS_A[0], CAPS_A[1]]);
    let by_index_a = dev("0:0", &["/dev/nvidia0", CAPS_A[0], CAPS_A[1]]);
    let by_index_b = dev("0:1", &["/dev/nvidia0", CAPS_B[0], CAPS_B[1]]);
    let specs = vec![spec(&format!("{whole}{by_uuid}{by_index_a}{by_index_b}"))];
    // Instance 0 has the UUID: its UUID-named device; instance 1 (no UUID known) is
    // found by its nodes, the index form.
    let prepared = vec![instance(0, 7, &CAPS_A), instance(1, 8, &CAPS_B)];
    let migs: Vec<(&str, &PreparedMig)> = prepared
        .iter()
        .map(|d| (d.device.as_str(), d.mig.as_ref().unwrap()))
        .collect();
    let ids = vendor_mig_ids(&specs, &migs).unwrap();
    assert_eq!(ids[&prepared[0].device], format!("nvidia.com/gpu={UUID}"));
    assert_eq!(ids[&prepared[1].device], "nvidia.com/gpu=0:1");
    let none = BTreeMap::new();
    let plan = CdiPlan {
        vendor_ids: &none,
        vendor_mig_ids: &ids,
        nvidia_node: true,
    };
    let c = compose_cdi("u", &prepared, &plan);
    assert_eq!(c.ids[0][0], format!("nvidia.com/gpu={UUID}"));
    assert_eq!(c.ids[1][0], "nvidia.com/gpu=0:1");
    let spec = c.spec.unwrap();
    assert!(
        spec.container_edits
            .env
            .contains(&"NVIDIA_VISIBLE_DEVICES=void".to_string())
    );
    for d in &spec.devices {
        assert!(d.container_edits.device_nodes.is_empty(), "{d:?}");
    }
    // A device of the parent alone (another instance's nodes, or none) is no match.
    let specs = vec![spec_of_b_only()];
    let lone = [instance(2, 9, &CAPS_A)];
    let migs: Vec<(&str, &PreparedMig)> =
        vec![(lone[0].device.as_str(), lone[0].mig.as_ref().unwrap())];
    assert!(vendor_mig_ids(&specs, &migs).unwrap().is_empty());
}

fn spec_of_b_only() -> topoalign_dra::prepare::VendorSpec {
    spec(&format!(
        "{}{}",
        dev("0", &["/dev/nvidia0"]),
        dev("0:1", &["/dev/nvidia0", CAPS_B[0], CAPS_B[1]])
    ))
}

#[test]
fn a_uuid_device_with_another_instances_nodes_is_stale() {
    let specs = vec![spec(&dev(UUID, &["/dev/nvidia0", CAPS_B[0], CAPS_B[1]]))];
    let prepared = [instance(0, 7, &CAPS_A)];
    let migs = vec![(
        prepared[0].device.as_str(),
        prepared[0].mig.as_ref().unwrap(),
    )];
    let e = vendor_mig_ids(&specs, &migs).unwrap_err();
    assert!(matches!(e, VendorCdiError::Stale { .. }), "{e}");
    let msg = e.to_string();
    assert!(
        msg.contains("nvidia-cap120") && msg.contains("nvidia-cap111"),
        "{msg}"
    );
    assert!(msg.contains("regenerate"), "{msg}");
}
