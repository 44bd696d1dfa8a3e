//! Vendors' slices (tests/fixtures/vendor, written in each driver's format) read as
//! their drivers publish them, and the node-independent ladder template run through the
//! stock allocator's model on them.

use std::collections::BTreeSet;

use k8s_openapi::api::resource::v1::{DeviceClass, ResourceClaimSpec, ResourceSlice};
use topoalign_dra::{
    alloc::{AllocatedDevice, DeviceId, NodeDevices, first_fit},
    claim::{LadderSpec, ladder_claim},
    foreign::{DeviceRole, GpuForm, SliceFile, node_devices, parse_slice_file, slice_topology},
};

const BUDGET: u64 = 2_000_000;

pub(crate) fn fixture(name: &str) -> SliceFile {
    let path = format!(
        "{}/tests/fixtures/vendor/{name}",
        env!("CARGO_MANIFEST_DIR")
    );
    parse_slice_file(&std::fs::read_to_string(&path).unwrap(), &path).unwrap()
}

/// A class selecting every device of `driver` (twins and MIG devices too).
fn stand_in(name: &str, driver: &str) -> DeviceClass {
    serde_json::from_value(serde_json::json!({
        "metadata": {"name": name},
        "spec": {"selectors": [{"cel": {"expression": format!("device.driver == \"{driver}\"")}}]}
    }))
    .unwrap()
}

fn allocate(
    claim: &ResourceClaimSpec,
    classes: &[DeviceClass],
    slices: &[ResourceSlice],
    node: &str,
    in_use: &[(&str, &str)],
) -> Option<Vec<AllocatedDevice>> {
    let mut free = NodeDevices::gather(slices, node).unwrap();
    let used: BTreeSet<DeviceId> = in_use
        .iter()
        .map(|(driver, device)| DeviceId {
            driver: driver.to_string(),
            pool: node.to_string(),
            device: device.to_string(),
        })
        .collect();
    free.mark_in_use(&used);
    first_fit(claim, classes, &free, BUDGET).unwrap().allocation
}

/// (request, device) of each result.
fn picked(a: &[AllocatedDevice]) -> Vec<(String, String)> {
    a.iter()
        .map(|r| (r.request.clone(), r.device.clone()))
        .collect()
}

fn h100_ladder(pairs: u32, fallback: bool) -> ResourceClaimSpec {
    let mut spec = LadderSpec::new(pairs, "gpu.nvidia.com", "dranet.net");
    spec.nic_driver = Some("dra.net".into());
    spec.fallback = fallback;
    ladder_claim(&spec).unwrap()
}

#[test]
fn every_drivers_devices_are_read_with_their_roles() {
    let h = fixture("nvidia-v05-dranet-h100.yaml");
    let devs = node_devices(&h.slices, "h100-a");
    let role = |r| devs.iter().filter(|(_, d)| d.role() == Some(r)).count();
    // 7 whole GPUs, 2 MIG devices, 1 passthrough twin; 4 RDMA NICs and eth0.
    assert_eq!((role(DeviceRole::Gpu), role(DeviceRole::Nic)), (10, 5));
    let forms: BTreeSet<GpuForm> = devs.iter().filter_map(|(_, d)| d.gpu_form()).collect();
    assert_eq!(forms.len(), 3, "{forms:?}");
    let physical: BTreeSet<_> = (devs.iter())
        .filter(|(_, d)| d.role() == Some(DeviceRole::Gpu))
        .filter_map(|(_, d)| d.bdf())
        .collect();
    assert_eq!(physical.len(), 8);
    let a = fixture("amd-sriov-mi300x.yaml");
    let devs = node_devices(&a.slices, "mi300x-a");
    let role = |r| devs.iter().filter(|(_, d)| d.role() == Some(r)).count();
    assert_eq!((role(DeviceRole::Gpu), role(DeviceRole::Nic)), (16, 17));
    let c = fixture("dra-cpu.yaml");
    for node in ["h100-a", "cpu-v020"] {
        let devs = node_devices(&c.slices, node);
        assert!(!devs.is_empty() && devs.iter().all(|(_, d)| d.role().is_none()));
        assert!(devs.iter().all(|(_, d)| d.numa().is_some()), "{node}");
    }
}

#[test]
fn the_ladder_takes_a_gpu_with_a_nic_on_its_root_first() {
    let h = fixture("nvidia-v05-dranet-h100.yaml");
    // gpu-0 has no NIC on its root; gpu-1 does.
    let a = allocate(&h100_ladder(1, true), &h.classes, &h.slices, "h100-a", &[]).unwrap();
    assert_eq!(
        picked(&a),
        [
            ("gpu-0/root".into(), "gpu-1".into()),
            ("nic-0/root".into(), "pci-0000-2d-00-0".into())
        ]
    );
    // Four pairs: the four GPUs that share a root with a NIC.
    let a = allocate(&h100_ladder(4, true), &h.classes, &h.slices, "h100-a", &[]).unwrap();
    let gpus: Vec<String> = (a.iter())
        .filter(|r| r.request.starts_with("gpu-"))
        .map(|r| r.device.clone())
        .collect();
    assert_eq!(gpus, ["gpu-1", "gpu-3", "gpu-5", "gpu-7"]);
    assert!(a.iter().all(|r| r.request.ends_with("/root")), "{a:?}");
    // Five: four NICs are all the RDMA functions (eth0 is not in the class).
    assert!(allocate(&h100_ladder(5, true), &h.classes, &h.slices, "h100-a", &[]).is_none());
}

#[test]
fn the_numa_rung_and_the_fallback() {
    let h = fixture("nvidia-v05-dranet-h100.yaml");
    let gpus_with_root_nics = [
        ("gpu.nvidia.com", "gpu-1"),
        ("gpu.nvidia.com", "gpu-3"),
        ("gpu.nvidia.com", "gpu-5"),
        ("gpu.nvidia.com", "gpu-7"),
    ];
    let a = allocate(
        &h100_ladder(1, true),
        &h.classes,
        &h.slices,
        "h100-a",
        &gpus_with_root_nics,
    )
    .unwrap();
    assert_eq!(
        picked(&a),
        [
            ("gpu-0/numa".into(), "gpu-0".into()),
            ("nic-0/numa".into(), "pci-0000-2d-00-0".into())
        ]
    );
    // NUMA node 0's NICs held and only NUMA node 0's GPUs free: the fallback pairs
    // across; without it the node is no fit.
    let mut held = gpus_with_root_nics.to_vec();
    held.extend([
        ("gpu.nvidia.com", "gpu-4"),
        ("dra.net", "pci-0000-2d-00-0"),
        ("dra.net", "pci-0000-60-00-0"),
    ]);
    let a = allocate(
        &h100_ladder(1, true),
        &h.classes,
        &h.slices,
        "h100-a",
        &held,
    )
    .unwrap();
    assert_eq!(
        picked(&a),
        [
            ("gpu-0/any".into(), "gpu-0".into()),
            // A GPU at the fallback takes NICs at any rung: first the first with a root.
            ("nic-0/root".into(), "pci-0000-ae-00-0".into())
        ]
    );
    assert!(
        allocate(
            &h100_ladder(1, false),
            &h.classes,
            &h.slices,
            "h100-a",
            &held
        )
        .is_none()
    );
}

#[test]
fn one_physical_gpu_is_never_paired_twice() {
    let a = fixture("amd-sriov-mi300x.yaml");
    let classes = [
        stand_in("gpu.amd.com", "gpu.amd.com"),
        stand_in("sriov-rdma", "sriovnetwork.k8snetworkplumbingwg.io"),
    ];
    let mut spec = LadderSpec::new(8, "gpu.amd.com", "sriov-rdma");
    spec.nic_driver = Some("sriovnetwork.k8snetworkplumbingwg.io".into());
    spec.fallback = true;
    let claim = ladder_claim(&spec).unwrap();
    let got = allocate(&claim, &classes, &a.slices, "mi300x-a", &[]).unwrap();
    let devs = node_devices(&a.slices, "mi300x-a");
    let bdf_of = |name: &str| {
        devs.iter()
            .find(|(_, d)| d.device.name == name)
            .and_then(|(_, d)| d.bdf())
            .unwrap()
    };
    let gpus: Vec<_> = (got.iter())
        .filter(|r| r.request.starts_with("gpu-"))
        .map(|r| bdf_of(&r.device))
        .collect();
    assert_eq!(gpus.len(), 8);
    assert_eq!(gpus.iter().collect::<BTreeSet<_>>().len(), 8, "{got:?}");
    // GPU 2's VFs sit on GPU 3's root: seven root pairs, GPU 2 (no NUMA rung: AMD
    // publishes its NUMA node under gpu.amd.com/numaNode) by the fallback.
    let rungs: Vec<&str> = (got.iter())
        .filter(|r| r.request.starts_with("gpu-"))
        .filter_map(|r| r.request.rsplit_once('/').map(|x| x.1))
        .collect();
    let root = rungs.iter().filter(|r| **r == "root").count();
    assert_eq!(root, 7, "{rungs:?} {got:?}");
    assert_eq!(rungs.last(), Some(&"any"), "{got:?}");
    // The management VF (rdmaCapable false) is never taken.
    assert!(got.iter().all(|r| r.device != "0000-f1-00-2"));
    // Without the distinctAttribute the allocator takes a GPU and its vfio twin.
    let spec2 = LadderSpec::new(2, "gpu.amd.com", "sriov-rdma");
    let mut two = ladder_claim(&spec2).unwrap();
    let cons2 = two.devices.as_mut().unwrap().constraints.as_mut().unwrap();
    cons2.retain(|c| c.distinct_attribute.is_none());
    let got = allocate(&two, &classes, &a.slices, "mi300x-a", &[]).unwrap();
    let gpus: BTreeSet<_> = (got.iter())
        .filter(|r| r.request.starts_with("gpu-"))
        .map(|r| bdf_of(&r.device))
        .collect();
    assert_eq!(gpus.len(), 1, "the same GPU twice: {got:?}");
}

#[test]
fn the_slice_topology_of_each_fixture() {
    let h = fixture("nvidia-v05-dranet-h100.yaml");
    let devs = node_devices(&h.slices, "h100-a");
    let of = |r| -> Vec<_> {
        (devs.iter())
            .filter(|(_, d)| d.role() == Some(r))
            .map(|(_, d)| d.clone())
            .collect()
    };
    let t = slice_topology("h100-a", &of(DeviceRole::Gpu), &of(DeviceRole::Nic)).unwrap();
    assert_eq!((t.topology.gpus.len(), t.topology.nics.len()), (8, 4));
    assert_eq!(t.left_out.len(), 1, "eth0: {:?}", t.left_out);
    let a = fixture("amd-sriov-mi300x.yaml");
    let devs = node_devices(&a.slices, "mi300x-a");
    let of = |r| -> Vec<_> {
        (devs.iter())
            .filter(|(_, d)| d.role() == Some(r))
            .map(|(_, d)| d.clone())
            .collect()
    };
    let t = slice_topology("mi300x-a", &of(DeviceRole::Gpu), &of(DeviceRole::Nic)).unwrap();
    assert_eq!((t.topology.gpus.len(), t.topology.nics.len()), (8, 16));
    assert_eq!(t.left_out[0].0, "0000-f1-00-2");
}

/// The ladder with CPUs of dra-driver-cpu (grouped mode, main's standard key) on the
/// node of NVIDIA's and dranet's slices: every GPU's CPUs on its NUMA node, and a CPU
/// request the node cannot meet makes the claim no fit.
#[test]
fn the_ladder_with_cpus_puts_each_gpus_cpus_on_its_numa_node() {
    let h = fixture("nvidia-v05-dranet-h100.yaml");
    let c = fixture("dra-cpu.yaml");
    let slices: Vec<ResourceSlice> = h.slices.iter().chain(&c.slices).cloned().collect();
    let mut classes = h.classes.clone();
    classes.push(topoalign_dra::claim::cpu_device_class("dra.cpu"));
    let numa: std::collections::BTreeMap<String, u32> = node_devices(&slices, "h100-a")
        .into_iter()
        .filter_map(|(_, d)| Some((d.device.name.clone(), d.numa()?)))
        .collect();
    for shape in [
        topoalign_dra::claim::CpuShape::PerGpu,
        topoalign_dra::claim::CpuShape::OneNode,
    ] {
        let mut spec = LadderSpec::new(2, "gpu.nvidia.com", "dranet.net");
        spec.nic_driver = Some("dra.net".into());
        let mut cpus = topoalign_dra::claim::CpuClaim::new(24);
        cpus.shape = shape;
        spec.cpus = Some(cpus);
        let claim = ladder_claim(&spec).unwrap();
        let a = allocate(&claim, &classes, &slices, "h100-a", &[]).unwrap();
        let of = |prefix: &str| -> Vec<(String, u32)> {
            (a.iter())
                .filter(|r| r.request.starts_with(prefix))
                .map(|r| (r.request.clone(), numa[&r.device]))
                .collect()
        };
        let (gpus, cpus) = (of("gpu-"), of("cpus"));
        assert_eq!(
            (gpus.len(), cpus.len()),
            (
                2,
                if shape == topoalign_dra::claim::CpuShape::PerGpu {
                    2
                } else {
                    1
                }
            ),
            "{a:?}"
        );
        for (i, (_, g)) in gpus.iter().enumerate() {
            let c = cpus.get(i).or(cpus.first()).unwrap();
            assert_eq!(c.1, *g, "{shape:?}: {a:?}");
        }
        // More CPUs than a NUMA node has (96 each): no fit on either shape.
        let mut spec = spec.clone();
        if let Some(c) = spec.cpus.as_mut() {
            c.count = 2 * 97;
        }
        let claim = ladder_claim(&spec).unwrap();
        assert!(
            allocate(&claim, &classes, &slices, "h100-a", &[]).is_none(),
            "{shape:?}"
        );
    }
    // Individual mode past the claim's 32 devices is refused with the reason.
    let mut spec = LadderSpec::new(2, "gpu.nvidia.com", "dranet.net");
    let mut cpus = topoalign_dra::claim::CpuClaim::new(64);
    cpus.mode = topoalign_dra::claim::CpuMode::Individual;
    spec.cpus = Some(cpus);
    let e = ladder_claim(&spec).unwrap_err().to_string();
    assert!(
        e.contains("individual mode") && e.contains("--cpu-mode grouped"),
        "{e}"
    );
}
