//! Rebuilding a [`Topology`] from an [`NvidiaSmiTopo`].
//!
//! nvidia-smi prints classes, not addresses, so the PCI tree is synthesised (addresses
//! per [`super::synth`]) such that the classifier reproduces every cell:
//! - devices whose pairwise classes are at most `NODE` (or GPUs with the same NUMA
//!   affinity) share a NUMA node; different NUMA nodes get different ids (`SYS`);
//! - at most `PHB`: they share a host bridge (else `NODE`);
//! - at most `PXB`: they share a root port (else `PHB`);
//! - `PIX`: they share a PCIe switch. A root port holding one `PIX` group gets one switch
//!   (or the device directly when alone); holding several, it gets a two-level switch
//!   with one lower switch per group, so that pairs across groups are `PXB`.
//!
//! Each grouping is the transitive closure of the cells; when it contradicts a cell
//! (`A-B PIX`, `B-C PIX`, `A-C SYS`) no tree can reproduce the table and the conversion
//! fails naming the cells. GPU pairs shown as `NV#` say nothing about their PCIe path and
//! become NVLink links. NUMA nodes take their CPUs from the GPUs' `CPU Affinity`. A GPU
//! with a `GPU NUMA ID` (only coherent Grace systems print one) is marked C2C-attached.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::path::Path;

use topoalign_topology::MatrixOptions;
use topoalign_topology::pci::{class, vendor};
use topoalign_topology::{
    CpuSet, FabricKind, Gpu, GpuVendor, Nic, PairClass, PairMatrix, PciKind, PciParent, PcieClass,
};

use super::malformed;
use super::nvsmi::NvidiaSmiTopo;
use super::synth::{SynthTree, gpu_bdf, nic_bdf};
use crate::discovery::Discovery;
use crate::error::DiscoverError;

/// The grouping levels, coarse to fine, with what sharing a group means.
const LEVELS: [(PcieClass, &str); 4] = [
    (PcieClass::Node, "NUMA node"),
    (PcieClass::Phb, "host bridge"),
    (PcieClass::Pxb, "root port"),
    (PcieClass::Pix, "PCIe switch"),
];

impl NvidiaSmiTopo {
    /// Builds a topology whose pair matrix reproduces this table. `path` is only used in
    /// error messages.
    pub fn to_topology(&self, name: &str, path: &Path) -> Result<Discovery, DiscoverError> {
        let n = self.len();
        let g = self.gpus.len();
        let bad = |line: usize, msg: String| malformed(path, line, msg);
        // PCIe class of each pair; None for the diagonal and fabric cells.
        let mut pcie: Vec<Option<PcieClass>> = vec![None; n * n];
        for r in 0..n {
            for c in 0..n {
                match self.cell(r, c) {
                    PairClass::Pcie(cl) => pcie[r * n + c] = Some(cl),
                    PairClass::NvLink(_) | PairClass::Xgmi(_) if r >= g || c >= g => {
                        return Err(bad(
                            self.row_lines[r],
                            format!(
                                "{}/{} is {}, but NVLink/xGMI only joins two GPUs",
                                self.label(r),
                                self.label(c),
                                self.cell(r, c)
                            ),
                        ));
                    }
                    _ => {}
                }
            }
        }

        let mut groups: Vec<Vec<usize>> = Vec::new();
        for (level, what) in LEVELS {
            let same_numa = |a: usize, b: usize| {
                level == PcieClass::Node
                    && a < g
                    && b < g
                    && self.numa_affinity[a].is_some()
                    && self.numa_affinity[a] == self.numa_affinity[b]
            };
            // The cells decide; a shared NUMA affinity joins only GPUs whose cell says
            // nothing of PCIe (NV#), never a pair the tool calls SYS.
            let linked = |a: usize, b: usize| match pcie[a * n + b] {
                Some(c) => c <= level,
                None => same_numa(a, b),
            };
            let comp = components(n, &linked);
            for a in 0..n {
                for b in a + 1..n {
                    if let Some(cl) = pcie[a * n + b]
                        && comp[a] == comp[b]
                        && cl > level
                    {
                        let chain = chain_text(self, &linked, a, b, &pcie, level);
                        return Err(bad(
                            self.row_lines[a],
                            format!(
                                "inconsistent cells: {chain} put {} and {} on the same {what}, but {}/{} is {cl}",
                                self.label(a),
                                self.label(b),
                                self.label(a),
                                self.label(b)
                            ),
                        ));
                    }
                }
            }
            groups.push(comp);
        }

        // NUMA ids per NUMA group: the first affinity of its GPUs that no earlier group
        // took. nvidia-smi is the authority on its cells; where its NUMA columns disagree
        // with them (GPUs of one affinity with SYS between them, or one group of several
        // affinities) the cells are kept and the disagreement is said.
        let numa_group = &groups[0];
        let mut warnings = self.warnings.clone();
        let mut group_numa: BTreeMap<usize, u32> = BTreeMap::new();
        let mut members: BTreeMap<usize, Vec<usize>> = BTreeMap::new();
        for (i, &grp) in numa_group.iter().enumerate().take(g) {
            members.entry(grp).or_default().push(i);
        }
        let mut order: Vec<usize> = members.keys().copied().collect();
        order.sort_by_key(|grp| members[grp][0]);
        let mut owner: BTreeMap<u32, usize> = BTreeMap::new();
        let mut disagreeing: BTreeSet<usize> = BTreeSet::new();
        for grp in &order {
            let gpus = &members[grp];
            let ids: Vec<(usize, u32)> = (gpus.iter())
                .filter_map(|&i| self.numa_affinity[i].map(|id| (i, id)))
                .collect();
            let distinct: BTreeSet<u32> = ids.iter().map(|(_, id)| *id).collect();
            if distinct.len() > 1 {
                let list: Vec<String> = (ids.iter())
                    .map(|(i, id)| format!("{} ({id})", self.label(*i)))
                    .collect();
                warnings.push(format!(
                    "nvidia-smi's cells put {} on one NUMA node although its NUMA Affinity column names several; the cells are kept",
                    list.join(", ")
                ));
            }
            match ids.iter().find(|(_, id)| !owner.contains_key(id)) {
                Some((_, id)) => {
                    owner.insert(*id, *grp);
                    group_numa.insert(*grp, *id);
                }
                None => {
                    if let Some((i, id)) = ids.first() {
                        disagreeing.insert(*grp);
                        let other = members[&owner[id]][0];
                        warnings.push(format!(
                            "{} and {} both have NUMA affinity {id}, but nvidia-smi's cells say {} between them (different NUMA nodes); the cells are kept and {} is placed on a NUMA node of its own",
                            self.label(other),
                            self.label(*i),
                            self.cell(other, *i),
                            self.label(*i)
                        ));
                    }
                }
            }
        }
        let distinct: BTreeSet<usize> = numa_group.iter().copied().collect();
        if distinct.len() > 1 {
            let mut used: BTreeSet<u32> = group_numa.values().copied().collect();
            let mut next = 0u32;
            let mut synthesised = false;
            for grp in &distinct {
                if group_numa.contains_key(grp) {
                    continue;
                }
                while used.contains(&next) {
                    next += 1;
                }
                group_numa.insert(*grp, next);
                used.insert(next);
                synthesised |= !disagreeing.contains(grp);
            }
            if synthesised {
                warnings.push(
                    "some devices have no NUMA affinity; synthetic NUMA node ids were assigned so that SYS cells hold"
                        .to_string(),
                );
            }
        }
        let numa_of = |i: usize| group_numa.get(&numa_group[i]).copied();

        let mut tree = SynthTree::new(name);
        let too_big = |m: String| bad(self.header_line, m);
        let too_large = |source| DiscoverError::TooLarge {
            path: path.to_path_buf(),
            line: self.header_line,
            source,
        };
        // NUMA records with CPUs from the GPUs' affinity.
        let mut numa_cpus: BTreeMap<u32, Option<CpuSet>> = BTreeMap::new();
        for i in 0..n {
            if let Some(id) = numa_of(i) {
                let entry = numa_cpus.entry(id).or_insert(None);
                if let Some(Some(cpus)) = self.cpu_affinity.get(i) {
                    match entry {
                        Some(prev) if prev != cpus => warnings.push(format!(
                            "{} has CPU affinity {cpus} but another GPU on NUMA node {id} has {prev}; keeping the first",
                            self.label(i)
                        )),
                        Some(_) => {}
                        None => *entry = Some(cpus.clone()),
                    }
                }
            }
        }
        for (id, cpus) in &numa_cpus {
            tree.builder.numa_node(
                *id,
                cpus.clone().unwrap_or_default(),
                None,
                Vec::new(),
                None,
            );
        }

        // The tree: host bridge per PHB group, root port per PXB group, switches per PIX.
        let order = |level: usize, members: &[usize]| -> Vec<Vec<usize>> {
            let mut by: BTreeMap<usize, Vec<usize>> = BTreeMap::new();
            for &m in members {
                by.entry(groups[level][m]).or_default().push(m);
            }
            let mut v: Vec<Vec<usize>> = by.into_values().collect();
            v.sort();
            v
        };
        let all: Vec<usize> = (0..n).collect();
        let mut parent_of: Vec<Option<PciParent>> = vec![None; n];
        for hb_members in order(1, &all) {
            let numa = numa_of(hb_members[0]);
            let hb = tree.host_bridge().map_err(too_large)?;
            for rp_members in order(2, &hb_members) {
                let rp = tree
                    .bridge(hb, PciKind::RootPort, numa)
                    .map_err(too_large)?;
                let clusters = order(3, &rp_members);
                if clusters.len() == 1 && clusters[0].len() == 1 {
                    parent_of[clusters[0][0]] = Some(rp);
                } else if clusters.len() == 1 {
                    let usp = tree
                        .bridge(rp, PciKind::SwitchUpstream, numa)
                        .map_err(too_large)?;
                    for &d in &clusters[0] {
                        let dsp = tree
                            .bridge(usp, PciKind::SwitchDownstream, numa)
                            .map_err(too_large)?;
                        parent_of[d] = Some(dsp);
                    }
                } else {
                    let top = tree
                        .bridge(rp, PciKind::SwitchUpstream, numa)
                        .map_err(too_large)?;
                    for cluster in &clusters {
                        let tdsp = tree
                            .bridge(top, PciKind::SwitchDownstream, numa)
                            .map_err(too_large)?;
                        let lower = tree
                            .bridge(tdsp, PciKind::SwitchUpstream, numa)
                            .map_err(too_large)?;
                        for &d in cluster {
                            let dsp = tree
                                .bridge(lower, PciKind::SwitchDownstream, numa)
                                .map_err(too_large)?;
                            parent_of[d] = Some(dsp);
                        }
                    }
                }
            }
        }

        let amd = self.cells.iter().any(|c| matches!(c, PairClass::Xgmi(_)));
        for (i, parent) in parent_of.iter().enumerate() {
            let parent =
                parent.ok_or_else(|| too_big(format!("{} was not placed", self.label(i))))?;
            if i < g {
                let bdf = gpu_bdf(i).ok_or_else(|| too_big("more than 256 GPUs".to_string()))?;
                let (vend, vendor_id) = if amd {
                    (GpuVendor::Amd, vendor::AMD)
                } else {
                    (GpuVendor::Nvidia, vendor::NVIDIA)
                };
                let p = tree.builder.endpoint(
                    parent,
                    bdf,
                    vendor_id,
                    0,
                    class::DISPLAY_3D,
                    numa_of(i),
                    None,
                );
                let mut gpu = Gpu::on(p, vend);
                gpu.memory_numa_node = self.gpu_numa_id[i];
                gpu.c2c = gpu.memory_numa_node.is_some();
                tree.builder.gpu(gpu);
            } else {
                let k = i - g;
                let bdf = nic_bdf(k).ok_or_else(|| too_big("more than 256 NICs".to_string()))?;
                let nic_info = &self.nics[k];
                let name = nic_info
                    .name
                    .clone()
                    .unwrap_or_else(|| nic_info.label.clone());
                let (vendor_id, cls) = if name.starts_with("mlx") {
                    (vendor::MELLANOX, class::INFINIBAND)
                } else {
                    (0, class::ETHERNET)
                };
                let p = tree
                    .builder
                    .endpoint(parent, bdf, vendor_id, 0, cls, numa_of(i), None);
                let mut nic = Nic::on(p);
                nic.rdma = Some(name);
                tree.builder.nic(nic);
            }
        }
        for a in 0..g {
            for b in a + 1..g {
                match self.cell(a, b) {
                    PairClass::NvLink(c) => {
                        tree.builder.link(a, b, FabricKind::Nvlink, c);
                    }
                    PairClass::Xgmi(c) => {
                        tree.builder.link(a, b, FabricKind::Xgmi, c);
                    }
                    _ => {}
                }
            }
        }
        let topology = tree.builder.build()?;
        self.check_reproduced(&topology, path)?;
        Ok(Discovery { topology, warnings })
    }

    /// Defensive check: the rebuilt topology's matrix must equal the table.
    fn check_reproduced(
        &self,
        topo: &topoalign_topology::Topology,
        path: &Path,
    ) -> Result<(), DiscoverError> {
        let m = PairMatrix::build(
            topo,
            MatrixOptions {
                include_vfs: true,
                include_non_rdma: true,
            },
        );
        let n = self.len();
        if m.devices.len() != n {
            return Err(malformed(
                path,
                0,
                format!(
                    "internal error: rebuilt {} devices from {n}",
                    m.devices.len()
                ),
            ));
        }
        for r in 0..n {
            for c in 0..n {
                if m.cell(r, c) != self.cell(r, c) {
                    return Err(malformed(
                        path,
                        self.row_lines[r],
                        format!(
                            "no PCI tree reproduces {}/{} = {} (the rebuilt tree gives {})",
                            self.label(r),
                            self.label(c),
                            self.cell(r, c),
                            m.cell(r, c)
                        ),
                    ));
                }
            }
        }
        Ok(())
    }
}

/// Connected components of the graph where `linked(a, b)`; component id = smallest member.
fn components(n: usize, linked: &dyn Fn(usize, usize) -> bool) -> Vec<usize> {
    let mut comp = vec![usize::MAX; n];
    for start in 0..n {
        if comp[start] != usize::MAX {
            continue;
        }
        comp[start] = start;
        let mut queue = VecDeque::from([start]);
        while let Some(x) = queue.pop_front() {
            for (y, slot) in comp.iter_mut().enumerate() {
                if *slot == usize::MAX && y != x && linked(x, y) {
                    *slot = start;
                    queue.push_back(y);
                }
            }
        }
    }
    comp
}

/// Describes the shortest chain of links from `a` to `b`, e.g.
/// `GPU0/NIC0 is PIX, NIC0/GPU1 is PIX`.
fn chain_text(
    t: &NvidiaSmiTopo,
    linked: &dyn Fn(usize, usize) -> bool,
    a: usize,
    b: usize,
    pcie: &[Option<PcieClass>],
    level: PcieClass,
) -> String {
    let n = t.len();
    let mut prev = vec![usize::MAX; n];
    prev[a] = a;
    let mut queue = VecDeque::from([a]);
    while let Some(x) = queue.pop_front() {
        if x == b {
            break;
        }
        for (y, slot) in prev.iter_mut().enumerate() {
            if *slot == usize::MAX && linked(x, y) {
                *slot = x;
                queue.push_back(y);
            }
        }
    }
    if prev[b] == usize::MAX {
        return format!("the cells of {} and {}", t.label(a), t.label(b));
    }
    let mut path = vec![b];
    let mut cur = b;
    while cur != a {
        cur = prev[cur];
        path.push(cur);
    }
    path.reverse();
    path.windows(2)
        .map(|w| match pcie[w[0] * n + w[1]] {
            Some(cl) if cl <= level => format!("{}/{} is {cl}", t.label(w[0]), t.label(w[1])),
            _ => format!(
                "{} and {} have the same NUMA affinity",
                t.label(w[0]),
                t.label(w[1])
            ),
        })
        .collect::<Vec<_>>()
        .join(", ")
}
