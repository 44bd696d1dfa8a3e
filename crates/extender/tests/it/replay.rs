//! The `placement-dra` end-to-end scenario replayed offline, both variants: the same
//! cluster shapes, seeded pre-occupancy held by allocated devices, and a stream of pods in
//! batches that leave a few batches later. Every pod is allocated by the stock allocator
//! model (`topoalign_dra::alloc::first_fit`) on the node chosen either the stock way (any node
//! where its claim can be allocated: the stock scores tie for pods without resource
//! requests) or the way a kube-scheduler wired to the extender chooses (the highest of
//! the extender's priorities, from the same judgements and [`priorities`] the server
//! answers with). Summed over the seeds, the extender must leave no more pods
//! unschedulable and give pairs no worse than the stock scheduler.
//!
//! - topoalign's slices: nodes cycling mi300x-8, gb300-4, dgx-h100 as the driver
//!   publishes them; pods of 1/2/4/8 pairs (weights 4/3/2/1), one in six 1–2 pair pods
//!   PXB-or-better; per node up to half the GPUs and up to two NICs held. Counts: pods
//!   unschedulable, mean rank of the pair devices allocated.
//! - mixed drivers (seed 001's cluster): GPUs from `gpu.nvidia.com`, NICs from `dra.net`,
//!   pods of 1 or 2 GPUs with as many NICs (weights 3/1); per node up to half the GPUs
//!   and half the NICs held. Counts: pods unschedulable, pods given a cross-NUMA pair.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::resource::v1::{DeviceClass, ResourceClaimSpec, ResourceSlice};
use serde_json::{Value, json};
use topoalign_dra::{
    alloc::{DEFAULT_BUDGET, DeviceId},
    claim::{ClaimSpec, claim_spec},
    publish::{PublishOptions, device_classes, resource_slices},
};
use topoalign_extender::judge_foreign;
use topoalign_extender::{CAPACITY_WEIGHT, DraVerdict, allocate, judge_with_budget};
use topoalign_extender::{DraNode, priorities};
use topoalign_rng::Rng;

const BATCH: usize = 20;

/// What the replay needs of one device: its role, and the NUMA node (mixed) or the rank
/// (pair devices).
#[derive(Clone, Debug)]
enum Dev {
    Gpu(i64),
    Nic(i64),
    Pair(i64),
}

struct Node {
    name: String,
    slices: Vec<ResourceSlice>,
    devs: BTreeMap<DeviceId, Dev>,
}

impl Node {
    fn of_role(&self, gpu: bool) -> Vec<DeviceId> {
        self.devs
            .iter()
            .filter(|(_, d)| matches!((d, gpu), (Dev::Gpu(_), true) | (Dev::Nic(_), false)))
            .map(|(id, _)| id.clone())
            .collect()
    }
}

struct Cluster {
    nodes: Vec<Node>,
    classes: Vec<DeviceClass>,
    mixed: bool,
}

fn str_attr(d: &k8s_openapi::api::resource::v1::Device, name: &str) -> Option<String> {
    d.attributes.as_ref()?.get(name)?.string.clone()
}

fn int_attr(d: &k8s_openapi::api::resource::v1::Device, name: &str) -> Option<i64> {
    d.attributes.as_ref()?.get(name)?.int
}

fn node_of(name: String, slices: Vec<ResourceSlice>) -> Node {
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
                (_, Some("gpu")) => Dev::Gpu(numa),
                (_, Some("nic")) => Dev::Nic(numa),
                (_, Some("pair")) => Dev::Pair(int_attr(d, "rank").unwrap()),
                _ => continue,
            };
            devs.insert(id, dev);
        }
    }
    Node { name, slices, devs }
}

/// topoalign's nodes, as `placement-dra` sets them up.
fn topoalign_cluster(count: usize) -> Cluster {
    const PROFILES: [&str; 3] = ["mi300x-8", "gb300-4", "dgx-h100"];
    let nodes = (0..count)
        .map(|i| {
            let profile = PROFILES[i % PROFILES.len()];
            let name = format!("dra-{i:03}-{profile}");
            let topo = topoalign_profiles::get(profile).unwrap();
            let slices = resource_slices(&topo, &name, &PublishOptions::default()).unwrap();
            node_of(name, slices)
        })
        .collect();
    Cluster {
        nodes,
        classes: device_classes(),
        mixed: false,
    }
}

/// The mixed-driver nodes: NVIDIA's DRA GPU driver (newest format, with the standard
/// numaNode) and dranet, GB300 trays (4 GPUs, NUMA 0 0 1 1, an Ethernet function without
/// NUMA) and H100 nodes (8 GPUs, NUMA 0×4 1×4), each GPU with one RDMA NIC.
fn mixed_cluster(count: usize) -> Cluster {
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
                .map(|(driver, devices)| {
                    serde_json::from_value(json!({
                        "metadata": {"name": format!("{name}-{driver}")},
                        "spec": {"driver": driver, "nodeName": name, "devices": devices,
                                 "pool": {"name": name, "generation": 1, "resourceSliceCount": 1}}}))
                    .unwrap()
                })
                .collect();
            node_of(name, slices)
        })
        .collect();
    let classes = [
        ("gpu.nvidia.com", "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'gpu'"),
        ("dranet.net", "device.driver == \"dra.net\" && device.attributes[\"dra.net\"].rdma == true"),
    ]
    .into_iter()
    .map(|(name, cel)| {
        serde_json::from_value(json!({"metadata": {"name": name},
            "spec": {"selectors": [{"cel": {"expression": cel}}]}}))
        .unwrap()
    })
    .collect();
    Cluster {
        nodes,
        classes,
        mixed: true,
    }
}

fn sample(rng: &mut Rng, from: &[DeviceId], k: usize) -> Vec<DeviceId> {
    let mut v = from.to_vec();
    rng.shuffle(&mut v);
    v.truncate(k);
    v
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Policy {
    Stock,
    Extender,
}

#[derive(Default, Debug, Clone, Copy)]
struct Counts {
    unschedulable: usize,
    /// Pair devices allocated and the sum of their ranks (topoalign's slices).
    pairs: usize,
    rank_sum: i64,
    /// Pods given a GPU with no NIC of the pod on its NUMA node (mixed).
    cross: usize,
}

impl Counts {
    fn add(&mut self, o: Counts) {
        self.unschedulable += o.unschedulable;
        self.pairs += o.pairs;
        self.rank_sum += o.rank_sum;
        self.cross += o.cross;
    }

    fn mean_rank(&self) -> f64 {
        self.rank_sum as f64 / self.pairs.max(1) as f64
    }
}

/// The claim of a pod of `size` (pairs, or GPUs and NICs each).
fn claim(mixed: bool, size: u32, pxb: bool) -> ResourceClaimSpec {
    if mixed {
        return serde_json::from_value(json!({"devices": {"requests": [
            {"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com", "count": size}},
            {"name": "nic", "exactly": {"deviceClassName": "dranet.net", "count": size}}]}}))
        .unwrap();
    }
    let mut c = ClaimSpec::pairs(size);
    c.max_rank = pxb.then_some(1);
    claim_spec(&c).unwrap()
}

/// The seed's pod stream: (size, PXB-or-better).
fn stream(mixed: bool, seed: u64, pods: usize) -> Vec<(u32, bool)> {
    let mut rng = Rng::derive(seed, "stream");
    (0..pods)
        .map(|_| {
            if mixed {
                return (if rng.below(4) < 3 { 1 } else { 2 }, false);
            }
            let size = [1, 1, 1, 1, 2, 2, 2, 4, 4, 8][rng.below(10)];
            (size, size <= 2 && rng.next_f64() < 1.0 / 6.0)
        })
        .collect()
}

/// One pass of one seed's stream.
fn pass(c: &Cluster, seed: u64, pods: usize, lifetime: usize, policy: Policy) -> Counts {
    // Pre-occupancy, keyed below every pod.
    let mut held: BTreeMap<usize, BTreeSet<DeviceId>> = BTreeMap::new();
    for (i, n) in c.nodes.iter().enumerate() {
        let mut rng = Rng::derive(seed, &n.name);
        let (gpus, nics) = (n.of_role(true), n.of_role(false));
        let g = rng.below(gpus.len() / 2 + 1);
        let mut devs: BTreeSet<DeviceId> = sample(&mut rng, &gpus, g).into_iter().collect();
        let k = if c.mixed {
            rng.below(nics.len() / 2 + 1)
        } else {
            rng.below(3)
        };
        devs.extend(sample(&mut rng, &nics, k));
        held.insert(usize::MAX - i, devs);
    }
    let mut pick = Rng::derive(seed, "pick");
    let mut out = Counts::default();
    let mut live: Vec<(usize, usize)> = Vec::new(); // (pod, batch)
    for (b, chunk) in stream(c.mixed, seed, pods).chunks(BATCH).enumerate() {
        for (j, (size, pxb)) in chunk.iter().enumerate() {
            let pod = b * BATCH + j;
            let spec = [claim(c.mixed, *size, *pxb)];
            let taken: BTreeSet<DeviceId> = held.values().flatten().cloned().collect();
            // Each node where the claim can be allocated, with the devices it would get.
            let mut feasible: Vec<(usize, BTreeSet<DeviceId>)> = (0..c.nodes.len())
                .filter_map(|i| {
                    let n = &c.nodes[i];
                    match allocate(
                        &spec,
                        &c.classes,
                        &n.slices,
                        &n.name,
                        &taken,
                        DEFAULT_BUDGET,
                    ) {
                        Ok(Ok(devs)) => Some((i, devs)),
                        _ => None,
                    }
                })
                .collect();
            if feasible.is_empty() {
                out.unschedulable += 1;
                continue;
            }
            let chosen = match policy {
                Policy::Stock => pick.below(feasible.len()),
                Policy::Extender => {
                    let judge_node = if c.mixed {
                        judge_foreign
                    } else {
                        judge_with_budget
                    };
                    let verdicts: Vec<DraNode> = feasible
                        .iter()
                        .map(|(i, _)| {
                            let n = &c.nodes[*i];
                            match judge_node(
                                &spec,
                                &c.classes,
                                &n.slices,
                                &n.name,
                                &taken,
                                DEFAULT_BUDGET,
                            ) {
                                Ok(DraVerdict::Fit { fit, .. }) => DraNode::Fit(fit),
                                other => panic!("{}: {other:?}", n.name),
                            }
                        })
                        .collect();
                    let refs: Vec<Option<&DraNode>> = verdicts.iter().map(Some).collect();
                    let scores = priorities(&refs, c.mixed, CAPACITY_WEIGHT);
                    let best = scores.iter().copied().max().unwrap_or(0);
                    let top: Vec<usize> =
                        (0..feasible.len()).filter(|k| scores[*k] == best).collect();
                    top[pick.below(top.len())]
                }
            };
            let (at, devs) = feasible.swap_remove(chosen);
            let n = &c.nodes[at];
            let (mut gpu_numa, mut nic_numa) = (Vec::new(), BTreeSet::new());
            for d in &devs {
                match n.devs.get(d) {
                    Some(Dev::Pair(r)) => {
                        out.pairs += 1;
                        out.rank_sum += r;
                    }
                    Some(Dev::Gpu(numa)) => gpu_numa.push(*numa),
                    Some(Dev::Nic(numa)) => {
                        nic_numa.insert(*numa);
                    }
                    None => {}
                }
            }
            out.cross += usize::from(gpu_numa.iter().any(|g| !nic_numa.contains(g)));
            held.insert(pod, devs);
            live.push((pod, b));
        }
        live.retain(|(pod, at)| {
            let stay = at + lifetime > b;
            if !stay {
                held.remove(pod);
            }
            stay
        });
    }
    out
}

/// Both policies over `seeds`, pods leaving `lifetime` batches after theirs: (stock,
/// extender) sums.
fn replay(c: &Cluster, seeds: &[u64], pods: usize, lifetime: usize) -> (Counts, Counts) {
    let (mut stock, mut ext) = (Counts::default(), Counts::default());
    for seed in seeds {
        let s = pass(c, *seed, pods, lifetime, Policy::Stock);
        let e = pass(c, *seed, pods, lifetime, Policy::Extender);
        eprintln!("seed {seed}: stock {s:?}, extender {e:?}");
        stock.add(s);
        ext.add(e);
    }
    (stock, ext)
}

#[test]
fn on_topoalign_slices_the_extender_leaves_fewer_pods_unschedulable_with_better_pairs() {
    // The end-to-end scenario's load: pods stay two batches, the cluster runs full.
    let (stock, ext) = replay(&topoalign_cluster(24), &[11, 12, 13, 14, 15], 120, 2);
    assert!(
        ext.unschedulable <= stock.unschedulable && ext.mean_rank() <= stock.mean_rank(),
        "stock {stock:?} (mean rank {:.3}) vs extender {ext:?} (mean rank {:.3})",
        stock.mean_rank(),
        ext.mean_rank()
    );
}

#[test]
fn on_mixed_drivers_the_extender_gives_fewer_cross_numa_pairs_and_no_more_unschedulable() {
    // The end-to-end variant's load: pods stay one batch.
    let (stock, ext) = replay(&mixed_cluster(16), &[11, 12, 13, 14, 15], 60, 1);
    assert!(
        ext.unschedulable <= stock.unschedulable && ext.cross < stock.cross,
        "stock {stock:?} vs extender {ext:?}"
    );
}

/// Sixteen seeds, both variants at both loads: the figures quoted in the scenario's
/// header and the extender's doc. Asserts what holds at every load; prints the rest.
#[test]
#[ignore = "slow in a debug build (cargo test --release -p topoalign-extender --test it replay -- --ignored --nocapture)"]
fn over_sixteen_seeds_at_two_loads() {
    let seeds: Vec<u64> = (11..27).collect();
    for lifetime in [1, 2] {
        let (stock, ext) = replay(&topoalign_cluster(24), &seeds, 120, lifetime);
        println!(
            "topoalign slices, lifetime {lifetime}: unschedulable stock {} vs extender {}; mean rank {:.3} vs {:.3}",
            stock.unschedulable,
            ext.unschedulable,
            stock.mean_rank(),
            ext.mean_rank()
        );
        assert!(ext.mean_rank() <= stock.mean_rank());
        let (stock, ext) = replay(&mixed_cluster(16), &seeds, 60, lifetime);
        println!(
            "mixed drivers, lifetime {lifetime}: unschedulable stock {} vs extender {}; cross-NUMA pods {} vs {}",
            stock.unschedulable, ext.unschedulable, stock.cross, ext.cross
        );
        assert!(ext.cross < stock.cross);
    }
}
