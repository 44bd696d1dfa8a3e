//! The test oracle beside the brute force (feature `brute`, on for this crate's tests):
//! a whole plan checked against its request and scored from first principles.

use std::collections::BTreeSet;

use topoalign_topology::{Bdf, Topology};

use crate::request::{GpuLinkBound, Request, Usage};
use crate::score::{DeviceScore, device_score};
use crate::types::{Plan, Score};

/// SLIT distance sum over unordered pairs of the given NUMA ids.
pub(crate) fn slit_sum(topo: &Topology, nodes: &BTreeSet<u32>) -> u32 {
    let v: Vec<u32> = nodes.iter().copied().collect();
    let mut s = 0;
    for (k, &a) in v.iter().enumerate() {
        for &b in &v[k + 1..] {
            s += topo.numa_distance(a, b).unwrap_or(0);
        }
    }
    s
}

/// Builds a full [`Score`] from a device score and the spanned node set.
pub(crate) fn full_score(topo: &Topology, d: &DeviceScore, span: &BTreeSet<u32>) -> Score {
    Score {
        pairs: d.pairs,
        gdr_pairs: d.gdr_pairs,
        worst_pair: d.worst_pair,
        pair_rank_sum: d.rank_sum,
        numa_span: span.len(),
        numa_distance: slit_sum(topo, span),
        gpu_interconnect: d.interconnect,
        fragmentation: d.fragmentation,
    }
}

/// Whether each NIC count per GPU is what the request spreads (K each, or ⌊M/N⌋ and
/// ⌈M/N⌉).
pub(crate) fn spread_ok(req: &Request, per_gpu: &[usize]) -> bool {
    let total = req.total_nics();
    let n = req.gpus.max(1);
    let (q, extra) = (total / n, total % n);
    per_gpu.iter().all(|&c| c == q || c == q + 1)
        && per_gpu.iter().filter(|&&c| c == q + 1).count() == extra
        && per_gpu.iter().sum::<usize>() == total
}

/// Checks that `plan` meets every bound of `req` on `topo` given `usage`, and returns
/// its score computed from scratch, or what is wrong (a test oracle: feature `brute`).
pub fn evaluate(
    topo: &Topology,
    req: &Request,
    usage: &Usage,
    plan: &Plan,
) -> Result<Score, String> {
    let cls = topo.classifier();
    let gi = |b: &Bdf| topo.gpu_index(*b).ok_or(format!("unknown GPU {b}"));
    let ni = |b: &Bdf| topo.nic_index(*b).ok_or(format!("unknown NIC {b}"));
    let mut used_g = vec![false; topo.gpus.len()];
    for b in &usage.gpus {
        used_g[gi(b)?] = true;
    }
    let mut used_n = vec![false; topo.nics.len()];
    for b in &usage.nics {
        used_n[ni(b)?] = true;
    }
    let gpus: Vec<usize> = plan.gpus.iter().map(gi).collect::<Result<_, _>>()?;
    let nics: Vec<usize> = plan.nics.iter().map(ni).collect::<Result<_, _>>()?;
    if gpus.len() != req.gpus || nics.len() != req.total_nics() {
        return Err("wrong device counts".into());
    }
    let distinct = |v: &[usize]| v.iter().collect::<BTreeSet<_>>().len() == v.len();
    if !distinct(&gpus) || !distinct(&nics) {
        return Err("a device is chosen twice".into());
    }
    for &g in &gpus {
        let gpu = &topo.gpus[g];
        if used_g[g] || !req.gpu_passes(&gpu.vendor.to_string(), gpu.model.as_deref()) {
            return Err(format!("GPU {} is used or filtered out", topo.gpu_bdf(g)));
        }
    }
    for &n in &nics {
        if used_n[n] || !req.nic_passes(&topo.nics[n]) {
            return Err(format!("NIC {} is used or filtered out", topo.nic_bdf(n)));
        }
    }
    let pairs: Vec<(usize, usize)> = plan
        .pairs
        .iter()
        .map(|p| Ok((gi(&p.gpu)?, ni(&p.nic)?)))
        .collect::<Result<_, String>>()?;
    let paired: BTreeSet<usize> = pairs.iter().map(|p| p.1).collect();
    if pairs.len() != nics.len() || paired != nics.iter().copied().collect() {
        return Err("every chosen NIC must be paired exactly once".into());
    }
    let per_gpu: Vec<usize> = gpus
        .iter()
        .map(|g| pairs.iter().filter(|p| p.0 == *g).count())
        .collect();
    if pairs.iter().any(|p| !gpus.contains(&p.0)) || !spread_ok(req, &per_gpu) {
        return Err("NICs are not spread over the GPUs as asked".into());
    }
    if let Some(maxc) = req.max_pair
        && pairs.iter().any(|&(g, n)| cls.gpu_nic(g, n).class > maxc)
    {
        return Err("a pair exceeds max-pair".into());
    }
    if req.gpu_link == GpuLinkBound::Nvlink {
        for (k, &a) in gpus.iter().enumerate() {
            if gpus[k + 1..]
                .iter()
                .any(|&b| !cls.gpu_gpu(a, b).is_fabric())
            {
                return Err("two chosen GPUs are not fabric-linked".into());
            }
        }
    }
    if plan.cpus.len() != req.cpus || !plan.cpus.intersection(&usage.cpus).is_empty() {
        return Err("wrong CPU count or CPUs already in use".into());
    }
    let mut span = BTreeSet::new();
    for c in plan.cpus.ids() {
        let node = topo
            .numa
            .iter()
            .find(|n| n.cpus.contains(*c))
            .ok_or(format!("CPU {c} is on no NUMA node"))?;
        span.insert(node.id);
    }
    for nm in &plan.memory {
        let node = topo.numa_node(nm.node).ok_or("memory on an unknown node")?;
        let used = usage.memory.get(&nm.node).copied().unwrap_or(0);
        let cap = node.memory_kib.unwrap_or(0).saturating_mul(1024);
        if nm.bytes > cap.saturating_sub(used) {
            return Err(format!("too much memory taken from node {}", nm.node));
        }
        span.insert(nm.node);
    }
    let d = device_score(
        topo,
        &cls,
        &used_g,
        &used_n,
        &topo.fabric_islands(),
        &gpus,
        &pairs,
    );
    span.extend(d.device_nodes.iter().copied());
    Ok(full_score(topo, &d, &span))
}
