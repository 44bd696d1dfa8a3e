//! The node's published devices, derived from a [`Topology`]: what the ResourceSlices
//! say and what the kubelet plugin needs to prepare an allocated device.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use topoalign_topology::{Bdf, PcieClass, Topology};

use crate::publish::entries::{GpuEntry, PairEntry, PhysicalNic};
use crate::publish::mig::{MigEntry, MigPairEntry, NodeMig};

mod gpu;
mod locality;
mod mig;
mod nic;
mod pair;

use locality::Locality;

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
    ///
    /// One builder per device kind, in `inventory/`: GPUs (`gpu`) and physical NICs
    /// (`nic`) each take their place from the shared `Locality` of their PCI function
    /// (NUMA node, socket, `pcieRoot`, switch); the GDR relation between them gives both
    /// their alignment group; pairs (`pair`) are built over the GPU×NIC paths, MIG
    /// instances and MIG pairs (`mig`) over the GPUs and pairs.
    pub fn new(topo: &Topology, opts: &PublishOptions) -> Inventory {
        let mut gpus = gpu::gpus(topo, &opts.mig);
        let mut nics = nic::nics(topo);
        let paths = pair::paths(topo, &gpus, &nics);
        locality::alignment_groups(&paths, &mut gpus, &mut nics);
        // Counter sets: GPU counters first, then NIC counters, 32 per set.
        gpu::counter_sets(&mut gpus);
        nic::counter_sets(&mut nics);
        let pairs = pair::pairs(&paths, &gpus, &nics, opts);
        let migs = mig::migs(&gpus, &opts.mig);
        let mig_dynamic = mig::dynamic(&opts.mig);
        let mig_pairs = if opts.pair_devices {
            mig::mig_pairs(&gpus, &nics, &pairs, &migs, &mig_dynamic)
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
