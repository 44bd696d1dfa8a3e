//! What [`crate::Planner::new`] precomputes once per topology: the GPU×NIC path table,
//! the GPU fabric table, NUMA facts, fragmentation groups and device equivalence classes.
//!
//! Two GPUs are in one class when swapping them changes no cost criterion: same NUMA
//! node, switch and fabric island, same C2C attachment, the same path to every NIC, the
//! same fabric link to every other GPU, and a uniform link to each other member. NICs
//! likewise (NUMA node, switch, path to every GPU). The search then chooses how many
//! devices to take from each class instead of which devices.

use std::collections::HashMap;

use topoalign_topology::{Bdf, CpuSet, GpuNicPath, PairClass, Topology};

/// Group memberships of a device: switch, NUMA node, fabric island (GPUs only).
pub(crate) type Groups = [Option<usize>; 3];

/// What makes two NICs interchangeable: groups and (class, NCCL path, GDR) per GPU.
type NicKey = (Groups, Vec<(u8, u8, bool)>);

/// The precomputed view of one topology.
#[derive(Debug, Clone)]
pub(crate) struct Model {
    pub gpu_bdf: Vec<Bdf>,
    pub nic_bdf: Vec<Bdf>,
    pub gpu_index: HashMap<Bdf, usize>,
    pub nic_index: HashMap<Bdf, usize>,
    /// NUMA index (position in `topo.numa`) per GPU / NIC.
    pub gpu_numa: Vec<Option<usize>>,
    pub nic_numa: Vec<Option<usize>>,
    /// GPU×NIC paths, row-major.
    pub path: Vec<GpuNicPath>,
    /// GPU×GPU fabric link count (`None`: PCIe only), row-major.
    pub fabric: Vec<Option<u32>>,
    /// GPU×GPU nvidia-smi class, row-major (for explanations).
    pub gpu_pair: Vec<PairClass>,
    /// Groups per GPU / NIC.
    pub gpu_groups: Vec<Groups>,
    pub nic_groups: Vec<Groups>,
    /// Devices (GPUs + NICs) per group.
    pub group_size: Vec<u32>,
    /// Classes, each listing its members in address order.
    pub gpu_classes: Vec<Vec<usize>>,
    pub nic_classes: Vec<Vec<usize>>,
    /// Link count inside each GPU class (`None`: members not linked or a single GPU).
    pub class_intra: Vec<Option<u32>>,
    /// NUMA: ids, SLIT matrix, CPUs, memory bytes.
    pub numa_ids: Vec<u32>,
    pub numa_dist: Vec<Vec<u32>>,
    pub numa_cpus: Vec<CpuSet>,
    pub numa_mem: Vec<Option<u64>>,
    /// Vendor names and models, for the GPU filters.
    pub gpu_vendor: Vec<String>,
    pub gpu_model: Vec<Option<String>>,
}

impl Model {
    pub(crate) fn build(topo: &Topology) -> Model {
        let cls = topo.classifier();
        let (g, n) = (topo.gpus.len(), topo.nics.len());
        let numa_pos =
            |id: Option<u32>| id.and_then(|id| topo.numa.iter().position(|x| x.id == id));
        let gpu_bdf: Vec<Bdf> = (0..g).map(|i| topo.gpu_bdf(i)).collect();
        let nic_bdf: Vec<Bdf> = (0..n).map(|i| topo.nic_bdf(i)).collect();
        let gpu_numa: Vec<Option<usize>> = topo
            .gpus
            .iter()
            .map(|x| numa_pos(cls.numa_of(x.pci)))
            .collect();
        let nic_numa: Vec<Option<usize>> = topo
            .nics
            .iter()
            .map(|x| numa_pos(cls.numa_of(x.pci)))
            .collect();
        let path = cls.gpu_nic_table();
        let mut fabric = vec![None; g * g];
        let mut gpu_pair = vec![PairClass::Same; g * g];
        for a in 0..g {
            for b in 0..g {
                let c = cls.gpu_gpu(a, b);
                gpu_pair[a * g + b] = c;
                fabric[a * g + b] = match c {
                    PairClass::NvLink(k) | PairClass::Xgmi(k) => Some(k),
                    _ => None,
                };
            }
        }

        // Fragmentation groups: switches, NUMA nodes, islands of two or more GPUs.
        let mut group_size: Vec<u32> = Vec::new();
        let mut switch_group: HashMap<usize, usize> = HashMap::new();
        let mut numa_group: HashMap<usize, usize> = HashMap::new();
        let new_group = |sizes: &mut Vec<u32>| {
            sizes.push(0);
            sizes.len() - 1
        };
        let mut groups_of = |pci: usize, numa: Option<usize>, sizes: &mut Vec<u32>| -> Groups {
            let sw = topo
                .nearest_switch(pci)
                .map(|s| *switch_group.entry(s).or_insert_with(|| new_group(sizes)));
            let nu = numa.map(|x| *numa_group.entry(x).or_insert_with(|| new_group(sizes)));
            [sw, nu, None]
        };
        let mut gpu_groups: Vec<Groups> = (0..g)
            .map(|i| groups_of(topo.gpus[i].pci, gpu_numa[i], &mut group_size))
            .collect();
        let nic_groups: Vec<Groups> = (0..n)
            .map(|i| groups_of(topo.nics[i].pci, nic_numa[i], &mut group_size))
            .collect();
        for island in topo.fabric_islands() {
            if island.len() >= 2 {
                group_size.push(0);
                let id = group_size.len() - 1;
                for &m in &island {
                    gpu_groups[m][2] = Some(id);
                }
            }
        }
        for gr in gpu_groups.iter().chain(nic_groups.iter()) {
            for x in gr.iter().flatten() {
                group_size[*x] += 1;
            }
        }

        // GPU classes.
        let gpu_sig: Vec<(Groups, bool, Vec<GpuNicPath>)> = (0..g)
            .map(|i| {
                (
                    gpu_groups[i],
                    topo.gpus[i].c2c,
                    path[i * n..(i + 1) * n].to_vec(),
                )
            })
            .collect();
        let fab = |a: usize, b: usize| fabric[a * g + b];
        let mut gpu_classes: Vec<Vec<usize>> = Vec::new();
        let mut class_intra: Vec<Option<u32>> = Vec::new();
        for a in 0..g {
            let found = gpu_classes.iter().position(|members| {
                let first = members[0];
                if gpu_sig[first] != gpu_sig[a] {
                    return false;
                }
                let intra = if members.len() >= 2 {
                    fab(members[0], members[1])
                } else {
                    fab(a, first)
                };
                members.iter().all(|&m| {
                    fab(a, m) == intra && (0..g).all(|c| c == a || c == m || fab(a, c) == fab(m, c))
                })
            });
            match found {
                Some(k) => {
                    if gpu_classes[k].len() == 1 {
                        class_intra[k] = fab(a, gpu_classes[k][0]);
                    }
                    gpu_classes[k].push(a);
                }
                None => {
                    gpu_classes.push(vec![a]);
                    class_intra.push(None);
                }
            }
        }

        // NIC classes.
        let mut nic_classes: Vec<Vec<usize>> = Vec::new();
        let mut nic_key: HashMap<NicKey, usize> = HashMap::new();
        for b in 0..n {
            let column: Vec<(u8, u8, bool)> = (0..g)
                .map(|a| {
                    let p = path[a * n + b];
                    (p.class as u8, p.nccl as u8, p.gdr)
                })
                .collect();
            let k = *nic_key.entry((nic_groups[b], column)).or_insert_with(|| {
                nic_classes.push(Vec::new());
                nic_classes.len() - 1
            });
            nic_classes[k].push(b);
        }

        let numa_ids: Vec<u32> = topo.numa.iter().map(|x| x.id).collect();
        let numa_dist = numa_ids
            .iter()
            .map(|&a| {
                numa_ids
                    .iter()
                    .map(|&b| topo.numa_distance(a, b).unwrap_or(0))
                    .collect()
            })
            .collect();
        Model {
            gpu_index: gpu_bdf.iter().enumerate().map(|(i, b)| (*b, i)).collect(),
            nic_index: nic_bdf.iter().enumerate().map(|(i, b)| (*b, i)).collect(),
            gpu_bdf,
            nic_bdf,
            gpu_numa,
            nic_numa,
            path,
            fabric,
            gpu_pair,
            gpu_groups,
            nic_groups,
            group_size,
            gpu_classes,
            nic_classes,
            class_intra,
            numa_ids,
            numa_dist,
            numa_cpus: topo.numa.iter().map(|x| x.cpus.clone()).collect(),
            numa_mem: topo
                .numa
                .iter()
                .map(|x| x.memory_kib.map(|k| k.saturating_mul(1024)))
                .collect(),
            gpu_vendor: topo.gpus.iter().map(|x| x.vendor.to_string()).collect(),
            gpu_model: topo.gpus.iter().map(|x| x.model.clone()).collect(),
        }
    }

    /// Number of NICs.
    pub(crate) fn nics(&self) -> usize {
        self.nic_bdf.len()
    }

    /// The path between GPU `g` and NIC `n`.
    pub(crate) fn path(&self, g: usize, n: usize) -> GpuNicPath {
        self.path[g * self.nics() + n]
    }

    /// The fabric link count between two GPUs.
    pub(crate) fn fabric(&self, a: usize, b: usize) -> Option<u32> {
        self.fabric[a * self.gpu_bdf.len() + b]
    }

    /// SLIT distance sum over unordered pairs of the nodes in `mask`.
    pub(crate) fn slit(&self, mask: u64) -> u32 {
        let mut sum = 0;
        for a in 0..self.numa_ids.len() {
            if mask >> a & 1 == 0 {
                continue;
            }
            for b in a + 1..self.numa_ids.len() {
                if mask >> b & 1 == 1 {
                    sum += self.numa_dist[a][b];
                }
            }
        }
        sum
    }
}
