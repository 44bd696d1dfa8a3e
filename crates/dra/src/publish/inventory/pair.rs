//! The pair builder: one [`PairEntry`] per (GPU, physical NIC) at `max_pair_class` or
//! better with an RDMA NIC, at most [`PairsPerGpu`] per GPU, best first.

use topoalign_topology::{GpuNicPath, PcieClass, Topology};

use super::{PairsPerGpu, PublishOptions};
use crate::publish::entries::{GpuEntry, PairEntry, PhysicalNic};
use crate::publish::names;

/// [`PairsPerGpu::Auto`] budgets the pairs of a node without VFs when the GPUs can
/// take their candidate NICs in more ways than this (mi300x-8 without VFs: 24² ways,
/// 80–150 ms to refuse 9 pairs in kube-scheduler v1.37.2; dgx-h100: 120²).
const AUTO_MAX_COMBINATIONS: f64 = 65_536.0;

/// Paths between every GPU and every physical NIC (through the PF): `paths[gpu][nic]`.
pub(super) fn paths(
    topo: &Topology,
    gpus: &[GpuEntry],
    nics: &[PhysicalNic],
) -> Vec<Vec<GpuNicPath>> {
    let cls = topo.classifier();
    gpus.iter()
        .map(|g| nics.iter().map(|n| cls.gpu_nic(g.index, n.index)).collect())
        .collect()
}

/// The pairs, best first (whole-GPU pairs of MIG-enabled GPUs last); none when pair
/// devices are not published.
pub(super) fn pairs(
    paths: &[Vec<GpuNicPath>],
    gpus: &[GpuEntry],
    nics: &[PhysicalNic],
    opts: &PublishOptions,
) -> Vec<PairEntry> {
    // Pairs at max_pair_class or better, with RDMA NICs only, best first.
    let candidates: Vec<Vec<usize>> = paths
        .iter()
        .map(|row| {
            let mut c: Vec<usize> = (0..row.len())
                .filter(|&ni| {
                    row[ni].class <= opts.max_pair_class
                        && row[ni].class != PcieClass::Sys
                        && nics[ni].rdma_device.is_some()
                })
                .collect();
            c.sort_by_key(|&ni| (row[ni].preference(), nics[ni].bdf));
            c
        })
        .collect();
    // At most this many pairs per GPU; None: every candidate.
    let budget = match opts.pairs_per_gpu {
        PairsPerGpu::All => None,
        PairsPerGpu::AtMost(k) => Some(k.max(1)),
        PairsPerGpu::Auto => {
            let shared = candidates
                .iter()
                .flatten()
                .any(|&ni| nics[ni].functions.len() > 1);
            // Without VFs a NIC goes to one GPU: GPU i has its candidates less
            // one per earlier GPU competing for them (P(n, g) for g GPUs on the
            // same n NICs).
            let combinations = candidates
                .iter()
                .enumerate()
                .map(|(i, c)| {
                    let rivals = candidates[..i]
                        .iter()
                        .filter(|e| e.iter().any(|ni| c.contains(ni)))
                        .count();
                    c.len().saturating_sub(rivals).max(1) as f64
                })
                .product::<f64>();
            (shared || combinations > AUTO_MAX_COMBINATIONS).then_some(2)
        }
    };
    let chosen = match budget {
        None => candidates,
        Some(k) => budget_pairs(paths, &candidates, k),
    };
    let mut pairs = Vec::new();
    let chosen = if opts.pair_devices {
        chosen
    } else {
        Vec::new()
    };
    for (gi, row) in chosen.iter().enumerate() {
        for &ni in row {
            pairs.push(PairEntry {
                name: names::pair_device(gpus[gi].bdf, nics[ni].bdf),
                gpu: gi,
                nic: ni,
                path: paths[gi][ni],
            });
        }
    }
    // Whole-GPU pairs of MIG-enabled GPUs last (first fit takes them last).
    pairs.sort_by(|a, b| {
        (
            gpus[a.gpu].mig_enabled,
            a.path.preference(),
            gpus[a.gpu].bdf,
            nics[a.nic].bdf,
        )
            .cmp(&(
                gpus[b.gpu].mig_enabled,
                b.path.preference(),
                gpus[b.gpu].bdf,
                nics[b.nic].bdf,
            ))
    });
    pairs
}

/// At most `k` pairs per GPU out of `candidates` (per GPU, best first). First every GPU
/// gets one pair at its best level, then, GPU by GPU, more up to `k`, best level first.
/// Each pick goes to the candidate NIC with the fewest pairs so far (ties: the NIC after
/// the GPU's first candidate, in address order), so two GPUs under one switch with two
/// NICs take one each, and the alternatives form a ring over the NICs of a NUMA node
/// (GPU i also on NIC i+1): one used-up NIC strands no GPU.
fn budget_pairs(paths: &[Vec<GpuNicPath>], candidates: &[Vec<usize>], k: usize) -> Vec<Vec<usize>> {
    let nic_count = paths.first().map_or(0, Vec::len).max(1);
    let mut uses = vec![0usize; nic_count];
    let mut chosen: Vec<Vec<usize>> = vec![Vec::new(); candidates.len()];
    let mut pick = |gi: usize, only_top: bool, chosen: &mut Vec<Vec<usize>>| -> bool {
        let c = &candidates[gi];
        let (Some(&first), Some(top)) =
            (c.first(), c.first().map(|&ni| paths[gi][ni].preference()))
        else {
            return false;
        };
        let next = c
            .iter()
            .filter(|ni| !chosen[gi].contains(ni))
            .filter(|&&ni| !only_top || paths[gi][ni].preference() == top)
            .min_by_key(|&&ni| {
                let ring = (ni + nic_count - first) % nic_count;
                (paths[gi][ni].preference(), uses[ni], ring)
            });
        match next {
            Some(&ni) => {
                uses[ni] += 1;
                chosen[gi].push(ni);
                true
            }
            None => false,
        }
    };
    for gi in 0..candidates.len() {
        pick(gi, true, &mut chosen);
    }
    for gi in 0..candidates.len() {
        while chosen[gi].len() < k && pick(gi, false, &mut chosen) {}
    }
    chosen
}
