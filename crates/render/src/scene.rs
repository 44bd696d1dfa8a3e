//! What the drawings and tables derive from a topology before laying anything out: the
//! PCI tree as child lists, the NUMA node of each host bridge, each GPU's best NIC, the
//! fabric summarised into groups, and the colour of each pair class.

use std::collections::BTreeMap;

use topoalign_topology::{Classifier, FabricKind, GpuNicPath, PciParent, PcieClass, Topology};

use crate::text::index_ranges;

/// The colour of a GPU↔NIC pair class: green for PIX, through amber, to red for SYS.
pub(crate) fn class_color(c: PcieClass) -> &'static str {
    match c {
        PcieClass::Pix => "#2e9e44",
        PcieClass::Pxb => "#8bc34a",
        PcieClass::Phb => "#f2b01e",
        PcieClass::Node => "#f57c00",
        PcieClass::Sys => "#d32f2f",
    }
}

/// What each pair class means for a GPU↔NIC pair, in a few words (for legends).
pub(crate) fn class_meaning(c: PcieClass) -> &'static str {
    match c {
        PcieClass::Pix => "same PCIe switch",
        PcieClass::Pxb => "several bridges, no CPU",
        PcieClass::Phb => "through the CPU's host bridge",
        PcieClass::Node => "between host bridges, same NUMA node",
        PcieClass::Sys => "across NUMA nodes",
    }
}

/// The colour used for the GPU fabric (NVLink / xGMI).
pub(crate) const FABRIC_COLOR: &str = "#7b4fbf";

/// The PCI tree as child lists.
#[derive(Debug, Clone)]
pub(crate) struct PciTree {
    /// For every host bridge, the PCI functions directly on its root bus.
    pub roots: Vec<Vec<usize>>,
    /// For every PCI function, the functions directly below it.
    pub children: Vec<Vec<usize>>,
}

impl PciTree {
    /// Builds the child lists (children in address order, since `pci` is sorted).
    pub(crate) fn new(topo: &Topology) -> Self {
        let mut roots = vec![Vec::new(); topo.host_bridges.len()];
        let mut children = vec![Vec::new(); topo.pci.len()];
        for (i, d) in topo.pci.iter().enumerate() {
            match d.parent {
                PciParent::Host(h) => {
                    if let Some(r) = roots.get_mut(h) {
                        r.push(i);
                    }
                }
                PciParent::Bridge(b) => {
                    if let Some(c) = children.get_mut(b) {
                        c.push(i);
                    }
                }
            }
        }
        PciTree { roots, children }
    }
}

/// The NUMA node of every host bridge: that of the first device below it that has one.
pub(crate) fn host_bridge_numa(topo: &Topology, c: &Classifier<'_>) -> Vec<Option<u32>> {
    let mut out = vec![None; topo.host_bridges.len()];
    for i in 0..topo.pci.len() {
        let h = c.host_of(i);
        if let (Some(slot), Some(n)) = (out.get_mut(h), c.numa_of(i)) {
            slot.get_or_insert(n);
        }
    }
    out
}

/// A NIC a GPU would pair with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct BestNic {
    /// Index into `Topology::nics`.
    pub nic: usize,
    /// The pair's classification.
    pub path: GpuNicPath,
}

/// For every GPU, its closest RDMA physical-function NIC (or, failing RDMA, any PF).
/// Among equally close NICs, one not yet taken by a lower-numbered GPU is preferred, so
/// that two GPUs sharing a NUMA node with two NICs are drawn against different NICs.
pub(crate) fn best_nics(topo: &Topology, c: &Classifier<'_>) -> Vec<Option<BestNic>> {
    let pfs: Vec<usize> = (0..topo.nics.len())
        .filter(|&n| !topo.nics[n].is_vf())
        .collect();
    let rdma: Vec<usize> = pfs
        .iter()
        .copied()
        .filter(|&n| topo.nics[n].is_rdma())
        .collect();
    let pool = if rdma.is_empty() { pfs } else { rdma };
    let mut uses = vec![0usize; topo.nics.len()];
    (0..topo.gpus.len())
        .map(|g| {
            let best = pool
                .iter()
                .map(|&n| (n, c.gpu_nic(g, n)))
                .min_by_key(|(n, p)| (p.class, uses[*n], *n))?;
            uses[best.0] += 1;
            Some(BestNic {
                nic: best.0,
                path: best.1,
            })
        })
        .collect()
}

/// GPUs joined by one kind of fabric link with one link count.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct FabricGroup {
    /// NVLink or xGMI.
    pub kind: FabricKind,
    /// Bonded links per pair.
    pub count: u32,
    /// The GPUs in the group, sorted.
    pub gpus: Vec<usize>,
    /// The linked pairs (a < b).
    pub pairs: Vec<(usize, usize)>,
}

impl FabricGroup {
    /// True when every pair of the group's GPUs is linked.
    pub(crate) fn all_to_all(&self) -> bool {
        let n = self.gpus.len();
        n >= 2 && self.pairs.len() == n * (n - 1) / 2
    }

    /// The cell text the pairs show (`NV18`, `XGMI`).
    pub(crate) fn class_text(&self) -> String {
        match self.kind {
            FabricKind::Nvlink => format!("NV{}", self.count),
            FabricKind::Xgmi => "XGMI".to_string(),
        }
    }

    /// The fabric's name (`NVLink`, `xGMI`).
    pub(crate) fn kind_name(&self) -> &'static str {
        match self.kind {
            FabricKind::Nvlink => "NVLink",
            FabricKind::Xgmi => "xGMI",
        }
    }

    /// A one-line description: `NV18 all-to-all among GPU0-7`, or
    /// `NV4 on 3 pairs among GPU0-3`.
    pub(crate) fn describe(&self) -> String {
        let gpus = index_ranges("GPU", &self.gpus);
        if self.all_to_all() {
            format!("{} all-to-all among {gpus}", self.class_text())
        } else {
            let pairs: Vec<String> = self.pairs.iter().map(|(a, b)| format!("{a}-{b}")).collect();
            format!(
                "{} on {} pair(s) among {gpus}: {}",
                self.class_text(),
                self.pairs.len(),
                pairs.join(" ")
            )
        }
    }
}

/// Groups the fabric links by (kind, count), each group's connected GPUs together.
/// Groups are ordered by kind, then count descending.
pub(crate) fn fabric_groups(topo: &Topology) -> Vec<FabricGroup> {
    let mut by_key: BTreeMap<(u8, std::cmp::Reverse<u32>), FabricGroup> = BTreeMap::new();
    for l in &topo.gpu_links {
        let key = (l.kind as u8, std::cmp::Reverse(l.count));
        let g = by_key.entry(key).or_insert_with(|| FabricGroup {
            kind: l.kind,
            count: l.count,
            gpus: Vec::new(),
            pairs: Vec::new(),
        });
        let pair = (l.a.min(l.b), l.a.max(l.b));
        if !g.pairs.contains(&pair) {
            g.pairs.push(pair);
        }
        for x in [pair.0, pair.1] {
            if !g.gpus.contains(&x) {
                g.gpus.push(x);
            }
        }
    }
    let mut out: Vec<FabricGroup> = by_key.into_values().collect();
    for g in &mut out {
        g.gpus.sort_unstable();
        g.pairs.sort_unstable();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use topoalign_profiles as profiles;

    #[test]
    fn fabric_groups_recognise_all_to_all() {
        let t = profiles::get("dgx-h100").unwrap();
        let g = fabric_groups(&t);
        assert_eq!(g.len(), 1);
        assert!(g[0].all_to_all());
        assert_eq!(g[0].describe(), "NV18 all-to-all among GPU0-7");
        let amd = fabric_groups(&profiles::get("mi300x-8").unwrap());
        assert_eq!(amd[0].describe(), "XGMI all-to-all among GPU0-7");
        assert!(fabric_groups(&profiles::get("pcie-2socket").unwrap()).is_empty());
    }

    #[test]
    fn partial_fabric_is_not_all_to_all() {
        let mut t = profiles::get("gb300-4").unwrap();
        t.gpu_links.retain(|l| l.a == 0);
        let g = fabric_groups(&t);
        assert!(!g[0].all_to_all());
        assert_eq!(
            g[0].describe(),
            "NV18 on 3 pair(s) among GPU0-3: 0-1 0-2 0-3"
        );
    }

    #[test]
    fn best_nics_spread_over_equal_choices() {
        let t = profiles::get("gb300-4").unwrap();
        let c = t.classifier();
        let best: Vec<usize> = best_nics(&t, &c).iter().map(|b| b.unwrap().nic).collect();
        assert_eq!(best, vec![0, 1, 2, 3]);
        let t = profiles::get("dgx-h100").unwrap();
        let c = t.classifier();
        for b in best_nics(&t, &c) {
            assert_eq!(b.unwrap().path.class, PcieClass::Pix);
        }
    }

    #[test]
    fn host_bridges_get_their_devices_numa() {
        let t = profiles::get("gb300-4").unwrap();
        let c = t.classifier();
        let numa = host_bridge_numa(&t, &c);
        assert_eq!(
            numa,
            vec![
                Some(0),
                Some(0),
                Some(1),
                Some(1),
                Some(0),
                Some(0),
                Some(1),
                Some(1)
            ]
        );
        let tree = PciTree::new(&t);
        assert_eq!(tree.roots.len(), t.host_bridges.len());
        assert!(tree.roots.iter().all(|r| r.len() == 1));
    }
}
