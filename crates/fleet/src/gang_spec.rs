//! What a gang run (`simulate --gangs`) is asked: the gangs, the domain they stay inside
//! and the fleet's layout ([`GangSpec`]), with the fleet and seed ([`GangConfig`]). Read by
//! the simulation (`crate::gangs`), its report (`crate::gang_report`) and the flags.

use serde::Serialize;
use topoalign_fabric::Level;
use topoalign_topology::PcieClass;

use crate::engine::NodeGroup;
use crate::error::FleetError;
use crate::gang_node::RailRule;

/// The domain a gang stays inside.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
#[serde(rename_all = "lowercase")]
pub enum DomainLevel {
    /// One NVLink domain (a rack).
    #[default]
    Nvlink,
    /// One leaf (a group of racks under one set of rail switches).
    Leaf,
}

impl DomainLevel {
    /// The name on the command line.
    pub fn as_str(self) -> &'static str {
        match self {
            DomainLevel::Nvlink => "nvlink",
            DomainLevel::Leaf => "leaf",
        }
    }

    /// The gang model's level.
    pub fn level(self) -> Level {
        match self {
            DomainLevel::Nvlink => Level::Nvlink,
            DomainLevel::Leaf => Level::LEAF,
        }
    }
}

/// Required: inside one domain or not at all; preferred: spread when no domain fits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
#[serde(rename_all = "lowercase")]
pub enum DomainMode {
    /// Inside one domain or not at all.
    #[default]
    Required,
    /// Inside one domain where possible.
    Preferred,
}

impl DomainMode {
    /// The name on the command line.
    pub fn as_str(self) -> &'static str {
        match self {
            DomainMode::Required => "required",
            DomainMode::Preferred => "preferred",
        }
    }
}

/// The gangs and the fleet's layout.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct GangSpec {
    /// Gangs arriving.
    pub gangs: u32,
    /// Pods per gang.
    pub pods: u32,
    /// GPU+NIC pairs per pod.
    pub pairs: u32,
    /// The domain level.
    pub domain: DomainLevel,
    /// Required or preferred.
    pub mode: DomainMode,
    /// Nodes per rack (NVLink domain).
    pub rack_nodes: usize,
    /// Racks per leaf.
    pub racks_per_leaf: usize,
    /// Worst pair class topoalign accepts (besides GPUDirect RDMA); `None`: any class
    /// with GDR.
    pub class: Option<PcieClass>,
    /// Share of GPUs and, independently, of NICs other tenants hold.
    pub background: f64,
    /// Where rails come from.
    pub rails: RailRule,
}

/// Everything a gang run needs.
#[derive(Debug, Clone)]
pub struct GangConfig {
    /// The fleet, in node order.
    pub fleet: Vec<NodeGroup>,
    /// The gangs and layout.
    pub spec: GangSpec,
    /// The seed of the background.
    pub seed: u64,
    /// CPUs per GPU (pods and background).
    pub cpus_per_gpu: u32,
    /// The DRA search budget per node.
    pub dra_budget: u64,
}

impl GangConfig {
    /// Checks what can be checked without the node types.
    pub fn validate(&self) -> Result<(), FleetError> {
        let s = &self.spec;
        crate::engine::check_node_count(&self.fleet)?;
        let at_least_one = |param, v: u64| {
            if v == 0 {
                Err(FleetError::invalid(param, 0, "at least 1"))
            } else {
                Ok(())
            }
        };
        at_least_one("--gangs", u64::from(s.gangs))?;
        at_least_one("--gang-pods", u64::from(s.pods))?;
        at_least_one("--gang-pairs", u64::from(s.pairs))?;
        at_least_one("--rack-nodes", s.rack_nodes as u64)?;
        at_least_one("--racks-per-leaf", s.racks_per_leaf as u64)?;
        at_least_one("--dra-budget", self.dra_budget)?;
        if s.gangs > 1_000_000 {
            return Err(FleetError::invalid(
                "--gangs",
                s.gangs,
                "at most 1000000 gangs",
            ));
        }
        if !(s.background.is_finite() && (0.0..1.0).contains(&s.background)) {
            return Err(FleetError::invalid(
                "--background",
                s.background,
                "a share from 0 up to (not including) 1",
            ));
        }
        if s.class == Some(PcieClass::Sys) {
            return Err(FleetError::invalid(
                "--gang-class",
                "SYS",
                "PIX, PXB, PHB or NODE (SYS pairs are not published)",
            ));
        }
        Ok(())
    }

    /// The domain (index) of node `i`.
    pub(crate) fn domain_of(&self, i: usize) -> usize {
        let rack = i / self.spec.rack_nodes;
        match self.spec.domain {
            DomainLevel::Nvlink => rack,
            DomainLevel::Leaf => rack / self.spec.racks_per_leaf,
        }
    }

    /// The label value of domain `d`.
    pub(crate) fn domain_name(&self, d: usize) -> String {
        match self.spec.domain {
            DomainLevel::Nvlink => format!("rack-{d}"),
            DomainLevel::Leaf => format!("leaf-{d}"),
        }
    }
}
