//! The planner on the e2e `speed` scenario's nodes and requests, timed as the scenario times
//! the upstream structured allocator (NewAllocator + Allocate per claim): `Planner::new`
//! and `plan` per call, for `topoalign plan --gpus N --nics-per-gpu 1` on mi300x-8,
//! gb300-4, dgx-h100, pcie-2socket and the 72-GPU node of `e2e/lib/scale-node.py`, plus the
//! scenario's unsatisfiable cases (9 pairs on 8 GPUs; 8 and 9 pairs on mi300x-8 with one GPU
//! held; 8 pairs on the 72-GPU node with 7 GPUs free). The brute force is timed beside the
//! planner where it finishes in reasonable time (the 4-GPU nodes).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::fmt::Write as _;
use std::hint::black_box;
use std::path::Path;

use criterion::{Criterion, criterion_group, criterion_main};
use topoalign_plan::brute::brute_force;
use topoalign_plan::{NicCount, Planner, Request, Usage};
use topoalign_topology::{Bdf, Topology};

/// The NCCL topology XML `e2e/lib/scale-node.py` writes with its defaults (4 NUMA nodes, 9
/// switches each, 2 GPUs and 2 InfiniBand NICs per switch), read by the same parser
/// `topoalign plan --from-nccl-xml` uses. Keep the two in step.
fn scale_72() -> Topology {
    let mut x = String::from("<system version=\"1\">\n");
    let (mut gpu, mut nic) = (0, 0);
    for numa in 0..4 {
        writeln!(x, r#"  <cpu numaid="{numa}" arch="x86_64" vendor="GenuineIntel" familyid="6" modelid="143">"#).unwrap();
        for s in 0..9 {
            let bus = 1 + (numa * 9 + s) * 5;
            writeln!(x, r#"    <pci busid="0000:{bus:02x}:00.0" class="0x060400" vendor="0x1000" device="0xc030" link_speed="32.0 GT/s PCIe" link_width="16">"#).unwrap();
            for k in 0..2 {
                let b = bus + 1 + k;
                writeln!(x, r#"      <pci busid="0000:{b:02x}:00.0" class="0x030200" vendor="0x10de" device="0x2330" link_speed="32.0 GT/s PCIe" link_width="16">"#).unwrap();
                writeln!(
                    x,
                    r#"        <gpu dev="{gpu}" sm="90" rank="{gpu}" gdr="1"/>"#
                )
                .unwrap();
                x.push_str("      </pci>\n");
                gpu += 1;
            }
            for k in 0..2 {
                let b = bus + 3 + k;
                writeln!(x, r#"      <pci busid="0000:{b:02x}:00.0" class="0x020700" vendor="0x15b3" device="0x1021" link_speed="32.0 GT/s PCIe" link_width="16">"#).unwrap();
                writeln!(x, r#"        <nic><net name="mlx5_{nic}" dev="{nic}" speed="400000" port="1" gdr="1"/></nic>"#).unwrap();
                x.push_str("      </pci>\n");
                nic += 1;
            }
            x.push_str("    </pci>\n");
        }
        x.push_str("  </cpu>\n");
    }
    x.push_str("</system>\n");
    topoalign_discover::parse_nccl_xml(&x, Path::new("scale-72.xml"), "scale-72")
        .unwrap()
        .topology
}

/// The node's GPU addresses in order (the scenario's GPU device names sort the same way).
fn sorted_gpus(t: &Topology) -> Vec<Bdf> {
    let mut gpus: Vec<_> = (0..t.gpus.len()).map(|g| t.gpu_bdf(g)).collect();
    gpus.sort();
    gpus
}

/// These GPUs in use, nothing else.
fn gpus_used(gpus: &[Bdf]) -> Usage {
    let mut u = Usage::empty();
    u.gpus = gpus.to_vec();
    u
}

/// `topoalign plan --gpus n --nics-per-gpu 1`.
fn pairs(n: usize) -> Request {
    Request::new(n, NicCount::PerGpu(1))
}

/// Times `Planner::new` + `plan` (answer discarded, as the allocator's is) under `name`.
fn new_and_plan(c: &mut Criterion, name: &str, topo: &Topology, req: &Request, usage: &Usage) {
    c.bench_function(name, |b| {
        b.iter(|| {
            let p = Planner::new(black_box(topo));
            black_box(p.plan(black_box(req), usage).is_ok())
        })
    });
}

fn bench(c: &mut Criterion) {
    let scale = scale_72();
    let nodes: Vec<(&str, Topology)> = ["mi300x-8", "gb300-4", "dgx-h100", "pcie-2socket"]
        .into_iter()
        .map(|p| (p, topoalign_profiles::get(p).unwrap()))
        .chain([("scale-72", scale.clone())])
        .collect();
    let empty = Usage::empty();
    for (name, topo) in &nodes {
        for n in [1, 2, 4, 8, 9] {
            // as the scenario: sizes up to the node's GPUs, and 9 on mi300x-8 (refused)
            if n > topo.gpus.len() && *name != "mi300x-8" {
                continue;
            }
            new_and_plan(
                c,
                &format!("speed {name} {n} pairs"),
                topo,
                &pairs(n),
                &empty,
            );
            if topo.gpus.len() <= 4 {
                c.bench_function(&format!("speed {name} {n} pairs (brute force)"), |b| {
                    b.iter(|| brute_force(topo, black_box(&pairs(n)), &empty).is_some())
                });
            }
        }
    }
    let mi = &nodes[0].1;
    let one_held = gpus_used(&sorted_gpus(mi)[..1]);
    for n in [8, 9] {
        let name = format!("speed mi300x-8 {n} pairs, lowest GPU held (unsatisfiable)");
        new_and_plan(c, &name, mi, &pairs(n), &one_held);
    }
    let name = "speed scale-72 8 pairs, 7 GPUs free (unsatisfiable)";
    new_and_plan(
        c,
        name,
        &scale,
        &pairs(8),
        &gpus_used(&sorted_gpus(&scale)[7..]),
    );
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .sample_size(30)
        .warm_up_time(std::time::Duration::from_millis(500))
        .measurement_time(std::time::Duration::from_secs(2));
    targets = bench
}
criterion_main!(benches);
