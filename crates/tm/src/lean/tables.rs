//! What the lean admission reads once per pod so that each node state and each draw
//! only look up: which of the pod's pools hold each of the node's GPU and NIC addresses
//! ([`Holders`]), and each GPU's paths to the NICs it may be paired with, in the order
//! NCCL prefers them ([`PairTable`]).

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

/// The GPU↔NIC paths from every GPU to the NICs the pod can get, and for each GPU the
/// rank of each such NIC in [`topoalign_topology::Classifier::best_nic`]'s order
/// (preference, then address), made once where `best_nic` classifies each pair on every
/// call.
#[derive(Debug, Clone)]
pub(super) struct PairTable {
    /// Per NIC (topology index): its column, `NOT_KEPT` when it has none.
    column: Vec<u32>,
    /// Columns per row.
    width: usize,
    /// Row-major, a row per GPU.
    paths: Vec<GpuNicPath>,
    /// Row-major: 0 for the GPU's best NIC of the table, 1 for the next, ….
    rank: Vec<u32>,
}

/// The column of a NIC outside the table.
const NOT_KEPT: u32 = u32::MAX;

impl PairTable {
    /// The table of the node's GPUs and `nics` (topology indices, each once), or `None`
    /// when it would be too large.
    pub(super) fn new(node: &Prepared<'_>, nics: &[usize]) -> Option<Self> {
        let topo = node.topology;
        let (g, w) = (topo.gpus.len(), nics.len());
        if g.saturating_mul(w) > MAX_PAIRS {
            return None;
        }
        let mut column = vec![NOT_KEPT; topo.nics.len()];
        for (c, &n) in nics.iter().enumerate() {
            column[n] = c as u32;
        }
        let cls = &node.classifier;
        let paths: Vec<GpuNicPath> = (0..g)
            .flat_map(|gpu| nics.iter().map(move |&n| cls.gpu_nic(gpu, n)))
            .collect();
        let mut rank = vec![0u32; paths.len()];
        let addresses: Vec<Bdf> = nics.iter().map(|&n| topo.nic_bdf(n)).collect();
        let mut order = Vec::with_capacity(w);
        for gpu in 0..g {
            let row = &paths[gpu * w..(gpu + 1) * w];
            order.clear();
            // Equal addresses go to the lower NIC index, the first one `best_nic` meets:
            // the keys differ, so the order is total.
            order.extend((0..w).map(|c| (row[c].preference(), addresses[c], nics[c], c)));
            order.sort_unstable();
            for (r, &(_, _, _, c)) in order.iter().enumerate() {
                rank[gpu * w + c] = r as u32;
            }
        }
        Some(PairTable {
            column,
            width: w,
            paths,
            rank,
        })
    }

    /// The cell of GPU `g` and NIC `n`, when the table has `n`.
    fn cell(&self, g: usize, n: usize) -> Option<usize> {
        let c = *self.column.get(n)?;
        (c != NOT_KEPT).then(|| g * self.width + c as usize)
    }
}

/// Each GPU of `gpus` (topology indices, ascending) with its best NIC of `nics` (the same
/// as [`crate::simulate::gpu_pairs`]), through `table` when it has every NIC of `nics`.
pub(super) fn pairs(
    node: &Prepared<'_>,
    table: Option<&PairTable>,
    gpus: impl Iterator<Item = usize>,
    nics: impl Iterator<Item = usize> + Clone,
) -> Vec<GpuPair> {
    let table = table.filter(|t| nics.clone().all(|n| t.cell(0, n).is_some()));
    gpus.map(|g| {
        let best = match table {
            Some(t) => (nics.clone().filter_map(|n| Some((n, t.cell(g, n)?))))
                .min_by_key(|&(_, at)| t.rank[at])
                .map(|(n, at)| (n, t.paths[at])),
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
            let mut rng = Rng::new(7);
            let every: Vec<usize> = (0..topo.nics.len()).collect();
            let some: Vec<usize> = every.iter().copied().filter(|n| n % 3 != 1).collect();
            for kept in [every, some] {
                let table = PairTable::new(&node, &kept).unwrap();
                for _ in 0..200 {
                    let gpus: Vec<usize> =
                        (0..topo.gpus.len()).filter(|_| rng.below(3) == 0).collect();
                    // Mostly NICs of the table, sometimes one outside it.
                    let from = if rng.below(4) == 0 {
                        topo.nics.len()
                    } else {
                        kept.len()
                    };
                    let nics: Vec<usize> = (0..from)
                        .filter(|_| rng.below(4) == 0)
                        .map(|i| if from == kept.len() { kept[i] } else { i })
                        .collect();
                    let want = gpu_pairs(&node, gpus.clone(), nics.clone());
                    let (g, n) = (gpus.iter().copied(), nics.iter().copied());
                    assert_eq!(
                        pairs(&node, Some(&table), g.clone(), n.clone()),
                        want,
                        "{name}"
                    );
                    assert_eq!(pairs(&node, None, g, n), want, "{name}");
                }
            }
        }
    }
}
