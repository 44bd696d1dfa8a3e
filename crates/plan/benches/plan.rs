//! Planner speed: 8 GPU + 8 NIC profiles empty and half used, a synthetic 72 + 72 node,
//! and the brute force on the 8 + 8 case for a ratio.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use topoalign_plan::brute::brute_force;
use topoalign_plan::{NicCount, NicRole, Planner, Request, Usage};
use topoalign_topology::pci::{class, vendor};
use topoalign_topology::{
    Bdf, CpuSet, FabricKind, Gpu, GpuVendor, Nic, PciKind, Topology, TopologyBuilder,
};

/// 4 NUMA nodes; 18 switches (each on its own host bridge) with 4 GPUs + 4 NICs;
/// all 72 GPUs NVLink-connected.
fn synthetic_72() -> Topology {
    let mut b = TopologyBuilder::new("synthetic-72");
    for n in 0..4u32 {
        let dist = (0..4).map(|m| if m == n { 10 } else { 21 }).collect();
        b.numa_node(
            n,
            CpuSet::range(n * 32, n * 32 + 31),
            Some(1 << 30),
            dist,
            Some(n),
        );
    }
    for s in 0..18u16 {
        let numa = Some(u32::from(s) * 4 / 18);
        let hb = b.host_bridge(s, 0);
        let rp = b.bridge(
            hb,
            Bdf::new(s, 0, 1, 0),
            PciKind::RootPort,
            numa,
            (1, 20),
            None,
        );
        let usp = b.bridge(
            rp,
            Bdf::new(s, 1, 0, 0),
            PciKind::SwitchUpstream,
            numa,
            (2, 20),
            None,
        );
        for d in 0..8u8 {
            let dsp = b.bridge(
                usp,
                Bdf::new(s, 2, d, 0),
                PciKind::SwitchDownstream,
                numa,
                (3 + d, 3 + d),
                None,
            );
            let at = Bdf::new(s, 3 + d, 0, 0);
            if d < 4 {
                let pci = b.endpoint(
                    dsp,
                    at,
                    vendor::NVIDIA,
                    0x2330,
                    class::DISPLAY_3D,
                    numa,
                    None,
                );
                b.gpu(Gpu::on(pci, GpuVendor::Nvidia));
            } else {
                let pci = b.endpoint(
                    dsp,
                    at,
                    vendor::MELLANOX,
                    0x1021,
                    class::INFINIBAND,
                    numa,
                    None,
                );
                b.nic(Nic::on(pci));
            }
        }
    }
    for a in 0..72 {
        for c in a + 1..72 {
            b.link(a, c, FabricKind::Nvlink, 18);
        }
    }
    b.build().unwrap()
}

/// Every other GPU and NIC in use (a scattered half).
fn half_used(t: &Topology) -> Usage {
    let mut u = Usage::empty();
    u.gpus = (0..t.gpus.len()).step_by(2).map(|g| t.gpu_bdf(g)).collect();
    u.nics = (0..t.nics.len())
        .filter(|n| n % 2 == 1)
        .map(|n| t.nic_bdf(n))
        .collect();
    u.cpus = CpuSet::range(0, 15);
    u
}

/// A request for `gpus` GPUs with one NIC each and 8 exclusive CPUs.
fn per_gpu(gpus: usize, role: NicRole) -> Request {
    let mut r = Request::new(gpus, NicCount::PerGpu(1));
    r.cpus = 8;
    r.nic_role = role;
    r
}

/// Benchmarks one planner on every request size in `sizes`, empty and half used (the
/// half-used node has only half its GPUs free, so sizes above that are skipped there).
fn sweep(c: &mut Criterion, name: &str, topo: &Topology, role: NicRole, sizes: &[usize]) {
    let p = Planner::new(topo);
    let empty = Usage::empty();
    let half = half_used(topo);
    let free_half = topo.gpus.len() - half.gpus.len();
    for &n in sizes {
        let r = per_gpu(n, role);
        c.bench_function(&format!("{name} {n} GPU x1 NIC empty"), |b| {
            b.iter(|| p.plan(black_box(&r), &empty).unwrap())
        });
        if n <= free_half {
            c.bench_function(&format!("{name} {n} GPU x1 NIC half used"), |b| {
                b.iter(|| p.plan(black_box(&r), &half).unwrap())
            });
        }
    }
}

fn bench(c: &mut Criterion) {
    let dgx = topoalign_profiles::get("dgx-h100").unwrap();
    let mi = topoalign_profiles::get("mi300x-8").unwrap();
    let syn = synthetic_72();

    sweep(c, "dgx-h100", &dgx, NicRole::Any, &[1, 2, 4, 8]);
    sweep(c, "mi300x-8 PF", &mi, NicRole::Pf, &[1, 2, 4, 8]);
    sweep(c, "mi300x-8 any-role", &mi, NicRole::Any, &[1, 2, 4, 8]);
    sweep(c, "synthetic-72", &syn, NicRole::Any, &[8, 32, 72]);

    // The brute force on the same 8 + 8 node and request, for a ratio.
    let p = Planner::new(&dgx);
    let empty = Usage::empty();
    let req2 = per_gpu(2, NicRole::Any);
    c.bench_function("dgx-h100 2 GPU x1 NIC empty (planner, brute ratio)", |b| {
        b.iter(|| p.plan(black_box(&req2), &empty).unwrap())
    });
    c.bench_function("dgx-h100 2 GPU x1 NIC empty (brute force)", |b| {
        b.iter(|| brute_force(&dgx, black_box(&req2), &empty).unwrap())
    });
    c.bench_function("planner new dgx-h100", |b| {
        b.iter(|| Planner::new(black_box(&dgx)))
    });
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
