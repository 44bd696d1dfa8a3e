//! A node type as `simulate --gangs` sees it: its rails (from the gang model,
//! [`topoalign_fabric::nic_rails`]) and the two claims a gang's pod can make there, both
//! searched by the one allocator model ([`ClaimSearch`]):
//!
//! - `stock`: the stock drivers' GPUs and NICs ([`crate::dra::publish`]), a claim of K
//!   GPUs and K NICs with no constraint between them (first fit, no rails);
//! - `topoalign`: topoalign's pair devices with the `rail` attribute
//!   ([`Inventory::set_rails`]), a claim of K pairs on which NCCL uses GPUDirect RDMA
//!   (at `--gang-class` or better when given), each on its own physical NIC, pinned to a
//!   rail set with one pair per rail ([`pin_rails`]), one claim per candidate set.

use std::collections::BTreeSet;

use topoalign_dra::publish::pin_rails;
use topoalign_dra::{
    DeviceRef,
    alloc::ClaimSearch,
    claim::{ClaimSpec, claim_spec},
    publish::{Inventory, device_classes, slices_for},
};
use topoalign_fabric::{NicKey, RailKind};
use topoalign_fabric::{NicRails, RailSource, nic_rails};
use topoalign_topology::PcieClass;

use crate::dra::{Allocation, DraNode};
use crate::error::FleetError;
use crate::node::{Assignment, NodeModel, NodeState};

/// Where each node type's rails come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
#[serde(rename_all = "kebab-case")]
pub enum RailRule {
    /// `nearest-gpu` where it resolves (every GPU has its own nearest NIC), else
    /// `nic-order`.
    #[default]
    Auto,
    /// The gang model's rule: the NIC nearest GPU i is rail i.
    NearestGpu,
    /// An operator map written for the node type: RDMA NIC k in address order is rail k.
    NicOrder,
}

/// What one device of topoalign's publication takes, by position in
/// [`NodeModel::gpus`] / [`NodeModel::nics`].
#[derive(Debug, Clone, Copy)]
enum Dev {
    Gpu(usize),
    Nic(usize),
    Pair(usize, usize),
}

/// A node type with its rails and the gang claims prepared.
#[derive(Debug)]
pub(crate) struct GangKind {
    /// The node model.
    pub model: NodeModel,
    /// Each physical NIC's rail, and where that came from.
    pub rails: NicRails,
    /// Rail per NIC position (`None`: the NIC is on no rail).
    pub nic_rail: Vec<Option<u32>>,
    stock_dra: DraNode,
    stock_claim: ClaimSearch,
    places: Vec<Dev>,
    pinned: Vec<ClaimSearch>,
}

/// Resolves a node type's rails with `rule`.
/// Node types whose pods get SR-IOV VFs are refused: a gang's pair takes a whole
/// physical NIC (its rail).
pub(crate) fn resolve_rails(model: &NodeModel, rule: RailRule) -> Result<NicRails, FleetError> {
    let topo = &*model.topology;
    if model.nics_are_vfs {
        return Err(FleetError::UnusableNode {
            profile: topo.name.clone(),
            reason: "its pods get SR-IOV VFs, but a gang's pair takes a whole physical NIC (its rail); use a profile whose pods get PFs (gb300-4, dgx-h100)".into(),
        });
    }
    let nearest = || {
        let src = RailSource {
            file: format!("built-in for {}", topo.name),
            rails: None,
            kind: RailKind::NearestGpu,
            shared: BTreeSet::new(),
        };
        nic_rails(topo, &src)
    };
    let order = || {
        let entries = (model.nic_bdf.iter().enumerate())
            .map(|(k, bdf)| (bdf.to_string(), NicKey::Pci(*bdf), k as u32))
            .collect();
        let src = RailSource {
            file: format!(
                "(built-in for {}: RDMA NIC k in address order is rail k)",
                topo.name
            ),
            rails: Some(model.nic_bdf.len() as u32),
            kind: RailKind::Map(entries),
            shared: BTreeSet::new(),
        };
        nic_rails(topo, &src)
    };
    Ok(match rule {
        RailRule::NearestGpu => nearest()?,
        RailRule::NicOrder => order()?,
        RailRule::Auto => match nearest() {
            Ok(r) => r,
            Err(_) => order()?,
        },
    })
}

impl GangKind {
    /// Prepares a node type with its rails ([`resolve_rails`]) for gangs of `pairs` pairs
    /// per pod, with one pinned claim per rail set of `rail_sets`.
    pub(crate) fn new(
        model: NodeModel,
        rails: NicRails,
        pairs: u32,
        class: Option<PcieClass>,
        rail_sets: &[BTreeSet<u32>],
    ) -> Result<GangKind, FleetError> {
        let name = model.topology.name.clone();
        let unusable = |reason: String| FleetError::UnusableNode {
            profile: name.clone(),
            reason,
        };
        let nic_rail = model.nic_bdf.iter().map(|&b| rails.rail_of(b)).collect();
        let stock_dra = DraNode::new(&model, &name)?;
        let stock_claim = stock_dra.unmatched_claim(pairs)?;
        let mut inv = Inventory::from_topology(&model.topology);
        inv.set_rails(|b| rails.rail_of(b));
        let slices = slices_for(&inv, &name, 1)?;
        let devices = topoalign_dra::alloc::NodeDevices::gather(&slices, &name)?;
        let mut places = Vec::with_capacity(devices.len());
        for id in devices.ids() {
            let gpu = |g: &topoalign_dra::publish::GpuEntry| model.gpu_position(g.bdf);
            let nic = |n: &topoalign_dra::publish::PhysicalNic| model.nic_position(n.bdf);
            let place = match inv.device(&id.device) {
                Some(DeviceRef::Gpu(g)) => gpu(g).map(Dev::Gpu),
                Some(DeviceRef::Nic(n)) => nic(n).map(Dev::Nic),
                Some(DeviceRef::Pair { gpu: g, nic: n, .. }) => {
                    gpu(g).zip(nic(n)).map(|(g, n)| Dev::Pair(g, n))
                }
                // The simulated nodes have no MIG state, so none is published.
                Some(DeviceRef::Mig { .. } | DeviceRef::MigPair { .. }) | None => None,
            };
            places.push(place.ok_or_else(|| {
                unusable(format!(
                    "published device {} is not a GPU or NIC pods get",
                    id.device
                ))
            })?);
        }
        let classes = device_classes();
        let mut pinned = Vec::with_capacity(rail_sets.len());
        for set in rail_sets {
            let spec = ClaimSpec {
                name: "gang-pairs".into(),
                max_rank: class.map(PcieClass::rank),
                require_gdr: true,
                distinct_nics: true,
                ..ClaimSpec::pairs(pairs)
            };
            let mut claim = claim_spec(&spec)?;
            pin_rails(&mut claim, set, true)?;
            pinned.push(ClaimSearch::new(&claim, &classes, &devices)?);
        }
        Ok(GangKind {
            model,
            rails,
            nic_rail,
            stock_dra,
            stock_claim,
            places,
            pinned,
        })
    }

    /// The stock pod's devices on a node in `state`: first fit of K GPUs and K NICs.
    pub(crate) fn stock(
        &self,
        state: &NodeState,
        pairs: u32,
        cpus: u32,
        budget: u64,
    ) -> Option<Assignment> {
        match self
            .stock_dra
            .search(&self.stock_claim, state, pairs, budget)
        {
            Allocation::Pairs { gpus, nics } => Some(Assignment {
                gpus,
                nics,
                shared_cpus: cpus,
                ..Assignment::default()
            }),
            Allocation::NoFit | Allocation::BudgetExceeded => None,
        }
    }

    /// The topoalign pod's devices on a node in `state`: K pairs pinned to rail set
    /// number `set` (of the sets given to [`GangKind::new`]).
    pub(crate) fn pinned(
        &self,
        set: usize,
        state: &NodeState,
        cpus: u32,
        budget: u64,
    ) -> Option<Assignment> {
        let claim = self.pinned.get(set)?;
        let in_use: Vec<bool> = (self.places.iter())
            .map(|p| match *p {
                Dev::Gpu(g) => state.gpu_used[g],
                Dev::Nic(n) => state.nic_used[n],
                // A pair's GPU and NIC counters are consumed by the plain devices above.
                Dev::Pair(..) => false,
            })
            .collect();
        let devices = claim.search(&in_use, budget).devices?;
        let mut a = Assignment {
            shared_cpus: cpus,
            ..Assignment::default()
        };
        for d in devices {
            if let Some(Dev::Pair(g, n)) = self.places.get(d) {
                a.gpus.push(*g);
                a.nics.push(*n);
            }
        }
        Some(a)
    }

    /// The rails of an assignment's NICs (`None` when one is on no rail).
    pub(crate) fn rails_of(&self, a: &Assignment) -> Option<BTreeSet<u32>> {
        a.nics.iter().map(|&n| self.nic_rail[n]).collect()
    }
}
