//! A node type of the fleet (a topology with its allocatable devices precomputed) and
//! the mutable state of one node (what is in use).

use std::sync::Arc;

use serde::Serialize;
use topoalign_topology::{Bdf, CpuSet, GpuNicPath, PcieClass, Topology};

use crate::error::FleetError;

/// CPUs every node reserves for system daemons (`reservedSystemCPUs`): the static CPU
/// manager never hands them to containers, the planner never plans on them, and they do
/// not count as allocatable.
pub(crate) const RESERVED_CPUS: usize = 2;

/// A node type: a topology plus the facts every policy needs, computed once.
#[derive(Debug, Clone)]
pub struct NodeModel {
    /// The topology.
    pub topology: Arc<Topology>,
    /// GPU indices (into `topology.gpus`), in PCI address order.
    pub gpus: Vec<usize>,
    /// The NIC functions pods get (indices into `topology.nics`), in PCI address order:
    /// SR-IOV VFs when the node has any (seed 000's `sriov-rdma-vf`), else the RDMA PFs.
    pub nics: Vec<usize>,
    /// PCI address of each GPU in `gpus` order (ascending).
    pub gpu_bdf: Vec<Bdf>,
    /// PCI address of each NIC in `nics` order (ascending).
    pub nic_bdf: Vec<Bdf>,
    /// Whether `nics` are VFs.
    pub nics_are_vfs: bool,
    /// NUMA node of each GPU in `gpus` order (after the classifier's fallbacks).
    pub gpu_numa: Vec<Option<u32>>,
    /// NUMA node of each NIC in `nics` order.
    pub nic_numa: Vec<Option<u32>>,
    /// `resource.kubernetes.io/pcieRoot` of each GPU in `gpus` order.
    pub gpu_root: Vec<String>,
    /// `resource.kubernetes.io/pcieRoot` of each NIC in `nics` order.
    pub nic_root: Vec<String>,
    /// GPU×NIC paths, row-major over the positions in `gpus` and `nics`.
    pub paths: Vec<GpuNicPath>,
    /// The CPUs reserved for the system (`RESERVED_CPUS` lowest CPU ids).
    pub reserved_cpus: CpuSet,
    /// CPUs pods may request: all CPUs minus the reserved ones.
    pub allocatable_cpus: u32,
}

impl NodeModel {
    /// Precomputes the model of a topology.
    pub fn new(topology: Arc<Topology>) -> Result<NodeModel, FleetError> {
        let unusable = |reason: String| FleetError::UnusableNode {
            profile: topology.name.clone(),
            reason,
        };
        topology
            .validate()
            .map_err(|e| unusable(format!("invalid topology: {e}")))?;
        let topo = &*topology;
        let classifier = topo.classifier();
        let mut gpus: Vec<usize> = (0..topo.gpus.len()).collect();
        gpus.sort_by_key(|&g| topo.gpu_bdf(g));
        let vfs: Vec<usize> = (0..topo.nics.len())
            .filter(|&n| topo.nics[n].is_vf())
            .collect();
        let nics_are_vfs = !vfs.is_empty();
        let mut nics = if nics_are_vfs {
            vfs
        } else {
            (0..topo.nics.len())
                .filter(|&n| topo.nics[n].is_rdma() && !topo.nics[n].is_vf())
                .collect()
        };
        nics.sort_by_key(|&n| topo.nic_bdf(n));
        if gpus.is_empty() {
            return Err(unusable("it has no GPU".to_string()));
        }
        if nics.is_empty() {
            return Err(unusable("it has no RDMA NIC or VF".to_string()));
        }
        let all_cpus =
            CpuSet::from_ids(topo.numa.iter().flat_map(|n| n.cpus.ids().iter().copied()));
        if all_cpus.len() <= RESERVED_CPUS {
            return Err(unusable(format!(
                "it has {} CPUs, not more than the {RESERVED_CPUS} reserved for the system",
                all_cpus.len()
            )));
        }
        let reserved_cpus = CpuSet::from_ids(all_cpus.ids().iter().copied().take(RESERVED_CPUS));
        let allocatable_cpus = u32::try_from(all_cpus.len() - RESERVED_CPUS).unwrap_or(u32::MAX);
        let gpu_numa = gpus
            .iter()
            .map(|&g| classifier.numa_of(topo.gpus[g].pci))
            .collect();
        let nic_numa = nics
            .iter()
            .map(|&n| classifier.numa_of(topo.nics[n].pci))
            .collect();
        let root = |pci: usize| topo.pcie_root(pci).unwrap_or_default();
        let gpu_root = gpus.iter().map(|&g| root(topo.gpus[g].pci)).collect();
        let nic_root = nics.iter().map(|&n| root(topo.nics[n].pci)).collect();
        let mut paths = Vec::with_capacity(gpus.len() * nics.len());
        for &g in &gpus {
            for &n in &nics {
                paths.push(classifier.gpu_nic(g, n));
            }
        }
        Ok(NodeModel {
            gpu_bdf: gpus.iter().map(|&g| topo.gpu_bdf(g)).collect(),
            nic_bdf: nics.iter().map(|&n| topo.nic_bdf(n)).collect(),
            topology: Arc::clone(&topology),
            gpus,
            nics,
            nics_are_vfs,
            gpu_numa,
            nic_numa,
            gpu_root,
            nic_root,
            paths,
            reserved_cpus,
            allocatable_cpus,
        })
    }

    /// The path between the GPU and NIC at these positions of `gpus` and `nics`.
    pub fn path(&self, gpu_pos: usize, nic_pos: usize) -> GpuNicPath {
        self.paths[gpu_pos * self.nics.len() + nic_pos]
    }

    /// The position in [`NodeModel::gpus`] of the GPU at this address.
    pub fn gpu_position(&self, bdf: Bdf) -> Option<usize> {
        self.gpu_bdf.binary_search(&bdf).ok()
    }

    /// The position in [`NodeModel::nics`] of the NIC function at this address.
    pub fn nic_position(&self, bdf: Bdf) -> Option<usize> {
        self.nic_bdf.binary_search(&bdf).ok()
    }

    /// How each GPU of an allocation pairs with the allocation's NICs, as NCCL would
    /// pair them: each GPU with its best NIC (best class, GDR first), in GPU order.
    pub fn pairs(&self, gpu_pos: &[usize], nic_pos: &[usize]) -> Vec<GpuNicPath> {
        gpu_pos
            .iter()
            .filter_map(|&g| {
                nic_pos
                    .iter()
                    .map(|&n| self.path(g, n))
                    .min_by_key(GpuNicPath::preference)
            })
            .collect()
    }
}

/// What one pod holds on a node: positions in [`NodeModel::gpus`] and
/// [`NodeModel::nics`], and its CPUs.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Assignment {
    /// GPU positions.
    pub gpus: Vec<usize>,
    /// NIC positions.
    pub nics: Vec<usize>,
    /// CPUs held exclusively (static CPU manager or the planner's pinning).
    pub pinned_cpus: CpuSet,
    /// CPUs counted against the shared pool (no pinning).
    pub shared_cpus: u32,
}

/// The mutable state of one node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeState {
    /// Per GPU position: in use.
    pub gpu_used: Vec<bool>,
    /// Per NIC position: in use.
    pub nic_used: Vec<bool>,
    /// CPUs held exclusively by running pods.
    pub pinned_cpus: CpuSet,
    /// CPUs running pods take from the shared pool, by count.
    pub shared_cpus: u32,
}

impl NodeState {
    /// An empty node.
    pub fn new(model: &NodeModel) -> Self {
        NodeState {
            gpu_used: vec![false; model.gpus.len()],
            nic_used: vec![false; model.nics.len()],
            pinned_cpus: CpuSet::new(),
            shared_cpus: 0,
        }
    }

    /// Free GPU positions.
    pub fn free_gpus(&self) -> impl Iterator<Item = usize> + '_ {
        free(&self.gpu_used)
    }

    /// Free NIC positions.
    pub fn free_nics(&self) -> impl Iterator<Item = usize> + '_ {
        free(&self.nic_used)
    }

    /// GPUs in use.
    pub fn gpus_in_use(&self) -> usize {
        self.gpu_used.iter().filter(|u| **u).count()
    }

    /// Allocatable CPUs no running pod holds.
    pub fn free_cpus(&self, model: &NodeModel) -> u32 {
        let pinned = u32::try_from(self.pinned_cpus.len()).unwrap_or(u32::MAX);
        model
            .allocatable_cpus
            .saturating_sub(pinned)
            .saturating_sub(self.shared_cpus)
    }

    /// Whether the node has enough free devices and CPUs by count alone (what the
    /// kube-scheduler's resource fit checks).
    pub fn fits_by_count(&self, model: &NodeModel, gpus: u32, nics: u32, cpus: u32) -> bool {
        self.free_gpus().count() >= gpus as usize
            && self.free_nics().count() >= nics as usize
            && self.free_cpus(model) >= cpus
    }

    /// The addresses of the GPUs in use.
    pub fn used_gpu_bdfs(&self, model: &NodeModel) -> Vec<Bdf> {
        used(&self.gpu_used, &model.gpu_bdf)
    }

    /// The addresses of the NIC functions in use.
    pub fn used_nic_bdfs(&self, model: &NodeModel) -> Vec<Bdf> {
        used(&self.nic_used, &model.nic_bdf)
    }

    /// Takes an assignment. The caller has checked it is free.
    pub fn take(&mut self, a: &Assignment) {
        self.mark(a, true);
        self.pinned_cpus = self.pinned_cpus.union(&a.pinned_cpus);
        self.shared_cpus += a.shared_cpus;
    }

    /// Gives an assignment back.
    pub fn release(&mut self, a: &Assignment) {
        self.mark(a, false);
        self.pinned_cpus = self.pinned_cpus.difference(&a.pinned_cpus);
        self.shared_cpus = self.shared_cpus.saturating_sub(a.shared_cpus);
    }

    fn mark(&mut self, a: &Assignment, on: bool) {
        for &g in &a.gpus {
            self.gpu_used[g] = on;
        }
        for &n in &a.nics {
            self.nic_used[n] = on;
        }
    }
}

fn free(flags: &[bool]) -> impl Iterator<Item = usize> + '_ {
    flags
        .iter()
        .enumerate()
        .filter(|(_, u)| !**u)
        .map(|(i, _)| i)
}

fn used(flags: &[bool], bdfs: &[Bdf]) -> Vec<Bdf> {
    flags
        .iter()
        .zip(bdfs)
        .filter(|(u, _)| **u)
        .map(|(_, b)| *b)
        .collect()
}

/// Counts of GPU→NIC pairs by class, and how many have GPUDirect RDMA.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PairCounts {
    /// PIX pairs.
    pub pix: u64,
    /// PXB pairs.
    pub pxb: u64,
    /// PHB pairs.
    pub phb: u64,
    /// NODE pairs.
    pub node: u64,
    /// SYS pairs.
    pub sys: u64,
    /// Pairs with GPUDirect RDMA on (NCCL defaults).
    pub gdr: u64,
}

impl PairCounts {
    /// Adds pairs.
    pub fn add(&mut self, pairs: &[GpuNicPath]) {
        for p in pairs {
            *self.slot(p.class) += 1;
            if p.gdr {
                self.gdr += 1;
            }
        }
    }

    fn slot(&mut self, c: PcieClass) -> &mut u64 {
        match c {
            PcieClass::Pix => &mut self.pix,
            PcieClass::Pxb => &mut self.pxb,
            PcieClass::Phb => &mut self.phb,
            PcieClass::Node => &mut self.node,
            PcieClass::Sys => &mut self.sys,
        }
    }

    /// The count of one class.
    pub fn get(&self, c: PcieClass) -> u64 {
        match c {
            PcieClass::Pix => self.pix,
            PcieClass::Pxb => self.pxb,
            PcieClass::Phb => self.phb,
            PcieClass::Node => self.node,
            PcieClass::Sys => self.sys,
        }
    }

    /// All pairs.
    pub fn total(&self) -> u64 {
        self.pix + self.pxb + self.phb + self.node + self.sys
    }

    /// Share of a class among all pairs (0 when there are none).
    pub fn share(&self, c: PcieClass) -> f64 {
        ratio(self.get(c), self.total())
    }

    /// Share of pairs with GDR on.
    pub fn gdr_share(&self) -> f64 {
        ratio(self.gdr, self.total())
    }

    /// The report tables' pair columns, under [`PairCounts::COLUMNS`]: the share of each
    /// class (PIX to SYS), the share with GDR on, and the GDR pair count.
    pub(crate) fn columns(&self) -> [String; 7] {
        let pct = |x: f64| format!("{:.1}%", 100.0 * x);
        [
            pct(self.share(PcieClass::Pix)),
            pct(self.share(PcieClass::Pxb)),
            pct(self.share(PcieClass::Phb)),
            pct(self.share(PcieClass::Node)),
            pct(self.share(PcieClass::Sys)),
            pct(self.gdr_share()),
            self.gdr.to_string(),
        ]
    }

    /// The headers of [`PairCounts::columns`].
    pub(crate) const COLUMNS: [&'static str; 7] =
        ["PIX", "PXB", "PHB", "NODE", "SYS", "GDR", "GDR#"];
}

fn ratio(a: u64, b: u64) -> f64 {
    if b == 0 { 0.0 } else { a as f64 / b as f64 }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::model;

    #[test]
    fn mi300x_offers_vfs_and_dgx_offers_pfs() {
        let m = model("mi300x-8");
        assert!(m.nics_are_vfs);
        assert_eq!(m.gpus.len(), 8);
        assert_eq!(m.nics.len(), 32);
        // The first four VFs belong to the first PF, beside GPU0.
        for n in 0..4 {
            assert_eq!(m.path(0, n).class, PcieClass::Pix);
            assert_eq!(m.gpu_root[0], m.nic_root[n]);
        }
        assert_eq!(m.path(1, 0).class, PcieClass::Node);
        let d = model("dgx-h100");
        assert!(!d.nics_are_vfs);
        assert!(d.nics.len() >= 8);
    }

    #[test]
    fn pairs_take_each_gpus_best_nic() {
        let m = model("mi300x-8");
        // GPU0 and GPU1 with VF0 of PF0 and VF0 of PF1: both PIX.
        let pairs = m.pairs(&[0, 1], &[0, 4]);
        assert!(pairs.iter().all(|p| p.class == PcieClass::Pix && p.gdr));
        // With two VFs of PF0 only: one PIX, one NODE.
        let pairs = m.pairs(&[0, 1], &[0, 1]);
        let mut c = PairCounts::default();
        c.add(&pairs);
        assert_eq!((c.pix, c.node, c.gdr), (1, 1, 1));
        assert!((c.gdr_share() - 0.5).abs() < 1e-9);
    }

    #[test]
    fn take_and_release_round_trip() {
        let m = model("mi300x-8");
        assert_eq!(m.reserved_cpus.ids(), &[0, 1]);
        assert_eq!(m.allocatable_cpus, 222);
        let mut s = NodeState::new(&m);
        let a = Assignment {
            gpus: vec![0, 1],
            nics: vec![0, 4],
            pinned_cpus: CpuSet::range(2, 17),
            shared_cpus: 4,
        };
        let before = s.clone();
        s.take(&a);
        assert_eq!(s.gpus_in_use(), 2);
        assert_eq!(s.free_cpus(&m), 222 - 16 - 4);
        assert!(s.fits_by_count(&m, 6, 30, 202));
        assert!(!s.fits_by_count(&m, 6, 30, 203));
        assert!(!s.fits_by_count(&m, 7, 1, 1));
        assert_eq!(s.used_gpu_bdfs(&m), vec![m.gpu_bdf[0], m.gpu_bdf[1]]);
        assert_eq!(m.nic_position(s.used_nic_bdfs(&m)[1]), Some(4));
        s.release(&a);
        assert_eq!(s, before);
    }
}
