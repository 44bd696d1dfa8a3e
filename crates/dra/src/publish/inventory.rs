//! The node's published devices, derived from a [`Topology`]: what the ResourceSlices
//! say and what the kubelet plugin needs to prepare an allocated device.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use topoalign_topology::{Bdf, GpuNicPath, PcieClass, Sriov, Topology};

use crate::publish::entries::{GpuEntry, NicFunction, PairEntry, PhysicalNic};
use crate::publish::mig::{MigEntry, MigPairEntry, NodeMig};
use crate::publish::names;

/// [`PairsPerGpu::Auto`] budgets the pairs of a node without VFs when the GPUs can
/// take their candidate NICs in more ways than this (mi300x-8 without VFs: 24² ways,
/// 80–150 ms to refuse 9 pairs in kube-scheduler v1.37.2; dgx-h100: 120²).
const AUTO_MAX_COMBINATIONS: f64 = 65_536.0;

/// The counters in one counter set ([`crate::limits::MAX_COUNTERS_PER_SET`]).
const SET_SIZE: usize = crate::limits::MAX_COUNTERS_PER_SET;

/// Which pairs are published, and other choices shared by the publisher and the plugin
/// (both must use the same, or device names would not resolve).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PublishOptions {
    /// The pool generation to write (bump on every change of the pool's content).
    pub generation: i64,
    /// Publish a pair device for every (GPU, physical NIC) at this class or better.
    /// Default `NODE`: the same NUMA node. `SYS` pairs are never published (they would
    /// multiply the allocator's search for claims nobody wants).
    pub max_pair_class: PcieClass,
    /// Publish plain GPU and NIC devices next to the pairs (default true; always on when
    /// `pair_devices` is off).
    pub plain_devices: bool,
    /// Publish pair devices (default true). Off where the API server drops
    /// `sharedCounters`/`consumesCounters` (`DRAPartitionableDevices` off): a pair and a
    /// plain GPU would then not exclude each other, so only plain devices are published.
    pub pair_devices: bool,
    /// How many pair devices each GPU gets (default [`PairsPerGpu::Auto`]).
    pub pairs_per_gpu: PairsPerGpu,
    /// The node's MIG instances (default none): each instance is published as a MIG
    /// device and paired with its parent's NICs (`crate::publish::mig`).
    pub mig: NodeMig,
}

/// How many pair devices each GPU gets.
///
/// The upstream allocator proves a claim unsatisfiable by trying every combination of
/// the devices its selectors accept. A NIC with VFs has a counter larger than one, so
/// several GPUs may pair with it and nothing prunes that search: with every GPU paired
/// to every NIC of its NUMA node, 9 pairs on mi300x-8 (8 GPUs, 4 NICs per NUMA node, 4
/// VFs each) mean 4^8 combinations, 7.3 s in kube-scheduler v1.37.2 while it blocks every
/// other pod. Two pairs per GPU bound that to 2^8.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum PairsPerGpu {
    /// Every pair, unless a paired NIC has VFs or the GPUs can take their candidate
    /// NICs in more than 65,536 ways: then [`PairsPerGpu::AtMost`]`(2)`. (A NIC
    /// counter of one prunes the search by itself on small nodes; VFs, or a 72-GPU node
    /// with 18 NICs per NUMA node, do not.)
    #[default]
    Auto,
    /// Every pair at `max_pair_class` or better.
    All,
    /// At most this many per GPU (at least 1): one at the GPU's best level first, then
    /// the next best, each to the NIC with the fewest pairs so far, so that every NIC
    /// keeps partners when another one is used up.
    AtMost(usize),
}

impl std::str::FromStr for PairsPerGpu {
    type Err = crate::DraError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "auto" => Ok(PairsPerGpu::Auto),
            "all" => Ok(PairsPerGpu::All),
            n => match n.parse::<usize>() {
                Ok(k) if k >= 1 => Ok(PairsPerGpu::AtMost(k)),
                _ => Err(crate::DraError::BadPairsPerGpu(s.to_string())),
            },
        }
    }
}

impl std::fmt::Display for PairsPerGpu {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PairsPerGpu::Auto => f.write_str("auto"),
            PairsPerGpu::All => f.write_str("all"),
            PairsPerGpu::AtMost(k) => write!(f, "{k}"),
        }
    }
}

impl Default for PublishOptions {
    fn default() -> Self {
        PublishOptions {
            generation: 1,
            max_pair_class: PcieClass::Node,
            plain_devices: true,
            pair_devices: true,
            pairs_per_gpu: PairsPerGpu::Auto,
            mig: NodeMig::default(),
        }
    }
}

/// What a published device is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DeviceKind {
    /// One GPU.
    Gpu,
    /// One function of one physical NIC (chosen at prepare).
    Nic,
    /// One GPU with one function of one physical NIC.
    Pair,
    /// One MIG instance of a GPU.
    Mig,
    /// One MIG instance with one function of one physical NIC its parent pairs with.
    #[serde(rename = "mig-pair")]
    MigPair,
}

impl DeviceKind {
    /// The value of the `type` attribute.
    pub fn as_str(self) -> &'static str {
        match self {
            DeviceKind::Gpu => "gpu",
            DeviceKind::Nic => "nic",
            DeviceKind::Pair => "pair",
            DeviceKind::Mig => "mig",
            DeviceKind::MigPair => "mig-pair",
        }
    }
}

/// One counter a device consumes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CounterUse {
    /// Counter set name.
    pub set: String,
    /// Counter name (the GPU's or NIC's device name).
    pub counter: String,
    /// Amount consumed (1: one GPU, one NIC function, one memory slice; SM slices: the
    /// instance's).
    pub amount: u32,
}

/// A published device, resolved.
#[derive(Debug, Clone, Copy)]
pub enum DeviceRef<'a> {
    /// A plain GPU.
    Gpu(&'a GpuEntry),
    /// A plain NIC (one of its functions, chosen at prepare).
    Nic(&'a PhysicalNic),
    /// A pair.
    Pair {
        /// The pair.
        pair: &'a PairEntry,
        /// Its GPU.
        gpu: &'a GpuEntry,
        /// Its physical NIC.
        nic: &'a PhysicalNic,
    },
    /// A MIG instance.
    Mig {
        /// The instance.
        mig: &'a MigEntry,
        /// Its parent GPU.
        gpu: &'a GpuEntry,
    },
    /// A MIG instance with a NIC.
    MigPair {
        /// The MIG pair.
        pair: &'a MigPairEntry,
        /// The instance.
        mig: &'a MigEntry,
        /// Its parent's pair with the NIC (the class, NCCL path, GDR).
        parent_pair: &'a PairEntry,
        /// Its parent GPU.
        gpu: &'a GpuEntry,
        /// Its physical NIC.
        nic: &'a PhysicalNic,
    },
}

impl<'a> DeviceRef<'a> {
    /// The kind.
    pub fn kind(&self) -> DeviceKind {
        match self {
            DeviceRef::Gpu(_) => DeviceKind::Gpu,
            DeviceRef::Nic(_) => DeviceKind::Nic,
            DeviceRef::Pair { .. } => DeviceKind::Pair,
            DeviceRef::Mig { .. } => DeviceKind::Mig,
            DeviceRef::MigPair { .. } => DeviceKind::MigPair,
        }
    }

    /// The device name.
    pub fn name(&self) -> &'a str {
        match self {
            DeviceRef::Gpu(g) => &g.name,
            DeviceRef::Nic(n) => &n.name,
            DeviceRef::Pair { pair, .. } => &pair.name,
            DeviceRef::Mig { mig, .. } => &mig.name,
            DeviceRef::MigPair { pair, .. } => &pair.name,
        }
    }

    /// The whole GPU it takes, if any (a MIG instance takes none: see
    /// [`DeviceRef::mig`]).
    pub fn gpu(&self) -> Option<&'a GpuEntry> {
        match self {
            DeviceRef::Gpu(g) => Some(g),
            DeviceRef::Pair { gpu, .. } => Some(gpu),
            DeviceRef::Nic(_) | DeviceRef::Mig { .. } | DeviceRef::MigPair { .. } => None,
        }
    }

    /// The MIG instance it takes, with its parent GPU, if any.
    pub fn mig(&self) -> Option<(&'a MigEntry, &'a GpuEntry)> {
        match self {
            DeviceRef::Mig { mig, gpu } | DeviceRef::MigPair { mig, gpu, .. } => Some((mig, gpu)),
            _ => None,
        }
    }

    /// The GPU it sits on: the GPU it takes or its MIG instance's parent.
    pub fn parent_gpu(&self) -> Option<&'a GpuEntry> {
        self.gpu().or_else(|| self.mig().map(|(_, g)| g))
    }

    /// The physical NIC it takes one function of, if any.
    pub fn nic(&self) -> Option<&'a PhysicalNic> {
        match self {
            DeviceRef::Nic(n) => Some(n),
            DeviceRef::Pair { nic, .. } | DeviceRef::MigPair { nic, .. } => Some(nic),
            DeviceRef::Gpu(_) | DeviceRef::Mig { .. } => None,
        }
    }

    /// Every PCI address it stands for (the NIC's PF; the function is chosen at prepare;
    /// a MIG instance's parent).
    pub fn bdfs(&self) -> Vec<Bdf> {
        self.parent_gpu()
            .map(|g| g.bdf)
            .into_iter()
            .chain(self.nic().map(|n| n.bdf))
            .collect()
    }

    /// The counters it consumes: a GPU's counter (every memory and SM slice of a
    /// MIG-enabled GPU), a MIG instance's slices, one function of one NIC.
    pub fn counters(&self) -> Vec<CounterUse> {
        let mut out = Vec::new();
        if let Some(g) = self.gpu() {
            if g.mig_enabled {
                out.extend(mig_counters(
                    g,
                    0..crate::publish::mig::MEMORY_SLICES,
                    crate::publish::mig::SM_SLICES,
                ));
            } else {
                out.push(CounterUse {
                    set: g.counter_set.clone(),
                    counter: g.name.clone(),
                    amount: 1,
                });
            }
        }
        if let Some((m, g)) = self.mig() {
            out.extend(mig_counters(g, m.instance.slices(), m.instance.sm_slices));
        }
        if let Some(n) = self.nic() {
            out.push(CounterUse {
                set: n.counter_set.clone(),
                counter: n.name.clone(),
                amount: 1,
            });
        }
        out
    }
}

/// The counters of a MIG-enabled GPU's set that `slices` and `sm` SM slices take.
fn mig_counters(
    g: &GpuEntry,
    slices: impl Iterator<Item = u8>,
    sm: u8,
) -> impl Iterator<Item = CounterUse> {
    let set = g.counter_set.clone();
    slices
        .map(crate::publish::mig::memory_slice_counter)
        .chain(std::iter::once(
            crate::publish::mig::COUNTER_SM_SLICES.to_string(),
        ))
        .zip(std::iter::repeat(set))
        .map(move |(counter, set)| {
            let amount = if counter == crate::publish::mig::COUNTER_SM_SLICES {
                u32::from(sm)
            } else {
                1
            };
            CounterUse {
                set,
                counter,
                amount,
            }
        })
}

/// Every device a node publishes, with what the plugin needs to prepare it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Inventory {
    /// GPUs in address order.
    pub gpus: Vec<GpuEntry>,
    /// Physical NICs in address order.
    pub nics: Vec<PhysicalNic>,
    /// Pairs, best first: by NCCL preference (GDR, class, path), then GPU and NIC address.
    /// Empty when pair devices are not published ([`PublishOptions::pair_devices`]).
    pub pairs: Vec<PairEntry>,
    /// MIG instances of MIG-enabled GPUs, GPU by GPU in address order, by start.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub migs: Vec<MigEntry>,
    /// MIG instances with NICs: best class first, then GPU by GPU, instance by instance.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub mig_pairs: Vec<MigPairEntry>,
    /// Whether plain GPU and NIC devices are published.
    pub plain_devices: bool,
    /// GPUs under dynamic MIG (`crate::publish::mig::dynamic`), in address order: their MIG
    /// devices are placements the plugin creates at prepare (the whole GPU, in MIG mode,
    /// is not offered).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub mig_dynamic: Vec<Bdf>,
    #[serde(skip)]
    by_name: BTreeMap<String, (DeviceKind, usize)>,
}

impl Inventory {
    /// The inventory with default [`PublishOptions`].
    pub fn from_topology(topo: &Topology) -> Inventory {
        Inventory::new(topo, &PublishOptions::default())
    }

    /// Builds the inventory. Pure and deterministic: the same topology and options give
    /// the same names, order and counter sets.
    pub fn new(topo: &Topology, opts: &PublishOptions) -> Inventory {
        let cls = topo.classifier();
        let socket_of =
            |numa: Option<u32>| numa.and_then(|n| topo.numa_node(n)).and_then(|n| n.socket);

        // Fabric islands of more than one GPU, numbered in order.
        let mut fabric = vec![None; topo.gpus.len()];
        let mut island_no = 0;
        for island in topo.fabric_islands() {
            if island.len() > 1 {
                for g in island {
                    if let Some(slot) = fabric.get_mut(g) {
                        *slot = Some(island_no);
                    }
                }
                island_no += 1;
            }
        }

        let mut gpus: Vec<GpuEntry> = topo
            .gpus
            .iter()
            .enumerate()
            .map(|(i, g)| {
                let bdf = topo.gpu_bdf(i);
                let numa = topo.pci[g.pci].numa_node;
                GpuEntry {
                    name: names::gpu_device(bdf),
                    bdf,
                    index: i,
                    vendor: g.vendor,
                    model: g.model.clone(),
                    memory_mib: g.memory_mib,
                    uuid: g.uuid.clone(),
                    numa_node: numa,
                    socket: socket_of(numa),
                    pcie_root: topo.pcie_root(g.pci),
                    pcie_switch: topo
                        .nearest_switch(g.pci)
                        .and_then(|p| topo.pci.get(p))
                        .map(|d| d.bdf),
                    alignment_group: None,
                    fabric_domain: fabric[i],
                    device_nodes: g.device_nodes(),
                    counter_set: String::new(),
                    mig_enabled: opts.mig.gpu(bdf).is_some_and(|l| !l.instances.is_empty()),
                }
            })
            .collect();
        gpus.sort_by_key(|g| g.bdf);

        // Physical NICs: every function that is not a VF of a PF we know heads a group.
        let mut heads: Vec<usize> = Vec::new();
        let mut members: BTreeMap<Bdf, Vec<usize>> = BTreeMap::new();
        for (i, n) in topo.nics.iter().enumerate() {
            match &n.sriov {
                Sriov::Vf { pf, .. } if topo.nic_index(*pf).is_some() => {
                    members.entry(*pf).or_default().push(i);
                }
                _ => heads.push(i),
            }
        }
        let mut nics: Vec<PhysicalNic> = heads
            .into_iter()
            .map(|h| {
                let head = &topo.nics[h];
                let bdf = topo.nic_bdf(h);
                let mut vfs = members.remove(&bdf).unwrap_or_default();
                vfs.sort_by_key(|&v| match topo.nics[v].sriov {
                    Sriov::Vf { index, .. } => (index, topo.nic_bdf(v)),
                    _ => (u32::MAX, topo.nic_bdf(v)),
                });
                let functions = std::iter::once(h)
                    .chain(vfs)
                    .map(|f| {
                        let n = &topo.nics[f];
                        NicFunction {
                            bdf: topo.nic_bdf(f),
                            index: f,
                            vf: match n.sriov {
                                Sriov::Vf { index, .. } => Some(index),
                                _ => None,
                            },
                            netdev: n.netdev.clone(),
                            rdma: n.rdma.clone(),
                            port: n.ports.first().map(|p| p.number),
                            device_nodes: n.device_nodes(),
                        }
                    })
                    .collect();
                let pci = &topo.pci[head.pci];
                let numa = pci.numa_node;
                let bandwidth_bps = head
                    .speed_mbps
                    .filter(|s| *s > 0)
                    .map(|m| m.saturating_mul(1_000_000))
                    .or_else(|| {
                        head.ports
                            .first()
                            .and_then(|p| p.rate_gbps)
                            .map(|g| u64::from(g) * 1_000_000_000)
                    });
                PhysicalNic {
                    name: names::nic_device(bdf),
                    bdf,
                    index: h,
                    vendor: pci_vendor_name(pci.vendor),
                    functions,
                    numa_node: numa,
                    socket: socket_of(numa),
                    pcie_root: topo.pcie_root(head.pci),
                    pcie_switch: topo
                        .nearest_switch(head.pci)
                        .and_then(|p| topo.pci.get(p))
                        .map(|d| d.bdf),
                    alignment_group: None,
                    rdma_device: head.rdma.clone(),
                    netdev: head.netdev.clone(),
                    ib_only: head.ib_only(),
                    link_layer: head.link_layer().map(|l| l.as_sysfs().to_string()),
                    bandwidth_bps,
                    counter_set: String::new(),
                    rail: None,
                }
            })
            .collect();
        nics.sort_by_key(|n| n.bdf);

        // Paths between every GPU and every physical NIC (through the PF).
        let paths: Vec<Vec<GpuNicPath>> = gpus
            .iter()
            .map(|g| nics.iter().map(|n| cls.gpu_nic(g.index, n.index)).collect())
            .collect();

        // Alignment groups: connected components of the GDR relation.
        let total = gpus.len() + nics.len();
        let mut parent: Vec<usize> = (0..total).collect();
        fn find(p: &mut [usize], mut x: usize) -> usize {
            while p[x] != x {
                p[x] = p[p[x]];
                x = p[x];
            }
            x
        }
        let mut has_partner = vec![false; total];
        for (gi, row) in paths.iter().enumerate() {
            for (ni, p) in row.iter().enumerate() {
                if p.gdr && nics[ni].rdma_device.is_some() {
                    let (a, b) = (find(&mut parent, gi), find(&mut parent, gpus.len() + ni));
                    if a != b {
                        parent[a.max(b)] = a.min(b);
                    }
                    has_partner[gi] = true;
                    has_partner[gpus.len() + ni] = true;
                }
            }
        }
        // Number components by their smallest member address (GPUs and NICs together).
        let mut order: Vec<(Bdf, usize)> = gpus
            .iter()
            .map(|g| g.bdf)
            .chain(nics.iter().map(|n| n.bdf))
            .enumerate()
            .map(|(i, b)| (b, i))
            .collect();
        order.sort();
        let mut group_no: BTreeMap<usize, u32> = BTreeMap::new();
        for (_, i) in &order {
            if has_partner[*i] {
                let r = find(&mut parent, *i);
                let next = group_no.len() as u32;
                group_no.entry(r).or_insert(next);
            }
        }
        for i in 0..total {
            if !has_partner[i] {
                continue;
            }
            let g = group_no.get(&find(&mut parent, i)).copied();
            if i < gpus.len() {
                gpus[i].alignment_group = g;
            } else {
                nics[i - gpus.len()].alignment_group = g;
            }
        }

        // Counter sets: GPU counters first, then NIC counters, 32 per set.
        // A MIG-enabled GPU has a set of its own instead.
        let mut plain = 0;
        for g in &mut gpus {
            if g.mig_enabled {
                g.counter_set = names::mig_counter_set(g.bdf);
            } else {
                g.counter_set = format!("gpus-{}", plain / SET_SIZE);
                plain += 1;
            }
        }
        for (i, n) in nics.iter_mut().enumerate() {
            n.counter_set = format!("nics-{}", i / SET_SIZE);
        }

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
            Some(k) => budget_pairs(&paths, &candidates, k),
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
        let migs = crate::publish::mig::entries(&gpus, &opts.mig);
        let mut mig_dynamic: Vec<Bdf> = (opts.mig.gpus.iter())
            .filter(|g| g.dynamic)
            .map(|g| g.bdf)
            .collect();
        mig_dynamic.sort();
        let mig_pairs = if opts.pair_devices {
            crate::publish::mig::pair_entries(&gpus, &nics, &pairs, &migs, &mig_dynamic)
        } else {
            Vec::new()
        };

        let mut by_name = BTreeMap::new();
        for (i, g) in gpus.iter().enumerate() {
            by_name.insert(g.name.clone(), (DeviceKind::Gpu, i));
        }
        for (i, n) in nics.iter().enumerate() {
            by_name.insert(n.name.clone(), (DeviceKind::Nic, i));
        }
        for (i, p) in pairs.iter().enumerate() {
            by_name.insert(p.name.clone(), (DeviceKind::Pair, i));
        }
        for (i, m) in migs.iter().enumerate() {
            by_name.insert(m.name.clone(), (DeviceKind::Mig, i));
        }
        for (i, p) in mig_pairs.iter().enumerate() {
            by_name.insert(p.name.clone(), (DeviceKind::MigPair, i));
        }
        Inventory {
            gpus,
            nics,
            pairs,
            migs,
            mig_pairs,
            mig_dynamic,
            // Without pairs, plain devices are all there is.
            plain_devices: opts.plain_devices || !opts.pair_devices,
            by_name,
        }
    }

    /// The published device with this name. Plain GPU and NIC names resolve only when
    /// plain devices are published.
    pub fn device(&self, name: &str) -> Option<DeviceRef<'_>> {
        let (kind, i) = *self.by_name.get(name)?;
        match kind {
            DeviceKind::Gpu if self.plain_devices => self.gpus.get(i).map(DeviceRef::Gpu),
            DeviceKind::Nic if self.plain_devices => self.nics.get(i).map(DeviceRef::Nic),
            DeviceKind::Pair => {
                let pair = self.pairs.get(i)?;
                Some(DeviceRef::Pair {
                    pair,
                    gpu: self.gpus.get(pair.gpu)?,
                    nic: self.nics.get(pair.nic)?,
                })
            }
            DeviceKind::Mig if self.plain_devices => {
                let mig = self.migs.get(i)?;
                Some(DeviceRef::Mig {
                    mig,
                    gpu: self.gpus.get(mig.gpu)?,
                })
            }
            DeviceKind::MigPair => {
                let pair = self.mig_pairs.get(i)?;
                let mig = self.migs.get(pair.mig)?;
                let parent_pair = self.pairs.get(pair.pair)?;
                Some(DeviceRef::MigPair {
                    pair,
                    mig,
                    parent_pair,
                    gpu: self.gpus.get(mig.gpu)?,
                    nic: self.nics.get(parent_pair.nic)?,
                })
            }
            _ => None,
        }
    }

    /// The GPU entry with this name (whether or not plain GPUs are published).
    pub fn gpu(&self, name: &str) -> Option<&GpuEntry> {
        self.gpus.iter().find(|g| g.name == name)
    }

    /// The physical NIC entry with this name.
    pub fn nic(&self, name: &str) -> Option<&PhysicalNic> {
        self.nics.iter().find(|n| n.name == name)
    }

    /// Whether the GPU at this address is under dynamic MIG: its MIG devices are
    /// created at prepare.
    pub fn is_mig_dynamic(&self, bdf: Bdf) -> bool {
        self.mig_dynamic.binary_search(&bdf).is_ok()
    }

    /// The GPU at this address.
    pub fn gpu_by_bdf(&self, bdf: Bdf) -> Option<&GpuEntry> {
        self.gpus.iter().find(|g| g.bdf == bdf)
    }

    /// The physical NIC owning the function at this address (PF or VF).
    pub fn nic_by_function(&self, bdf: Bdf) -> Option<&PhysicalNic> {
        self.nics
            .iter()
            .find(|n| n.functions.iter().any(|f| f.bdf == bdf))
    }

    /// Every published device in slice order: pairs (best first), then plain GPUs, then
    /// plain NICs; on a node with MIG, then MIG pairs (best first, GPU by GPU) and MIG
    /// instances (GPU by GPU).
    ///
    /// A GPU in MIG mode is published through its instances only (static MIG): CUDA
    /// sees no device on the whole GPU, so neither it nor its whole-GPU pairs are
    /// offered. Their names still resolve ([`Inventory::device`]), so prepare can name
    /// what an allocation written by hand got wrong. The same holds under dynamic MIG:
    /// the GPU is in MIG mode, so only its placements are offered.
    pub fn devices(&self) -> Vec<DeviceRef<'_>> {
        let whole = |g: &GpuEntry| !g.mig_enabled;
        let mut out: Vec<DeviceRef<'_>> = self
            .pairs
            .iter()
            .filter(|p| whole(&self.gpus[p.gpu]))
            .filter_map(|p| self.device(&p.name))
            .collect();
        if self.plain_devices {
            out.extend(self.gpus.iter().filter(|g| whole(g)).map(DeviceRef::Gpu));
            out.extend(self.nics.iter().map(DeviceRef::Nic));
        }
        out.extend(self.mig_pairs.iter().filter_map(|p| self.device(&p.name)));
        out.extend(self.migs.iter().filter_map(|m| self.device(&m.name)));
        out
    }
}

/// A short vendor name for a PCI vendor id.
fn pci_vendor_name(id: u16) -> String {
    use topoalign_topology::pci::vendor;
    match id {
        vendor::MELLANOX => "mellanox".into(),
        vendor::BROADCOM => "broadcom".into(),
        vendor::INTEL => "intel".into(),
        vendor::NVIDIA => "nvidia".into(),
        vendor::AMD => "amd".into(),
        other => format!("{other:04x}"),
    }
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
