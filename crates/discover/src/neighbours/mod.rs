//! What a node's NICs are cabled to ([`Neighbours`](topoalign_topology::Neighbours)): LLDP neighbours from lldpd
//! (`lldp`), InfiniBand ports from sysfs and their switches from a saved `ibnetdiscover`
//! (`ib`), matched to the topology's NICs by network interface and by RDMA device.
//!
//! The readers are I/O (files, sysfs, `lldpctl`); the decisions made from the facts
//! (rails, the leaf label) are the gang model's.

mod ib;
mod lldp;

use std::path::{Path, PathBuf};

use thiserror::Error;
use topoalign_topology::{IbPort, LldpNeighbour, Neighbours, Topology};

pub use ib::{IbLink, apply_ib_links, parse_ibnetdiscover, read_ib_ports};
pub use lldp::parse_lldpctl_json;

use crate::error::{DiscoverError, ToolError};
use crate::parse::read_text;

/// Where the LLDP neighbours come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LldpFrom {
    /// A saved `lldpctl -f json` output.
    File(PathBuf),
    /// Run this program (`lldpctl`) with `-f json`.
    Run(String),
}

/// The neighbour sources to read; each is optional.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NeighbourSources {
    /// LLDP neighbours.
    pub lldp: Option<LldpFrom>,
    /// A root (`/` on a host) whose `sys/class/infiniband` holds the IB ports.
    pub ib_root: Option<PathBuf>,
    /// A saved `ibnetdiscover` output naming each host port's switch (needs `ib_root`).
    pub ibnetdiscover: Option<PathBuf>,
}

/// Why the neighbours could not be read.
#[derive(Debug, Error)]
pub enum NeighbourError {
    /// A file or sysfs entry did not read.
    #[error(transparent)]
    Discover(#[from] DiscoverError),
    /// `lldpctl` gave no answer.
    #[error(transparent)]
    Tool(#[from] ToolError),
    /// A fabric scan was given without the IB ports to match it to.
    #[error(
        "{0}: an ibnetdiscover file needs the InfiniBand ports (a sysfs root) to match its host ports to"
    )]
    ScanWithoutPorts(PathBuf),
}

/// Reads the sources and matches them to the NICs of `topo`. Returns the neighbours
/// and warnings (an interface or RDMA device that is no NIC of the topology, a scan that
/// names none of the node's ports).
pub fn read_neighbours(
    topo: &Topology,
    sources: &NeighbourSources,
) -> Result<(Neighbours, Vec<String>), NeighbourError> {
    let mut said = Vec::new();
    let lldp = match &sources.lldp {
        None => Vec::new(),
        Some(LldpFrom::File(path)) => {
            said.push(format!("lldpctl -f json ({})", path.display()));
            parse_lldpctl_json(&read_text(path)?, path)?
        }
        Some(LldpFrom::Run(program)) => {
            said.push(format!("{program} -f json"));
            let text = crate::run_checked(program, &["-f", "json"])?;
            parse_lldpctl_json(&text, Path::new(&format!("`{program} -f json`")))?
        }
    };
    let mut warnings = Vec::new();
    let mut ib = match &sources.ib_root {
        Some(root) => {
            said.push(format!("InfiniBand ports under {}", root.display()));
            read_ib_ports(root)?
        }
        None => Vec::new(),
    };
    if let Some(path) = &sources.ibnetdiscover {
        if sources.ib_root.is_none() {
            return Err(NeighbourError::ScanWithoutPorts(path.clone()));
        }
        said.push(format!("ibnetdiscover ({})", path.display()));
        let links = parse_ibnetdiscover(&read_text(path)?, path)?;
        if apply_ib_links(&mut ib, &links) == 0 && !ib.is_empty() {
            warnings.push(format!(
                "{}: names none of this node's InfiniBand ports (matched by port GUID)",
                path.display()
            ));
        }
    }
    let (mut n, more) = match_to_nics(topo, &lldp, &ib);
    n.sources = said;
    warnings.extend(more);
    Ok((n, warnings))
}

/// Puts each LLDP neighbour on the NIC whose network interface heard it, and each IB
/// port on the NIC of its RDMA device (the first port of a device wins). Anything that
/// matches no NIC becomes a warning.
pub fn match_to_nics(
    topo: &Topology,
    lldp: &[LldpNeighbour],
    ib: &[IbPort],
) -> (Neighbours, Vec<String>) {
    let mut out = Neighbours::default();
    let mut warnings = Vec::new();
    for l in lldp {
        match (0..topo.nics.len()).find(|&n| topo.nics[n].netdev.as_deref() == Some(&l.interface)) {
            Some(n) => out
                .nics
                .entry(topo.nic_bdf(n))
                .or_default()
                .lldp
                .push(l.clone()),
            None => warnings.push(format!(
                "LLDP neighbour {} on {}: no NIC of {} has this interface; ignored",
                l.chassis_name
                    .as_deref()
                    .or(l.chassis_id.as_deref())
                    .unwrap_or("(unnamed)"),
                l.interface,
                topo.name
            )),
        }
    }
    for p in ib {
        match (0..topo.nics.len()).find(|&n| topo.nics[n].rdma.as_deref() == Some(&p.device)) {
            Some(n) => {
                let slot = &mut out.nics.entry(topo.nic_bdf(n)).or_default().ib;
                match slot {
                    Some(first) => warnings.push(format!(
                        "{} port {}: the NIC's port {} is used; ignored",
                        p.device, p.port, first.port
                    )),
                    None => *slot = Some(p.clone()),
                }
            }
            None => warnings.push(format!(
                "InfiniBand device {}: no NIC of {} has it; ignored",
                p.device, topo.name
            )),
        }
    }
    (out, warnings)
}
