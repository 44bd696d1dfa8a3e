//! The `placement-dra` scenario's clusters, pod streams and pre-occupancy, drawn exactly
//! as `e2e/lib/placement_dra.py` draws them: the same seeded generator (the project's
//! PCG-64, which the script carries bit for bit), the same draws in the same order, the
//! devices in the same (name) order. A seed here is the same seed there.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::resource::v1::{DeviceClass, ResourceClaimSpec, ResourceSlice};
use serde_json::{Value, json};
use topoalign_dra::{
    DRIVER_NAME,
    alloc::DeviceId,
    claim::{ClaimSpec, claim_spec},
    publish::{PublishOptions, device_classes, resource_slices},
};
use topoalign_rng::Rng;

/// What the replay needs of one device: its role, and the NUMA node (mixed) or the rank
/// (pair devices).
#[derive(Clone, Debug)]
pub(crate) enum Dev {
    Gpu(i64),
    Nic(i64),
    Pair(i64),
}

pub(crate) struct Node {
    pub(crate) name: String,
    pub(crate) slices: Vec<ResourceSlice>,
    pub(crate) devs: BTreeMap<DeviceId, Dev>,
    /// (GPU, NIC) device names of the pairs with GPUDirect RDMA by the truth (vendor).
    pub(crate) gdr: BTreeSet<(String, String)>,
}

impl Node {
    /// The node's plain GPUs (`gpu`) or NICs, in name order (the script's order).
    pub(crate) fn of_role(&self, gpu: bool) -> Vec<DeviceId> {
        self.devs
            .iter()
            .filter(|(_, d)| matches!((d, gpu), (Dev::Gpu(_), true) | (Dev::Nic(_), false)))
            .map(|(id, _)| id.clone())
            .collect()
    }
}

pub(crate) struct Cluster {
    pub(crate) nodes: Vec<Node>,
    pub(crate) classes: Vec<DeviceClass>,
    pub(crate) kind: Kind,
}

/// Which scenario's cluster.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    /// topoalign's driver (`placement-dra`).
    Own,
    /// Seed 001's cluster of NVIDIA's GPU driver and dranet (`placement-dra`, mixed).
    Mixed,
    /// The `vendor` scenario ([`super::vendor`]).
    Vendor,
}

impl Cluster {
    /// Whether the pods claim other drivers' devices (judged as foreign claims).
    pub(crate) fn foreign(&self) -> bool {
        self.kind != Kind::Own
    }
}

fn str_attr(d: &k8s_openapi::api::resource::v1::Device, name: &str) -> Option<String> {
    d.attributes.as_ref()?.get(name)?.string.clone()
}

fn int_attr(d: &k8s_openapi::api::resource::v1::Device, name: &str) -> Option<i64> {
    d.attributes.as_ref()?.get(name)?.int
}

pub(crate) fn node_of(name: String, slices: Vec<ResourceSlice>) -> Node {
    let mut devs = BTreeMap::new();
    for s in &slices {
        for d in s.spec.devices.iter().flatten() {
            let id = DeviceId {
                driver: s.spec.driver.clone(),
                pool: s.spec.pool.name.clone(),
                device: d.name.clone(),
            };
            let numa = int_attr(d, "resource.kubernetes.io/numaNode")
                .or_else(|| int_attr(d, "dra.net/numaNode"))
                .unwrap_or(-1);
            let dev = match (s.spec.driver.as_str(), str_attr(d, "type").as_deref()) {
                ("dra.net", _) if int_attr(d, "dra.net/numaNode").is_some() => Dev::Nic(numa),
                (super::vendor::SRIOV, _) => Dev::Nic(numa),
                (_, Some("gpu")) => Dev::Gpu(numa),
                (_, Some("nic")) => Dev::Nic(numa),
                (_, Some("pair")) => Dev::Pair(int_attr(d, "rank").unwrap()),
                _ => continue,
            };
            devs.insert(id, dev);
        }
    }
    Node {
        name,
        slices,
        devs,
        gdr: BTreeSet::new(),
    }
}

/// topoalign's nodes, as `placement-dra` sets them up.
pub(crate) fn topoalign_cluster(count: usize) -> Cluster {
    const PROFILES: [&str; 3] = ["mi300x-8", "gb300-4", "dgx-h100"];
    let nodes = (0..count)
        .map(|i| {
            let profile = PROFILES[i % PROFILES.len()];
            let name = format!("dra-{i:03}-{profile}");
            let topo = topoalign_profiles::get(profile).unwrap();
            let slices = resource_slices(&topo, &name, &PublishOptions::default()).unwrap();
            assert!(slices.iter().all(|s| s.spec.driver == DRIVER_NAME));
            node_of(name, slices)
        })
        .collect();
    Cluster {
        nodes,
        classes: device_classes(),
        kind: Kind::Own,
    }
}

/// The mixed-driver nodes: NVIDIA's DRA GPU driver (newest format, with the standard
/// numaNode) and dranet, GB300 trays (4 GPUs, NUMA 0 0 1 1, an Ethernet function without
/// NUMA) and H100 nodes (8 GPUs, NUMA 0×4 1×4), each GPU with one RDMA NIC.
pub(crate) fn mixed_cluster(count: usize) -> Cluster {
    let nodes = (0..count)
        .map(|i| {
            let gb = i % 2 == 0;
            let name = format!("mixed-{i:03}-{}", if gb { "gb300" } else { "h100" });
            let numas: &[i64] = if gb { &[0, 0, 1, 1] } else { &[0, 0, 0, 0, 1, 1, 1, 1] };
            let gpus: Vec<Value> = numas
                .iter()
                .enumerate()
                .map(|(g, numa)| {
                    let bdf = if gb {
                        format!("{:04x}:06:00.0", 8 + g)
                    } else {
                        format!("0000:{:02x}:00.0", 0x18 + 0x20 * g)
                    };
                    json!({"name": format!("gpu-{g}"), "attributes": {
                        "type": {"string": "gpu"}, "index": {"int": g},
                        "resource.kubernetes.io/pciBusID": {"string": bdf},
                        "resource.kubernetes.io/numaNode": {"int": numa}}})
                })
                .collect();
            let mut nics: Vec<Value> = numas
                .iter()
                .enumerate()
                .map(|(n, numa)| {
                    let bdf = if gb {
                        format!("{:04x}:00:00.0", 0x0101 + n)
                    } else {
                        format!("0000:{:02x}:00.0", 0x19 + 0x20 * n)
                    };
                    let dev = format!("pci-{}", bdf.replace([':', '.'], "-"));
                    json!({"name": dev, "attributes": {
                        "dra.net/numaNode": {"int": numa}, "dra.net/pciAddress": {"string": bdf},
                        "dra.net/rdma": {"bool": true}, "dra.net/rdmaDevice": {"string": format!("mlx5_{n}")}}})
                })
                .collect();
            if gb {
                nics.push(json!({"name": "pci-7870-00-00-0", "attributes": {
                    "dra.net/pciAddress": {"string": "7870:00:00.0"}, "dra.net/rdma": {"bool": false}}}));
            }
            let slices = [("gpu.nvidia.com", gpus), ("dra.net", nics)]
                .into_iter()
                .map(|(driver, devices)| foreign_slice(&name, driver, driver, devices))
                .collect();
            node_of(name, slices)
        })
        .collect();
    let classes = [NVIDIA_GPU_CLASS, DRANET_CLASS]
        .into_iter()
        .map(|(name, cel)| cel_class(name, cel))
        .collect();
    Cluster {
        nodes,
        classes,
        kind: Kind::Mixed,
    }
}

/// NVIDIA's GPUs, as the scenarios' DeviceClass selects them: (name, CEL).
pub(crate) const NVIDIA_GPU_CLASS: (&str, &str) = (
    "gpu.nvidia.com",
    "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'gpu'",
);

/// dranet's RDMA NICs, as the scenarios' DeviceClass selects them: (name, CEL).
pub(crate) const DRANET_CLASS: (&str, &str) = (
    "dranet.net",
    "device.driver == \"dra.net\" && device.attributes[\"dra.net\"].rdma == true",
);

/// A DeviceClass selecting by one CEL expression.
pub(crate) fn cel_class(name: &str, cel: &str) -> DeviceClass {
    serde_json::from_value(json!({"metadata": {"name": name},
        "spec": {"selectors": [{"cel": {"expression": cel}}]}}))
    .unwrap()
}

/// The one slice of `driver`'s pool on `node` (the pool named after the node), named
/// `{node}-{suffix}`.
pub(crate) fn foreign_slice(
    node: &str,
    driver: &str,
    suffix: &str,
    devices: Vec<Value>,
) -> ResourceSlice {
    serde_json::from_value(json!({
        "metadata": {"name": format!("{node}-{suffix}")},
        "spec": {"driver": driver, "nodeName": node, "devices": devices,
                 "pool": {"name": node, "generation": 1, "resourceSliceCount": 1}}}))
    .unwrap()
}

/// `k` of `from` (all when fewer), by a partial Fisher–Yates shuffle: the script's
/// `Pcg64.sample`.
pub(crate) fn sample(rng: &mut Rng, from: &[DeviceId], k: usize) -> Vec<DeviceId> {
    let mut v = from.to_vec();
    for i in 0..k.min(v.len()) {
        let j = i + rng.below(v.len() - i);
        v.swap(i, j);
    }
    v.truncate(k);
    v
}

/// One pod of a stream: its size (pairs, or GPUs and NICs each) and whether it requires
/// PXB-or-better pairs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct PodShape {
    pub(crate) size: u32,
    pub(crate) pxb: bool,
    /// On SR-IOV VFs (vendor), else dranet's NICs.
    pub(crate) sriov: bool,
}

/// The seed's pod stream (the script's `stream` and `stream-mixed`).
pub(crate) fn stream(c: &Cluster, seed: u64, pods: usize) -> Vec<PodShape> {
    if c.kind == Kind::Vendor {
        return super::vendor::vendor_stream(seed, pods);
    }
    let mixed = c.kind == Kind::Mixed;
    let mut rng = Rng::derive(seed, "stream");
    (0..pods)
        .map(|_| {
            if mixed {
                let size = if rng.below(4) < 3 { 1 } else { 2 };
                return PodShape {
                    size,
                    pxb: false,
                    sriov: false,
                };
            }
            let size = [1, 1, 1, 1, 2, 2, 2, 4, 4, 8][rng.below(10)];
            PodShape {
                size,
                pxb: size <= 2 && rng.next_f64() < 1.0 / 6.0,
                sriov: false,
            }
        })
        .collect()
}

/// The claim of a pod of `shape` (`topoalign claims --pairs K [--max-class PXB]`, or
/// seed 001's claim without its matchAttribute).
pub(crate) fn claim(c: &Cluster, shape: PodShape) -> ResourceClaimSpec {
    if c.kind == Kind::Vendor {
        return super::vendor::vendor_claim(shape);
    }
    if c.kind == Kind::Mixed {
        return serde_json::from_value(json!({"devices": {"requests": [
            {"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com", "count": shape.size}},
            {"name": "nic", "exactly": {"deviceClassName": "dranet.net", "count": shape.size}}]}}))
        .unwrap();
    }
    let mut c = ClaimSpec::pairs(shape.size);
    c.max_rank = shape.pxb.then_some(1);
    claim_spec(&c).unwrap()
}

/// The seed's pre-occupancy, per node: the devices one allocated claim holds (the
/// script's `occupy`: up to half the GPUs, and up to two NICs, or up to half on the
/// mixed nodes). A node holding nothing has no occupancy pod.
pub(crate) fn occupancy(c: &Cluster, seed: u64) -> Vec<BTreeSet<DeviceId>> {
    if c.kind == Kind::Vendor {
        return super::vendor::vendor_occupancy(c, seed);
    }
    c.nodes
        .iter()
        .map(|n| {
            let mut rng = Rng::derive(seed, &n.name);
            let (gpus, nics) = (n.of_role(true), n.of_role(false));
            let g = rng.below(gpus.len() / 2 + 1);
            let mut devs: BTreeSet<DeviceId> = sample(&mut rng, &gpus, g).into_iter().collect();
            let k = rng.below(if c.kind == Kind::Mixed {
                nics.len() / 2 + 1
            } else {
                3
            });
            devs.extend(sample(&mut rng, &nics, k));
            devs
        })
        .collect()
}

/// The first draws of the generator the script carries (`Pcg64` in
/// `e2e/lib/placement_dra.py`), pinned on both sides: seed 42's first words, seed 11's
/// stream's first indices below 10 and the float after them.
#[test]
fn the_script_draws_the_same_numbers() {
    let mut r = Rng::new(42);
    let words: Vec<u64> = (0..3).map(|_| r.next_u64()).collect();
    assert_eq!(
        words,
        [
            4178418447715145737,
            4410739922618931473,
            14034899209665866285
        ]
    );
    let mut r = Rng::derive(11, "stream");
    let idx: Vec<usize> = (0..10).map(|_| r.below(10)).collect();
    assert_eq!(idx, [2, 9, 8, 4, 7, 3, 8, 4, 0, 5]);
    assert_eq!(r.next_f64(), 0.4357687038227247);
}
