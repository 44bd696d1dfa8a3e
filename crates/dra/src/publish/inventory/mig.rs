//! The MIG builders: one [`MigEntry`] per MIG instance (static, dynamic or written
//! down) and one [`MigPairEntry`] per instance and pair of its parent GPU. An instance
//! sits where its parent sits: its locality is its GPU's.

use topoalign_topology::Bdf;

use crate::publish::entries::{GpuEntry, PairEntry, PhysicalNic};
use crate::publish::mig::{MigEntry, MigPairEntry, NodeMig};
use crate::publish::names;

/// The MIG entries of `gpus` (in address order) by `mig`, GPU by GPU, by start.
pub(super) fn migs(gpus: &[GpuEntry], mig: &NodeMig) -> Vec<MigEntry> {
    let mut out = Vec::new();
    for (gi, g) in gpus.iter().enumerate() {
        let Some(layout) = mig.gpu(g.bdf) else {
            continue;
        };
        for i in &layout.instances {
            out.push(MigEntry {
                name: names::mig_device(g.bdf, &i.profile, i.profile_id, i.start),
                gpu: gi,
                instance: i.clone(),
            });
        }
    }
    out
}

/// The GPUs under dynamic MIG, in address order.
pub(super) fn dynamic(mig: &NodeMig) -> Vec<Bdf> {
    let mut mig_dynamic: Vec<Bdf> = (mig.gpus.iter())
        .filter(|g| g.dynamic)
        .map(|g| g.bdf)
        .collect();
    mig_dynamic.sort();
    mig_dynamic
}

/// One MIG pair per (instance, pair of its parent): best class first, then in `migs`
/// order (GPU by GPU, so that first fit fills a GPU before the next), then NIC address.
///
/// A placement of a dynamic-MIG GPU (`dynamic`, sorted) pairs with its parent's best
/// pairs only (those at the parent's best level): 18 placements per GPU times every
/// pair of the parent would let a claim no node can hold cost the allocator an
/// unbounded search.
pub(super) fn mig_pairs(
    gpus: &[GpuEntry],
    nics: &[PhysicalNic],
    pairs: &[PairEntry],
    migs: &[MigEntry],
    dynamic: &[Bdf],
) -> Vec<MigPairEntry> {
    let mut keyed = Vec::new();
    for (mi, m) in migs.iter().enumerate() {
        let Some(g) = gpus.get(m.gpu) else {
            continue;
        };
        let own = || pairs.iter().enumerate().filter(|(_, p)| p.gpu == m.gpu);
        let best = own().map(|(_, p)| p.path.preference()).min();
        let only_best = dynamic.binary_search(&g.bdf).is_ok();
        for (pi, p) in own().filter(|(_, p)| !only_best || Some(p.path.preference()) == best) {
            let Some(n) = nics.get(p.nic) else {
                continue;
            };
            let i = &m.instance;
            let name = names::mig_pair_device(g.bdf, &i.profile, i.profile_id, i.start, n.bdf);
            keyed.push((
                (p.path.preference(), mi, n.bdf),
                MigPairEntry {
                    name,
                    mig: mi,
                    pair: pi,
                },
            ));
        }
    }
    keyed.sort_by_key(|k| k.0);
    keyed.into_iter().map(|(_, e)| e).collect()
}
