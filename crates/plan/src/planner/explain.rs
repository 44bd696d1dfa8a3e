//! Explanations: every compromise a plan makes, in words. Part of plan assembly
//! (`assemble`), reading the planner's state.

use topoalign_topology::{Classifier, PairClass, PciKind, PcieClass, Topology};

use crate::problem::Found;
use crate::request::Request;
use crate::types::Plan;

use super::{Planner, Reading};

/// Lists the plan's compromises: pairs below PIX (and whether a better NIC was free),
/// pairs without GPUDirect RDMA, GPUs left without a NIC, GPU pairs without a fabric
/// link, NUMA spread and CPUs away from the GPUs.
pub(crate) fn explain(
    planner: &Planner<'_>,
    req: &Request,
    taken: &Reading,
    plan: &Plan,
    f: &Found,
) -> Vec<String> {
    let m = planner.model();
    let cls = planner.topology().classifier();
    let mut out = Vec::new();
    for pair in &plan.pairs {
        let (Some(&g), Some(&n)) = (m.gpu_index.get(&pair.gpu), m.nic_index.get(&pair.nic)) else {
            continue;
        };
        if pair.class != PcieClass::Pix {
            let better: Vec<usize> = (0..m.nic_bdf.len())
                .filter(|&o| planner.nic_eligible(req, taken, o) && m.path(g, o).class < pair.class)
                .collect();
            if better.is_empty() {
                let topo = planner.topology();
                let route = route_words(topo, &cls, topo.gpus[g].pci, topo.nics[n].pci, pair.class);
                out.push(format!(
                    "no free NIC {} GPU {}; best available is {} via {}{}",
                    closer_phrase(pair.class),
                    pair.gpu,
                    pair.class,
                    m.nic_bdf[n],
                    route.map_or_else(String::new, |r| format!(": {r}"))
                ));
            } else {
                let o = better[0];
                out.push(format!(
                    "GPU {} is paired with {} at {} although {} ({}) is free: it serves a better overall plan",
                    pair.gpu,
                    pair.nic,
                    pair.class,
                    m.nic_bdf[o],
                    m.path(g, o).class
                ));
            }
        }
        if !pair.gdr {
            out.push(format!(
                "GPU {} to NIC {} is {} (NCCL path {}): NCCL will not use GPUDirect RDMA on it",
                pair.gpu, pair.nic, pair.class, pair.nccl
            ));
        }
    }
    let total = req.total_nics();
    if total > 0 {
        for gpu in &plan.gpus {
            if !plan.pairs.iter().any(|p| p.gpu == *gpu) {
                out.push(format!(
                    "GPU {gpu} gets no NIC: {total} NIC(s) for {} GPUs",
                    plan.gpus.len()
                ));
            }
        }
    }
    for (a, &ga) in f.gpu_set.iter().enumerate() {
        for &gb in &f.gpu_set[a + 1..] {
            if let PairClass::Pcie(c) = m.gpu_pair[ga * m.gpu_bdf.len() + gb] {
                out.push(format!(
                    "GPUs {} and {} have no NVLink/xGMI link between them (PCIe {c})",
                    m.gpu_bdf[ga], m.gpu_bdf[gb]
                ));
            }
        }
    }
    if plan.numa_nodes.len() > 1 {
        let ids: Vec<String> = plan.numa_nodes.iter().map(ToString::to_string).collect();
        out.push(format!(
            "the plan spans NUMA nodes {} (SLIT distance sum {})",
            ids.join(","),
            plan.score.numa_distance
        ));
    }
    let gpu_nodes: Vec<u32> = f
        .gpu_set
        .iter()
        .filter_map(|&g| m.gpu_numa[g].map(|i| m.numa_ids[i]))
        .collect();
    for (i, cpus) in m.numa_cpus.iter().enumerate() {
        let here = plan.cpus.intersection(cpus);
        if !here.is_empty() && !gpu_nodes.contains(&m.numa_ids[i]) {
            out.push(format!(
                "{} CPU(s) ({here}) come from NUMA node {}, which holds none of the GPUs",
                here.len(),
                m.numa_ids[i]
            ));
        }
    }
    if req.memory.is_some_and(|b| b > 0) && planner.free_memory(taken).is_none() {
        out.push(
            "the topology reports no memory sizes: the memory request was not checked".to_string(),
        );
    }
    out
}

/// The words for "a NIC closer than `class`" in the no-better-NIC explanation: the
/// class one step better, in words.
fn closer_phrase(class: PcieClass) -> &'static str {
    match class {
        PcieClass::Pix => "is closer to",
        PcieClass::Pxb => "sits behind a single PCIe switch (PIX) with",
        PcieClass::Phb => "shares a PCIe switch (PXB or better) with",
        PcieClass::Node => "shares a host bridge (PHB or better) with",
        PcieClass::Sys => "is on the NUMA node of",
    }
}

/// What the path of a GPU→NIC pair of `class` runs through, named by address: the switch
/// where they meet and the bridges on each side (PXB), the host bridge (PHB), or the host
/// bridges and NUMA nodes apart (NODE, SYS).
fn route_words(
    topo: &Topology,
    cls: &Classifier<'_>,
    gpu: usize,
    nic: usize,
    class: PcieClass,
) -> Option<String> {
    let bdf = |i: usize| topo.pci[i].bdf.to_string();
    match class {
        PcieClass::Pix => None,
        PcieClass::Pxb | PcieClass::Phb => {
            let r = cls.pcie_route(gpu, nic)?;
            let side = |units: &[usize], who: &str| {
                (!units.is_empty()).then(|| {
                    let names: Vec<String> = units.iter().map(|&u| bdf(u)).collect();
                    format!(
                        "{} {} ({who} side)",
                        if names.len() == 1 {
                            "bridge"
                        } else {
                            "bridges"
                        },
                        names.join(", ")
                    )
                })
            };
            let sides: Vec<String> = [side(&r.a_side, "GPU"), side(&r.b_side, "NIC")]
                .into_iter()
                .flatten()
                .collect();
            let through = if sides.is_empty() {
                String::new()
            } else {
                format!(", through {}", sides.join(" and "))
            };
            Some(match r.common {
                Some(c) => {
                    let what = match topo.pci[c].kind {
                        PciKind::SwitchUpstream => "switch",
                        PciKind::RootPort => "root port",
                        _ => "bridge",
                    };
                    format!("both are below {what} {}{through}", bdf(c))
                }
                None => format!(
                    "no switch in common: they meet at host bridge {}{through}",
                    topo.pcie_root(gpu).unwrap_or_else(|| "?".to_string())
                ),
            })
        }
        PcieClass::Node | PcieClass::Sys => {
            let root = |i: usize| topo.pcie_root(i).unwrap_or_else(|| "?".to_string());
            let numa = |i: usize| {
                cls.numa_of(i)
                    .map_or("unknown".to_string(), |n| n.to_string())
            };
            Some(format!(
                "GPU under host bridge {} (NUMA node {}), NIC under {} (NUMA node {})",
                root(gpu),
                numa(gpu),
                root(nic),
                numa(nic)
            ))
        }
    }
}

#[cfg(test)]
mod tests {
    use topoalign_topology::pci::{class, vendor};
    use topoalign_topology::{Bdf, Gpu, GpuVendor, Nic, PciKind, PciParent, TopologyBuilder};

    use crate::{NicCount, Planner, Request, Usage};

    fn bdf(s: &str) -> Bdf {
        s.parse().unwrap()
    }

    /// OCI BM.GPU.H100.8's shape: one top-level switch `08` whose two bridges `0d` and
    /// `0a` lead to the GPU and to the NIC.
    fn oci_like() -> topoalign_topology::Topology {
        let mut b = TopologyBuilder::new("oci-like");
        b.numa_node(0, Default::default(), None, Vec::new(), None);
        let h = b.host_bridge(0, 0);
        let rp = b.bridge(
            h,
            bdf("0000:00:01.0"),
            PciKind::RootPort,
            Some(0),
            (8, 0xf),
            None,
        );
        let top = b.bridge(
            rp,
            bdf("0000:08:00.0"),
            PciKind::SwitchUpstream,
            Some(0),
            (9, 0xf),
            None,
        );
        let leg = |b: &mut TopologyBuilder, dsp: &str, usp: &str, dsp2: &str| -> PciParent {
            let d = b.bridge(
                top,
                bdf(dsp),
                PciKind::SwitchDownstream,
                Some(0),
                (0, 0),
                None,
            );
            let u = b.bridge(d, bdf(usp), PciKind::SwitchUpstream, Some(0), (0, 0), None);
            b.bridge(
                u,
                bdf(dsp2),
                PciKind::SwitchDownstream,
                Some(0),
                (0, 0),
                None,
            )
        };
        let g = leg(&mut b, "0000:09:00.0", "0000:0d:00.0", "0000:0e:00.0");
        let n = leg(&mut b, "0000:09:01.0", "0000:0a:00.0", "0000:0b:00.0");
        let gp = b.endpoint(
            g,
            bdf("0000:0f:00.0"),
            vendor::NVIDIA,
            0x2330,
            class::DISPLAY_3D,
            Some(0),
            None,
        );
        let np = b.endpoint(
            n,
            bdf("0000:0c:00.0"),
            vendor::MELLANOX,
            0x1021,
            class::ETHERNET,
            Some(0),
            None,
        );
        b.gpu(Gpu::on(gp, GpuVendor::Nvidia));
        let mut nic = Nic::on(np);
        nic.rdma = Some("mlx5_0".to_string());
        b.nic(nic);
        b.build().unwrap()
    }

    #[test]
    fn node_explanation_names_both_host_bridges() {
        let mut b = TopologyBuilder::new("node");
        b.numa_node(0, Default::default(), None, Vec::new(), None);
        let h0 = b.host_bridge(0, 0);
        let h1 = b.host_bridge(0, 0x40);
        let gp = b.endpoint(
            h0,
            bdf("0000:00:05.0"),
            vendor::NVIDIA,
            0x2330,
            class::DISPLAY_3D,
            Some(0),
            None,
        );
        let np = b.endpoint(
            h1,
            bdf("0000:40:05.0"),
            vendor::MELLANOX,
            0x1021,
            class::INFINIBAND,
            Some(0),
            None,
        );
        b.gpu(Gpu::on(gp, GpuVendor::Nvidia));
        b.nic(Nic::on(np));
        let t = b.build().unwrap();
        let plan = Planner::new(&t)
            .plan(&Request::new(1, NicCount::PerGpu(1)), &Usage::default())
            .unwrap();
        let text = plan.explanations.join("\n");
        assert!(
            text.contains(
                "no free NIC shares a host bridge (PHB or better) with GPU 0000:00:05.0; \
                 best available is NODE via 0000:40:05.0: GPU under host bridge pci0000:00 \
                 (NUMA node 0), NIC under pci0000:40 (NUMA node 0)"
            ),
            "{text}"
        );
    }

    #[test]
    fn pxb_explanation_names_the_switch_and_its_bridges() {
        let t = oci_like();
        let plan = Planner::new(&t)
            .plan(&Request::new(1, NicCount::PerGpu(1)), &Usage::default())
            .unwrap();
        let text = plan.explanations.join("\n");
        assert!(
            text.contains(
                "no free NIC sits behind a single PCIe switch (PIX) with GPU 0000:0f:00.0; \
                 best available is PXB via 0000:0c:00.0: both are below switch 0000:08:00.0, \
                 through bridge 0000:0d:00.0 (GPU side) and bridge 0000:0a:00.0 (NIC side)"
            ),
            "{text}"
        );
    }
}
