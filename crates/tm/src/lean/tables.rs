//! What the lean admission reads once per pod so that each node state and each draw
//! only look up: which of the pod's pools hold each of the node's GPU and NIC addresses
//! ([`Holders`]), and each GPU's NICs in the order NCCL prefers them ([`PairTable`]).

use topoalign_topology::{Bdf, GpuNicPath};

use super::LeanPool;
use crate::addresses::NodeAddresses;
use crate::outcome::GpuPair;
use crate::prepared::Prepared;
use crate::simulate::gpu_pair;

/// For each of the node's GPU (or NIC) addresses, by its position in [`NodeAddresses`]:
/// the pools of the pod that hold it and its index in each.
#[derive(Debug, Clone)]
pub(super) struct Holders {
    /// The holders of the address at position `k` are `at[start[k]..start[k + 1]]`.
    start: Vec<usize>,
    /// (pool, device index in the pool), by address, then pool.
    at: Vec<(usize, usize)>,
}

impl Holders {
    /// The holders of the node's GPUs (`gpus`: the GPU pools) or NICs (the other pools).
    pub(super) fn new(addresses: &NodeAddresses, gpus: bool, pools: &[LeanPool]) -> Self {
        let mut entries: Vec<(usize, usize, usize)> = Vec::new();
        for (pi, p) in pools.iter().enumerate() {
            if p.pool.holds_gpus() != gpus {
                continue;
            }
            for (d, dev) in p.pool.devices.iter().enumerate() {
                if let Some(k) = addresses.find(dev.id, gpus) {
                    entries.push((k, pi, d));
                }
            }
        }
        entries.sort_unstable();
        let mut start = vec![0; addresses.count(gpus) + 1];
        for &(k, _, _) in &entries {
            start[k + 1] += 1;
        }
        for k in 1..start.len() {
            start[k] += start[k - 1];
        }
        Holders {
            start,
            at: entries.into_iter().map(|(_, pi, d)| (pi, d)).collect(),
        }
    }

    /// The holders of the address `b` (empty when no pool holds it), or `None` when it is
    /// not one of the node's GPUs (`gpus`) or NICs.
    pub(super) fn of(
        &self,
        addresses: &NodeAddresses,
        b: Bdf,
        gpus: bool,
    ) -> Option<&[(usize, usize)]> {
        let k = addresses.find(b, gpus)?;
        Some(&self.at[self.start[k]..self.start[k + 1]])
    }
}

/// The largest GPU × NIC table kept (pairs are classified on the fly beyond).
const MAX_PAIRS: usize = 1 << 16;

/// Every GPU↔NIC path of the node, and for each GPU the rank of each NIC in
/// [`topoalign_topology::Classifier::best_nic`]'s order (preference, then address).
#[derive(Debug, Clone)]
pub(super) struct PairTable {
    nics: usize,
    /// Row-major, a row per GPU.
    paths: Vec<GpuNicPath>,
    /// Row-major: 0 for the GPU's best NIC, 1 for the next, ….
    rank: Vec<u32>,
}

impl PairTable {
    /// The table of the node, or `None` when it would be too large.
    pub(super) fn new(node: &Prepared<'_>) -> Option<Self> {
        let topo = node.topology;
        let (g, n) = (topo.gpus.len(), topo.nics.len());
        if g.saturating_mul(n) > MAX_PAIRS {
            return None;
        }
        let paths = node.classifier.gpu_nic_table();
        let mut rank = vec![0u32; paths.len()];
        let mut order: Vec<usize> = Vec::with_capacity(n);
        for gpu in 0..g {
            let row = &paths[gpu * n..(gpu + 1) * n];
            order.clear();
            order.extend(0..n);
            // Ties (one address twice) go to the lower NIC index, the first one `best_nic`
            // meets.
            order.sort_by_key(|&nic| (row[nic].preference(), topo.nic_bdf(nic), nic));
            for (r, &nic) in order.iter().enumerate() {
                rank[gpu * n + nic] = r as u32;
            }
        }
        Some(PairTable {
            nics: n,
            paths,
            rank,
        })
    }
}

/// Each GPU of `gpus` (topology indices, ascending) with its best NIC of `nics` (the same
/// as [`crate::simulate::gpu_pairs`]), through `table` when there is one.
pub(super) fn pairs(
    node: &Prepared<'_>,
    table: Option<&PairTable>,
    gpus: impl Iterator<Item = usize>,
    nics: impl Iterator<Item = usize> + Clone,
) -> Vec<GpuPair> {
    gpus.map(|g| {
        let best = match table {
            Some(t) => (nics.clone())
                .min_by_key(|&n| t.rank[g * t.nics + n])
                .map(|n| (n, t.paths[g * t.nics + n])),
            None => node.classifier.best_nic(g, nics.clone()),
        };
        gpu_pair(node.topology, g, best)
    })
    .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::simulate::gpu_pairs;
    use topoalign_kube_types::kubelet_settings::Settings;
    use topoalign_rng::Rng;

    #[test]
    fn the_table_pairs_as_the_classifier_does() {
        let resources = crate::ResourceMap::default();
        for name in ["mi300x-8", "dgx-h100", "pcie-2socket", "gb300-4"] {
            let topo = topoalign_profiles::get(name).unwrap();
            let node = Prepared::new(&topo, &Settings::default(), &resources);
            let table = PairTable::new(&node).unwrap();
            let mut rng = Rng::new(7);
            for _ in 0..200 {
                let gpus: Vec<usize> = (0..topo.gpus.len()).filter(|_| rng.below(3) == 0).collect();
                let nics: Vec<usize> = (0..topo.nics.len()).filter(|_| rng.below(4) == 0).collect();
                let want = gpu_pairs(&node, gpus.clone(), nics.clone());
                let lean = pairs(
                    &node,
                    Some(&table),
                    gpus.iter().copied(),
                    nics.iter().copied(),
                );
                assert_eq!(lean, want, "{name}");
                let untabled = pairs(&node, None, gpus.iter().copied(), nics.iter().copied());
                assert_eq!(untabled, want, "{name}");
            }
        }
    }
}
