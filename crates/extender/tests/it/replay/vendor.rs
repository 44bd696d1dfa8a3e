//! The `vendor` scenario's cluster, pod stream and pre-occupancy, drawn exactly as
//! `e2e/lib/vendor.py` draws them (the project's PCG-64, the same draws in the same
//! order, devices in name order): dgx-h100 machines whose GPUs come from NVIDIA's DRA
//! driver v0.5 and whose NICs come from dranet (`full`: every NIC; `half`: only the NICs
//! of GPUs 1, 3, 5, 7) or the SR-IOV DRA driver (`sriov`: two VFs of each GPU's NIC),
//! layouts cycled; pods claim through the node-independent ladder templates of
//! `topoalign claims --gpu-class gpu.nvidia.com --nic-class dranet.net|sriov-rdma`.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::resource::v1::ResourceClaimSpec;
use serde_json::{Value, json};
use topoalign_dra::{
    alloc::DeviceId,
    claim::{LadderSpec, ladder_claim},
};
use topoalign_rng::Rng;
use topoalign_topology::Classifier;

use super::cluster::{
    Cluster, DRANET_CLASS, Dev, Kind, NVIDIA_GPU_CLASS, PodShape, cel_class, foreign_slice,
    node_of, sample,
};

/// The SR-IOV DRA driver's name.
pub(crate) const SRIOV: &str = "sriovnetwork.k8snetworkplumbingwg.io";
const GPU_DRIVER: &str = "gpu.nvidia.com";
const DRANET: &str = "dra.net";
const STD: &str = "resource.kubernetes.io";
const LAYOUTS: [&str; 3] = ["full", "half", "sriov"];

/// One device of the profile: PCI address, NUMA node, root complex.
struct Place {
    bdf: String,
    numa: i64,
    root: String,
}

/// The DeviceClasses the script creates.
fn classes() -> Vec<k8s_openapi::api::resource::v1::DeviceClass> {
    let sriov = format!(
        "device.driver == \"{SRIOV}\" && device.attributes[\"{SRIOV}\"].rdmaCapable == true"
    );
    [
        NVIDIA_GPU_CLASS,
        DRANET_CLASS,
        ("sriov-rdma", sriov.as_str()),
    ]
    .into_iter()
    .map(|(name, cel)| cel_class(name, cel))
    .collect()
}

fn dashed(bdf: &str) -> String {
    bdf.replace([':', '.'], "-")
}

/// `count` nodes `vendor-NNN-<layout>` as the script sets them up.
pub(crate) fn vendor_cluster(count: usize) -> Cluster {
    let topo = topoalign_profiles::get("dgx-h100").unwrap();
    let cl = Classifier::new(&topo);
    let place = |pci: usize| Place {
        bdf: topo.pci[pci].bdf.to_string(),
        numa: topo.pci[pci].numa_node.map_or(-1, i64::from),
        root: topo.pcie_root(pci).unwrap(),
    };
    let gpus: Vec<Place> = topo.gpus.iter().map(|g| place(g.pci)).collect();
    let nics: Vec<(usize, Place)> = topo
        .nics
        .iter()
        .enumerate()
        .map(|(i, n)| (i, place(n.pci)))
        .collect();
    let gpu_of_root: BTreeMap<&str, usize> = gpus
        .iter()
        .enumerate()
        .map(|(i, g)| (g.root.as_str(), i))
        .collect();
    // GDR by the truth (`topoalign matrix`): PIX or PXB.
    let gdr = |g: usize, n: usize| cl.gpu_nic(g, n).class.rank() <= 1;
    let nodes = (0..count)
        .map(|i| {
            let layout = LAYOUTS[i % LAYOUTS.len()];
            let name = format!("vendor-{i:03}-{layout}");
            let gpu_devs: Vec<Value> = gpus
                .iter()
                .enumerate()
                .map(|(k, g)| {
                    json!({"name": format!("gpu-{k}"), "attributes": {
                        "type": {"string": "gpu"},
                        format!("{STD}/pciBusID"): {"string": g.bdf},
                        format!("{STD}/pcieRoot"): {"string": g.root},
                        format!("{STD}/numaNode"): {"int": g.numa}}})
                })
                .collect();
            // (device name, NIC index) of every RDMA device.
            let mut of_nic: Vec<(String, usize)> = Vec::new();
            let (driver, nic_devs) = if layout == "sriov" {
                let mut devs = Vec::new();
                for (n, p) in nics.iter().filter(|(_, p)| gpu_of_root.contains_key(p.root.as_str())) {
                    for f in [2, 3] {
                        let vf = format!("{}{f}", &p.bdf[..p.bdf.len() - 1]);
                        of_nic.push((dashed(&vf), *n));
                        devs.push(json!({"name": dashed(&vf), "attributes": {
                            format!("{SRIOV}/pciAddress"): {"string": vf},
                            format!("{SRIOV}/pfPciAddress"): {"string": p.bdf},
                            format!("{SRIOV}/rdmaCapable"): {"bool": true},
                            format!("{STD}/pciBusID"): {"string": vf},
                            format!("{STD}/pcieRoot"): {"string": p.root},
                            "dra.net/numaNode": {"int": p.numa}}}));
                    }
                }
                (SRIOV, devs)
            } else {
                let keep = |p: &Place| {
                    layout == "full" || gpu_of_root.get(p.root.as_str()).is_some_and(|g| g % 2 == 1)
                };
                let mut devs = Vec::new();
                for (n, p) in nics.iter().filter(|(_, p)| keep(p)) {
                    let dev = format!("pci-{}", dashed(&p.bdf));
                    of_nic.push((dev.clone(), *n));
                    devs.push(json!({"name": dev, "attributes": {
                        "dra.net/pciAddress": {"string": p.bdf}, "dra.net/rdma": {"bool": true},
                        "dra.net/numaNode": {"int": p.numa},
                        format!("{STD}/pcieRoot"): {"string": p.root},
                        format!("{STD}/numaNode"): {"int": p.numa}}}));
                }
                devs.push(json!({"name": "pci-0000-e1-00-0", "attributes": {
                    "dra.net/pciAddress": {"string": "0000:e1:00.0"}, "dra.net/rdma": {"bool": false}}}));
                (DRANET, devs)
            };
            let slices = vec![
                foreign_slice(&name, GPU_DRIVER, "gpu", gpu_devs),
                foreign_slice(&name, driver, "nic", nic_devs),
            ];
            let mut node = node_of(name, slices);
            for g in 0..gpus.len() {
                for (dev, n) in &of_nic {
                    if gdr(g, *n) {
                        node.gdr.insert((format!("gpu-{g}"), dev.clone()));
                    }
                }
            }
            node
        })
        .collect();
    Cluster {
        nodes,
        classes: classes(),
        kind: Kind::Vendor,
    }
}

/// The seed's pod stream (the script's `stream`): pairs 1, 2, 4 (weights 4:3:2), dranet's
/// NICs 3 in 4, SR-IOV VFs 1 in 4.
pub(crate) fn vendor_stream(seed: u64, pods: usize) -> Vec<PodShape> {
    let mut rng = Rng::derive(seed, "vendor-stream");
    (0..pods)
        .map(|_| {
            let size = [1, 1, 1, 1, 2, 2, 2, 4, 4][rng.below(9)];
            let sriov = rng.below(4) == 3;
            PodShape {
                size,
                pxb: false,
                sriov,
            }
        })
        .collect()
}

/// The template a pod of `shape` claims through (`topoalign claims --pairs K --gpu-class
/// gpu.nvidia.com --nic-class dranet.net`, or `--nic-class sriov-rdma --nic-driver …`).
pub(crate) fn vendor_claim(shape: PodShape) -> ResourceClaimSpec {
    let (class, driver) = if shape.sriov {
        ("sriov-rdma", SRIOV)
    } else {
        ("dranet.net", DRANET)
    };
    let mut spec = LadderSpec::new(shape.size, GPU_DRIVER, class);
    spec.nic_driver = Some(driver.to_string());
    ladder_claim(&spec).unwrap()
}

/// The seed's pre-occupancy (the script's `occupy`): per node, up to half its GPUs held,
/// each with its first GDR NIC by name; on dranet nodes up to two NICs more without
/// their GPU.
pub(crate) fn vendor_occupancy(c: &Cluster, seed: u64) -> Vec<BTreeSet<DeviceId>> {
    c.nodes
        .iter()
        .map(|n| {
            let mut rng = Rng::derive(seed, &n.name);
            let gpus: Vec<DeviceId> = n.of_role(true);
            let nics: Vec<DeviceId> = n.of_role(false);
            let g = rng.below(gpus.len() / 2 + 1);
            let mut held = BTreeSet::new();
            let mut near_held = BTreeSet::new();
            for gpu in sample(&mut rng, &gpus, g) {
                let near = nics
                    .iter()
                    .find(|x| n.gdr.contains(&(gpu.device.clone(), x.device.clone())));
                if let Some(x) = near {
                    near_held.insert(x.clone());
                    held.insert(x.clone());
                }
                held.insert(gpu);
            }
            if nics.iter().all(|x| x.driver == DRANET) && !nics.is_empty() {
                let lone: Vec<DeviceId> = nics
                    .iter()
                    .filter(|x| !near_held.contains(*x))
                    .cloned()
                    .collect();
                let k = rng.below(3);
                held.extend(sample(&mut rng, &lone, k));
            }
            held
        })
        .collect()
}

/// Whether every GPU of an allocation on `n` has a NIC of it with GDR (the truth).
pub(crate) fn gdr_on_every_gpu(n: &super::cluster::Node, devs: &BTreeSet<DeviceId>) -> bool {
    devs.iter()
        .filter(|d| matches!(n.devs.get(*d), Some(Dev::Gpu(_))))
        .all(|g| {
            devs.iter()
                .any(|x| n.gdr.contains(&(g.device.clone(), x.device.clone())))
        })
}

/// Seed 38's first pods as `e2e/lib/vendor.py stream --seed 38` draws them (pairs, and
/// `s` for SR-IOV VFs), pinned on both sides.
#[test]
fn the_script_draws_the_same_vendor_stream() {
    let got: Vec<(u32, bool)> = vendor_stream(38, 12)
        .iter()
        .map(|p| (p.size, p.sriov))
        .collect();
    let want = [1, 1, 2, 1, 4, 1, 4, 4, 1, 1, 4, 1].map(|k| (k, false));
    assert_eq!(got, want);
    let got: Vec<(u32, bool)> = vendor_stream(21, 40)
        .iter()
        .map(|p| (p.size, p.sriov))
        .collect();
    // Seed 21: 11 of 40 pods on SR-IOV VFs.
    assert_eq!(got.iter().filter(|p| p.1).count(), 11);
}
