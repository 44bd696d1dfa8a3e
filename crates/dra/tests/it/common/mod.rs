//! Shared test helpers: random topologies and an API-limits checker.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::resource::v1::ResourceSlice;
use topoalign_dra::limits::{
    MAX_ATTRIBUTES_AND_CAPACITIES, MAX_CONSUMES_COUNTERS_PER_DEVICE, MAX_COUNTER_SETS_PER_SLICE,
    MAX_COUNTERS_PER_SET, MAX_DEVICES_PER_SLICE, MAX_DEVICES_PER_SLICE_WITH_COUNTERS,
    MAX_STRING_ATTRIBUTE,
};
use topoalign_dra::publish::dns_label_problem;
use topoalign_topology::pci::{class, vendor};
use topoalign_topology::{
    Bdf, CpuSet, FabricKind, Gpu, GpuVendor, LinkLayer, Nic, PciKind, RdmaPort, Sriov, Topology,
    TopologyBuilder,
};

/// Deterministic randomness from a proptest seed: the project's PCG-64 stream.
pub(crate) struct Rng(topoalign_rng::Rng);

impl Rng {
    pub(crate) fn new(seed: u64) -> Self {
        Rng(topoalign_rng::Rng::new(seed))
    }
    /// A uniform integer in `0..n` (`0` when `n` is 0, after one draw as ever).
    pub(crate) fn below(&mut self, n: u64) -> u64 {
        self.0.below_u64(n.max(1))
    }
}

/// A random node: 1–4 NUMA nodes (numa_node sometimes unknown), host bridges with or
/// without PCIe switches, up to `max_gpus` GPUs and `max_nics` NIC PFs with 0–`max_vfs`
/// VFs each, sometimes all-to-all fabric links.
pub(crate) fn random_topology(seed: u64, max_gpus: u64, max_nics: u64, max_vfs: u64) -> Topology {
    let mut r = Rng::new(seed);
    let mut b = TopologyBuilder::new("random");
    let numa = 1 + r.below(4) as u32;
    for n in 0..numa {
        let d = (0..numa).map(|m| if m == n { 10 } else { 32 }).collect();
        b.numa_node(n, CpuSet::range(n * 8, n * 8 + 7), None, d, Some(n / 2));
    }
    let gpus = 1 + r.below(max_gpus);
    let nics = r.below(max_nics + 1);
    let mut bus_no: u32 = 0;
    let next_bus = |b_: &mut u32| {
        *b_ += 1;
        ((*b_ / 250) as u16, (*b_ % 250) as u8 + 1)
    };
    let roots = 1 + r.below(8);
    let mut parents = Vec::new();
    for i in 0..roots {
        let (dom, bus) = next_bus(&mut bus_no);
        let numa_of = if r.below(10) == 0 {
            None
        } else {
            Some((i as u32) % numa)
        };
        let host = b.host_bridge(dom, bus);
        if r.below(2) == 0 {
            parents.push((host, numa_of));
        } else {
            let (d2, b2) = next_bus(&mut bus_no);
            let rp = b.bridge(
                host,
                Bdf::new(d2, b2, 0, 0),
                PciKind::RootPort,
                numa_of,
                (0, 255),
                None,
            );
            let (d3, b3) = next_bus(&mut bus_no);
            let up = b.bridge(
                rp,
                Bdf::new(d3, b3, 0, 0),
                PciKind::SwitchUpstream,
                numa_of,
                (0, 255),
                None,
            );
            for _ in 0..(1 + r.below(3)) {
                let (d4, b4) = next_bus(&mut bus_no);
                let dn = b.bridge(
                    up,
                    Bdf::new(d4, b4, 0, 0),
                    PciKind::SwitchDownstream,
                    numa_of,
                    (0, 255),
                    None,
                );
                parents.push((dn, numa_of));
            }
        }
    }
    let mut gpu_ids = Vec::new();
    for g in 0..gpus {
        let (p, numa_of) = parents[r.below(parents.len() as u64) as usize];
        let (dom, bus) = next_bus(&mut bus_no);
        let vend = if r.below(2) == 0 {
            vendor::NVIDIA
        } else {
            vendor::AMD
        };
        let pci = b.endpoint(
            p,
            Bdf::new(dom, bus, 0, 0),
            vend,
            0x1234,
            class::DISPLAY_3D,
            numa_of,
            None,
        );
        let mut gpu = Gpu::on(pci, GpuVendor::from_pci(vend));
        gpu.memory_mib = (r.below(3) > 0).then_some(81920);
        gpu.model = (r.below(2) == 0).then(|| "A model name of some length".to_string());
        if vend == vendor::NVIDIA {
            gpu.nvidia_minor = Some(g as u32);
        } else {
            gpu.render_minor = Some(128 + g as u32);
            gpu.card_minor = Some(g as u32);
        }
        gpu_ids.push(b.gpu(gpu));
    }
    if r.below(3) == 0 {
        for i in 0..gpu_ids.len() {
            for j in i + 1..gpu_ids.len() {
                b.link(gpu_ids[i], gpu_ids[j], FabricKind::Nvlink, 18);
            }
        }
    }
    let mut rdma_no = 0;
    for _ in 0..nics {
        let (p, numa_of) = parents[r.below(parents.len() as u64) as usize];
        let (dom, bus) = next_bus(&mut bus_no);
        let pf_bdf = Bdf::new(dom, bus, 0, 0);
        let pci = b.endpoint(
            p,
            pf_bdf,
            vendor::MELLANOX,
            0x1021,
            class::ETHERNET,
            numa_of,
            None,
        );
        let vfs = r.below(max_vfs + 1) as u8;
        let vf_bdfs: Vec<Bdf> = (1..=vfs)
            .map(|k| Bdf::new(dom, bus, k / 8, k % 8))
            .collect();
        let mut pf = Nic::on(pci);
        let rdma = r.below(5) > 0;
        let port = |n: u32| RdmaPort {
            number: 1,
            link_layer: LinkLayer::Ethernet,
            umad: Some(format!("umad{n}")),
            rate_gbps: Some(400),
        };
        if rdma {
            pf.rdma = Some(format!("mlx5_{rdma_no}"));
            pf.uverbs = Some(format!("uverbs{rdma_no}"));
            pf.ports = vec![port(rdma_no)];
            rdma_no += 1;
        }
        pf.netdev = (r.below(4) > 0).then(|| format!("eth{bus}"));
        if vfs > 0 {
            pf.sriov = Sriov::Pf {
                total_vfs: 16,
                vfs: vf_bdfs.clone(),
            };
        }
        b.nic(pf);
        for (k, vb) in vf_bdfs.iter().enumerate() {
            let vpci = b.endpoint(
                p,
                *vb,
                vendor::MELLANOX,
                0x101e,
                class::ETHERNET,
                numa_of,
                None,
            );
            let mut vf = Nic::on(vpci);
            if rdma {
                vf.rdma = Some(format!("mlx5_{rdma_no}"));
                vf.uverbs = Some(format!("uverbs{rdma_no}"));
                vf.ports = vec![port(rdma_no)];
                rdma_no += 1;
            }
            vf.sriov = Sriov::Vf {
                pf: pf_bdf,
                index: k as u32,
            };
            b.nic(vf);
        }
    }
    b.build().expect("random topology is valid")
}

/// Every API limit a pool of slices must keep; returns the first violation.
pub(crate) fn check_limits(slices: &[ResourceSlice]) -> Result<(), String> {
    let mut names = BTreeSet::new();
    let mut device_names = BTreeSet::new();
    let mut counters: BTreeMap<(String, String), i64> = BTreeMap::new();
    let pool = &slices.first().ok_or("no slices")?.spec.pool;
    for s in slices {
        let name = s.metadata.name.clone().ok_or("slice without a name")?;
        if !names.insert(name.clone()) {
            return Err(format!("slice name {name} twice"));
        }
        if s.spec.pool != *pool {
            return Err(format!(
                "{name}: pool {:?} differs from {:?}",
                s.spec.pool, pool
            ));
        }
        if s.spec.pool.resource_slice_count != slices.len() as i64 {
            return Err(format!("{name}: resourceSliceCount wrong"));
        }
        let devs = s.spec.devices.as_deref().unwrap_or_default();
        let sets = s.spec.shared_counters.as_deref().unwrap_or_default();
        if !devs.is_empty() && !sets.is_empty() {
            return Err(format!("{name}: holds both devices and counter sets"));
        }
        if sets.len() > MAX_COUNTER_SETS_PER_SLICE {
            return Err(format!("{name}: {} counter sets", sets.len()));
        }
        for set in sets {
            if set.counters.len() > MAX_COUNTERS_PER_SET {
                return Err(format!(
                    "{name}: set {} has {} counters",
                    set.name,
                    set.counters.len()
                ));
            }
            for (c, v) in &set.counters {
                dns_label_problem(c).map_or(Ok(()), |w| Err(format!("counter {c}: {w}")))?;
                let v: i64 = v.value.0.parse().map_err(|e| format!("{c}: {e}"))?;
                counters.insert((set.name.clone(), c.clone()), v);
            }
        }
        let any_counters = devs.iter().any(|d| d.consumes_counters.is_some());
        let max = if any_counters {
            MAX_DEVICES_PER_SLICE_WITH_COUNTERS
        } else {
            MAX_DEVICES_PER_SLICE
        };
        if devs.len() > max {
            return Err(format!("{name}: {} devices", devs.len()));
        }
        for d in devs {
            dns_label_problem(&d.name)
                .map_or(Ok(()), |w| Err(format!("device {}: {w}", d.name)))?;
            if !device_names.insert(d.name.clone()) {
                return Err(format!("device {} twice in the pool", d.name));
            }
            let n = d.attributes.as_ref().map_or(0, |a| a.len())
                + d.capacity.as_ref().map_or(0, |c| c.len());
            if n > MAX_ATTRIBUTES_AND_CAPACITIES {
                return Err(format!("device {}: {n} attributes+capacities", d.name));
            }
            for (k, a) in d.attributes.iter().flatten() {
                if a.string
                    .as_ref()
                    .is_some_and(|s| s.len() > MAX_STRING_ATTRIBUTE)
                {
                    return Err(format!("device {}: attribute {k} too long", d.name));
                }
                let set = [
                    a.string.is_some(),
                    a.int.is_some(),
                    a.bool.is_some(),
                    a.version.is_some(),
                ];
                if set.iter().filter(|x| **x).count() != 1 {
                    return Err(format!(
                        "device {}: attribute {k} has not exactly one value",
                        d.name
                    ));
                }
            }
            let cc = d.consumes_counters.as_deref().unwrap_or_default();
            if cc.len() > MAX_CONSUMES_COUNTERS_PER_DEVICE {
                return Err(format!("device {}: {} consumesCounters", d.name, cc.len()));
            }
        }
    }
    // Every consumed counter exists in the pool.
    for s in slices {
        for d in s.spec.devices.iter().flatten() {
            for cc in d.consumes_counters.iter().flatten() {
                for c in cc.counters.keys() {
                    if !counters.contains_key(&(cc.counter_set.clone(), c.clone())) {
                        return Err(format!(
                            "device {} consumes unknown counter {}/{c}",
                            d.name, cc.counter_set
                        ));
                    }
                }
            }
        }
    }
    Ok(())
}
